package awskms

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskms "github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/straitgw/strait/internal/kms"
)

// KeyInfo describes a KMS key behind an alias: never key material, which AWS KMS never gives out.
type KeyInfo struct {
	Alias   string    `json:"alias"`
	KeyID   string    `json:"key_id"`
	Created time.Time `json:"created"`
	State   string    `json:"state"`
	Usage   string    `json:"usage"` // ENCRYPT_DECRYPT for a KEK, GENERATE_VERIFY_MAC for its HMAC key
}

// ErrAliasExists is CreateKEK's error for an alias already in use.
var ErrAliasExists = errors.New("alias already exists")

func checkAlias(alias string) error {
	if !strings.HasPrefix(alias, "alias/") || strings.HasPrefix(alias, "alias/aws/") || !keyIDPattern.MatchString(alias) {
		return fmt.Errorf("%q is not an alias Strait can manage: write alias/NAME (letters, digits, '/', '_', '-'; alias/aws/ is AWS's own)", alias)
	}
	return nil
}

// CreateKEK creates a symmetric encryption KMS key with the alias, and with withHMAC its HMAC key
// (HMAC_256, aliased as HMACKeyOf(alias)) for deterministic encryption.
func (k *KMS) CreateKEK(ctx context.Context, alias string, withHMAC bool) ([]KeyInfo, error) {
	if err := checkAlias(alias); err != nil {
		return nil, err
	}
	names := []string{alias}
	if withHMAC {
		names = append(names, k.HMACKeyOf(alias))
	}
	for _, n := range names {
		if _, err := k.describe(ctx, n); err == nil {
			return nil, fmt.Errorf("%w: %s", ErrAliasExists, n)
		} else if !errors.Is(err, kms.ErrKeyNotFound) {
			return nil, err
		}
	}
	var out []KeyInfo
	ki, err := k.createAliased(ctx, alias, &awskms.CreateKeyInput{Description: aws.String("Strait key-encryption key " + alias)})
	if err != nil {
		return nil, err
	}
	out = append(out, ki)
	if withHMAC {
		ki, err := k.createAliased(ctx, names[1], &awskms.CreateKeyInput{
			Description: aws.String("Strait deterministic-encryption key of " + alias),
			KeySpec:     types.KeySpecHmac256,
			KeyUsage:    types.KeyUsageTypeGenerateVerifyMac,
		})
		if err != nil {
			return out, err
		}
		out = append(out, ki)
	}
	return out, nil
}

// RotateKEK moves the alias to a new symmetric KMS key and returns the old key and the new one. The old key
// stays enabled: DEKs wrapped under it name it in their ciphertext and still unwrap. (AWS KMS can also rotate a
// key's material itself, keeping its ID: aws kms enable-key-rotation or rotate-key-on-demand; Strait needs
// nothing for that.) The HMAC key of deterministic encryption is not rotated: AWS KMS does not rotate HMAC
// keys, and a new one would change every deterministic ciphertext.
func (k *KMS) RotateKEK(ctx context.Context, alias string) (old, next KeyInfo, err error) {
	if err := checkAlias(alias); err != nil {
		return old, next, err
	}
	if old, err = k.describe(ctx, alias); err != nil {
		return old, next, err
	}
	created, err := k.c.CreateKey(ctx, &awskms.CreateKeyInput{Description: aws.String("Strait key-encryption key " + alias)})
	if err != nil {
		return old, next, mapErr("CreateKey", alias, err)
	}
	if _, err := k.c.UpdateAlias(ctx, &awskms.UpdateAliasInput{AliasName: aws.String(alias), TargetKeyId: created.KeyMetadata.KeyId}); err != nil {
		return old, next, mapErr("UpdateAlias", alias, err)
	}
	return old, info(alias, created.KeyMetadata), nil
}

// ListKEKs lists the aliases of the account and region with their keys, AWS's own (alias/aws/...) left out.
func (k *KMS) ListKEKs(ctx context.Context) ([]KeyInfo, error) {
	var out []KeyInfo
	var marker *string
	for {
		page, err := k.c.ListAliases(ctx, &awskms.ListAliasesInput{Marker: marker})
		if err != nil {
			return nil, mapErr("ListAliases", "", err)
		}
		for _, a := range page.Aliases {
			name := aws.ToString(a.AliasName)
			if strings.HasPrefix(name, "alias/aws/") || a.TargetKeyId == nil {
				continue
			}
			ki, err := k.describe(ctx, name)
			if err != nil {
				return nil, err
			}
			out = append(out, ki)
		}
		if !page.Truncated || page.NextMarker == nil {
			break
		}
		marker = page.NextMarker
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Alias < out[j].Alias })
	return out, nil
}

func (k *KMS) describe(ctx context.Context, alias string) (KeyInfo, error) {
	d, err := k.c.DescribeKey(ctx, &awskms.DescribeKeyInput{KeyId: aws.String(alias)})
	if err != nil {
		return KeyInfo{}, mapErr("DescribeKey", alias, err)
	}
	return info(alias, d.KeyMetadata), nil
}

func (k *KMS) createAliased(ctx context.Context, alias string, in *awskms.CreateKeyInput) (KeyInfo, error) {
	created, err := k.c.CreateKey(ctx, in)
	if err != nil {
		return KeyInfo{}, mapErr("CreateKey", alias, err)
	}
	if _, err := k.c.CreateAlias(ctx, &awskms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: created.KeyMetadata.KeyId}); err != nil {
		return KeyInfo{}, mapErr("CreateAlias", alias, err)
	}
	return info(alias, created.KeyMetadata), nil
}

func info(alias string, m *types.KeyMetadata) KeyInfo {
	return KeyInfo{Alias: alias, KeyID: aws.ToString(m.KeyId), Created: aws.ToTime(m.CreationDate).UTC(), State: string(m.KeyState), Usage: string(m.KeyUsage)}
}
