package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/kms/vault"
)

// defaultVault is the vault `strait keys` uses without --vault or STRAIT_VAULT.
const defaultVault = "vault"

// keysCommands are the subcommands of `strait keys`.
func keysCommands() []command {
	return []command{
		{"create", "create a key-encryption key (NAME) with its first version", runKeysCreate},
		{"rotate", "add a version to a key-encryption key (NAME); new data keys use it, old versions still decrypt", runKeysRotate},
		{"list", "list key-encryption keys, their versions and creation times (never key material)", runKeysList},
	}
}

// runKeys manages the key-encryption keys of a filesystem vault (docs/kms.md).
func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runGroup(ctx, "keys", "<command> [--vault PATH | --kms aws] [NAME]", keysCommands(), func(w io.Writer) {
		fmt.Fprintf(w, "\nThe vault is --vault PATH, else $STRAIT_VAULT, else ./%s: a directory (mode 0700, one file per key,\n", defaultVault)
		fmt.Fprintln(w, "mode 0600) or a single file ending in .json. With --kms aws the keys are AWS KMS keys named by alias,")
		fmt.Fprintln(w, "credentials and region from the standard AWS chain. Run 'strait keys <command> -h' for its flags. See docs/kms.md.")
	}, args, stdout, stderr)
}

// vaultFlag registers --vault, defaulting to $STRAIT_VAULT, else ./vault.
func vaultFlag(fs *flag.FlagSet) *string {
	def := os.Getenv("STRAIT_VAULT")
	if def == "" {
		def = defaultVault
	}
	return fs.String("vault", def, "vault directory, or single vault file ending in .json; $STRAIT_VAULT sets the default")
}

// parseWithArg parses flags that may come before or after the one positional argument, what (a key name,
// a user name).
func parseWithArg(fs *flag.FlagSet, args []string, what string) (string, error) {
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", err
		}
		return "", errUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(fs.Output(), "%s: missing the %s\n", fs.Name(), what)
		fs.Usage()
		return "", errUsage
	}
	name := fs.Arg(0)
	if err := parse(fs, fs.Args()[1:]); err != nil { // flags after the name
		return "", err
	}
	return name, nil
}

func runKeysCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("keys create", stdout, stderr)
	fs.Usage = keysUsage(fs, "create [--vault PATH | --kms aws [--hmac]] NAME",
		"Creates the key-encryption key NAME (letters, digits, '.', '_', '-') with one version of 32 random bytes.\n"+
			"Creates the vault if it is missing. Fails if NAME exists: use 'strait keys rotate NAME'.\n"+
			"With --kms aws, NAME is an alias (alias/NAME) given to a new symmetric AWS KMS key.")
	path := vaultFlag(fs)
	backend := kmsFlags(fs)
	withHMAC := fs.Bool("hmac", false, "with --kms aws: also create the HMAC key (alias NAME-hmac) that deterministic encryption (encrypt_key) needs")
	name, err := parseWithArg(fs, args, "key name")
	if err != nil {
		return err
	}
	if backend.aws() {
		return awsKeysCreate(ctx, backend, name, *withHMAC, stdout)
	}
	if err := backend.checkVault(); err != nil {
		return err
	}
	// The vault's own message would suggest a rotate without --vault.
	if existing, err := vault.ListKeys(*path); err == nil {
		for _, k := range existing {
			if k.Name == name {
				return fmt.Errorf("key-encryption key %q already exists in %s (newest version %d): add a version with '%s'",
					name, vaultPath(*path), newest(k).Version, keysHint("rotate", *path, name))
			}
		}
	}
	ki, err := vault.CreateKey(*path, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "created key-encryption key %s, version %d, in %s\n", ki.Name, newest(ki).Version, vaultPath(*path))
	fmt.Fprintln(stdout, "Back up the vault: data encrypted under a key that is lost cannot be decrypted.")
	return nil
}

