package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/straitgw/strait/internal/kms/awskms"
)

// keysKMS is the KMS `strait keys` manages: the vault, or AWS KMS.
type keysKMS struct {
	kind, region, endpoint *string
}

// kmsFlags registers --kms, --region and --endpoint.
func kmsFlags(fs *flag.FlagSet) keysKMS {
	return keysKMS{
		kind:     fs.String("kms", "vault", "the KMS: vault (a filesystem vault, --vault) or aws (AWS KMS, credentials from the standard AWS chain)"),
		region:   fs.String("region", "", "with --kms aws: the AWS region (default: AWS_REGION or the shared config file)"),
		endpoint: fs.String("endpoint", "", "with --kms aws: the KMS endpoint URL (default: AWS's own, or AWS_ENDPOINT_URL_KMS)"),
	}
}

func (k keysKMS) aws() bool { return *k.kind == "aws" }

// checkVault is the error for a --kms that is neither aws nor vault.
func (k keysKMS) checkVault() error {
	if *k.kind != "vault" {
		return fmt.Errorf("--kms %q: want vault (a filesystem vault) or aws (AWS KMS)", *k.kind)
	}
	return nil
}

// open checks --kms and opens AWS KMS.
func (k keysKMS) open(ctx context.Context) (*awskms.KMS, error) {
	return awskms.New(ctx, awskms.Options{Region: *k.region, Endpoint: *k.endpoint})
}

// awsTimeout bounds one `strait keys` command against AWS KMS.
const awsTimeout = 30 * time.Second

func awsKeysCreate(ctx context.Context, k keysKMS, alias string, withHMAC bool, stdout io.Writer) error {
	a, err := k.open(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, awsTimeout)
	defer cancel()
	made, err := a.CreateKEK(ctx, alias, withHMAC)
	for _, ki := range made {
		fmt.Fprintf(stdout, "created %s, KMS key %s (%s), in %s\n", ki.Alias, ki.KeyID, ki.Usage, a.Name())
	}
	if errors.Is(err, awskms.ErrAliasExists) {
		return fmt.Errorf("%w: move it to a new key with '%s keys rotate --kms aws %s'", err, selfCommand(), alias)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "Deleting a KMS key makes data encrypted under it unreadable: AWS KMS waits 7 to 30 days before it does.")
	return nil
}

func awsKeysRotate(ctx context.Context, k keysKMS, alias string, stdout io.Writer) error {
	a, err := k.open(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, awsTimeout)
	defer cancel()
	old, next, err := a.RotateKEK(ctx, alias)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rotated %s: it now names KMS key %s, in %s\n", alias, next.KeyID, a.Name())
	fmt.Fprintf(stdout, "The previous key %s stays: data encrypted under it still decrypts while it is enabled.\n", old.KeyID)
	return nil
}

func awsKeysList(ctx context.Context, k keysKMS, asJSON bool, stdout, stderr io.Writer) error {
	a, err := k.open(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, awsTimeout)
	defer cancel()
	keys, err := a.ListKEKs(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		if keys == nil {
			keys = []awskms.KeyInfo{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(keys)
	}
	if len(keys) == 0 {
		fmt.Fprintf(stderr, "no aliases in %s; create a key with '%s keys create --kms aws alias/NAME'\n", a.Name(), selfCommand())
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ALIAS\tKEY\tCREATED\tSTATE\tUSAGE")
	for _, ki := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ki.Alias, ki.KeyID, ki.Created.Format(time.RFC3339), ki.State, ki.Usage)
	}
	return tw.Flush()
}