func runKeysRotate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("keys rotate", stdout, stderr)
	fs.Usage = keysUsage(fs, "rotate [--vault PATH | --kms aws] NAME",
		"Adds a version to the key-encryption key NAME. Gateways using the vault wrap new data keys with it within\n"+
			"about a second, without a restart (docs/kms.md); older versions still decrypt.\n"+
			"With --kms aws, moves the alias NAME to a new AWS KMS key; the old key stays enabled and still decrypts.")
	path := vaultFlag(fs)
	backend := kmsFlags(fs)
	name, err := parseWithArg(fs, args, "key name")
	if err != nil {
		return err
	}
	if backend.aws() {
		return awsKeysRotate(ctx, backend, name, stdout)
	}
	if err := backend.checkVault(); err != nil {
		return err
	}
	ki, err := vault.RotateKey(*path, name)
	if errors.Is(err, kms.ErrKeyNotFound) {
		return fmt.Errorf("no key-encryption key %q in %s: create it with '%s'", name, vaultPath(*path), keysHint("create", *path, name))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rotated key-encryption key %s: version %d is now the newest, in %s\n", ki.Name, newest(ki).Version, vaultPath(*path))
	if n := len(ki.Versions) - 1; n == 1 {
		fmt.Fprintln(stdout, "The previous version stays: data encrypted under it still decrypts.")
	} else {
		fmt.Fprintf(stdout, "The %d previous versions stay: data encrypted under them still decrypts.\n", n)
	}
	return nil
}

func runKeysList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("keys list", stdout, stderr)
	fs.Usage = keysUsage(fs, "list [--vault PATH | --kms aws] [--json]",
		"Lists the key-encryption keys of the vault: names, versions and creation times. Never key material.\n"+
			"With --kms aws, lists the aliases of the account and region with their keys' IDs, creation times and states.")
	path := vaultFlag(fs)
	backend := kmsFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON: [{\"name\", \"versions\": [{\"version\", \"created\"}]}]; with --kms aws [{\"alias\", \"key_id\", \"created\", \"state\", \"usage\"}]")
	if err := parse(fs, args); err != nil {
		return err
	}
	if backend.aws() {
		return awsKeysList(ctx, backend, *asJSON, stdout, stderr)
	}
	if err := backend.checkVault(); err != nil {
		return err
	}
	keys, err := vault.ListKeys(*path)
	if err != nil {
		return err
	}
	if *asJSON {
		type version struct {
			Version int       `json:"version"`
			Created time.Time `json:"created"`
		}
		type key struct {
			Name     string    `json:"name"`
			Versions []version `json:"versions"`
		}
		out := []key{}
		for _, k := range keys {
			j := key{Name: k.Name}
			for _, v := range k.Versions {
				j.Versions = append(j.Versions, version{v.Version, v.Created.UTC()})
			}
			out = append(out, j)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if len(keys) == 0 {
		fmt.Fprintf(stderr, "no key-encryption keys in %s; create one with '%s'\n", vaultPath(*path), keysHint("create", *path, "NAME"))
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tCREATED")
	for _, k := range keys {
		for i, v := range k.Versions {
			fmt.Fprintf(tw, "%s\t%d\t%s", k.Name, v.Version, v.Created.UTC().Format(time.RFC3339))
			if i == len(k.Versions)-1 {
				fmt.Fprint(tw, "\tnewest") // a cell only here, so that other lines end without padding
			}
			fmt.Fprintln(tw)
		}
	}
	return tw.Flush()
}

func newest(ki vault.KeyInfo) vault.VersionInfo { return ki.Versions[len(ki.Versions)-1] }

// keysHint is a `strait keys` command for the user to copy. It names the
// vault with --vault, absolute, so that it acts on this vault from any
// directory and whatever $STRAIT_VAULT says there.
func keysHint(sub, path, name string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return fmt.Sprintf("%s keys %s --vault %s %s", selfCommand(), sub, shellQuote(path), name)
}

// vaultPath is how messages name the vault: its absolute path, so that a relative default is not a surprise.
func vaultPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if strings.ContainsAny(p, " \t\n") {
		return strconv.Quote(p)
	}
	return p
}

func keysUsage(fs *flag.FlagSet, synopsis, what string) func() {
	return func() {
		fmt.Fprintf(fs.Output(), "Usage: strait keys %s\n\n%s\n\nFlags:\n", synopsis, what)
		fs.PrintDefaults()
	}
}
