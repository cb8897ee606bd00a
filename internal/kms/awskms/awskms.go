// Package awskms is a kms.KMS backed by AWS KMS: key-encryption keys are AWS KMS keys named by alias (or key
// ID, or ARN), data keys are wrapped with Encrypt and unwrapped with Decrypt under an encryption context that
// binds the KEK name and the topic, and deterministic keys are HMACs made by GenerateMac with an HMAC KMS key
// beside each KEK. Credentials come from the standard AWS chain. docs/kms.md describes the setup, the IAM
// policy it needs, rotation and outages.
package awskms

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	awskms "github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/straitgw/strait/internal/kms"
)

// Options configure the client. Zero values take the standard AWS chain's settings.
type Options struct {
	// Region is the AWS region. Empty: from the standard chain (AWS_REGION, the shared config file).
	Region string
	// Endpoint overrides the KMS endpoint (a VPC endpoint, a local KMS for tests). Empty: AWS's own for the
	// region, or AWS_ENDPOINT_URL_KMS / AWS_ENDPOINT_URL when set.
	Endpoint string
	// HMACKey names the HMAC KMS key that DeriveKey uses for a KEK: {kek} stands for the KEK's name.
	// Default DefaultHMACKey.
	HMACKey string
	// Credentials, when set, replace the standard chain (tests).
	Credentials aws.CredentialsProvider
	// MaxAttempts bounds the attempts of one call, retries of throttled, failed and unreachable calls
	// included; the caller's context bounds their time. Default 4.
	MaxAttempts int
}

// DefaultHMACKey is the HMAC key of a KEK unless Options.HMACKey says otherwise: alias/orders-kek has
// alias/orders-kek-hmac.
const DefaultHMACKey = "{kek}-hmac"

// Encryption context keys. Every wrapped DEK is bound to the KEK name the envelope records, and to its topic
// when the filter binds records to their topic; IAM policies can test both (kms:EncryptionContext:strait-topic).
const (
	ContextKEK   = "strait-kek"
	ContextTopic = "strait-topic"
)

// deriveLabelPrefix separates the MACs DeriveKey makes from any other use of the HMAC key. Part of the format
// of stored data: changing it changes every deterministic ciphertext.
const deriveLabelPrefix = "strait/kms/aws/derive-key/v1\x00"

// KMS is AWS KMS as a kms.KMS. Safe for concurrent use.
type KMS struct {
	c       *awskms.Client
	name    string
	hmacKey string
}

// New builds the client. It reads the standard chain's files and environment but calls nothing: a KMS that
// cannot be reached, or credentials that do not work, show in the first call.
func New(ctx context.Context, o Options) (*KMS, error) {
	if o.HMACKey == "" {
		o.HMACKey = DefaultHMACKey
	}
	if !strings.Contains(o.HMACKey, "{kek}") {
		return nil, fmt.Errorf("hmac_key %q has no {kek}: every KEK needs an HMAC key of its own, e.g. %q", o.HMACKey, DefaultHMACKey)
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 4
	}
	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts = o.MaxAttempts
				so.MaxBackoff = time.Second // inside the call's timeout (kms.timeout, 5 s by default)
			})
		}),
	}
	if o.Region != "" {
		opts = append(opts, config.WithRegion(o.Region))
	}
	if o.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(o.Credentials))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("no AWS region: set kms.region, or AWS_REGION in the gateway's environment")
	}
	c := awskms.NewFromConfig(cfg, func(ko *awskms.Options) {
		if o.Endpoint != "" {
			ko.BaseEndpoint = aws.String(o.Endpoint)
		}
	})
	name := "aws-kms " + cfg.Region
	if o.Endpoint != "" {
		name += " at " + o.Endpoint
	}
	return &KMS{c: c, name: name, hmacKey: o.HMACKey}, nil
}

// Client is the AWS KMS client, for key management (strait keys).
func (k *KMS) Client() *awskms.Client { return k.c }

// Name implements kms.KMS.
func (k *KMS) Name() string { return k.name }

// HMACKeyOf names the HMAC key DeriveKey uses for kek.
func (k *KMS) HMACKeyOf(kek string) string { return strings.ReplaceAll(k.hmacKey, "{kek}", kek) }

// keyIDPattern is what AWS KMS takes as a key: an alias (alias/...), an ARN, a key ID or a multi-Region key ID.
var keyIDPattern = regexp.MustCompile(`^(alias/[a-zA-Z0-9/_-]+|arn:[^\s]+|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})$`)

// checkName answers ErrKeyNotFound for a name AWS KMS cannot have (a filesystem vault's KEK, during a move
// from the vault) without a call.
func checkName(kek string) error {
	if !keyIDPattern.MatchString(kek) {
		return fmt.Errorf("%w: %q is not an AWS KMS key: name it by alias (alias/NAME), key ID or ARN", kms.ErrKeyNotFound, kek)
	}
	return nil
}

// encryptionContext binds a wrapped DEK to its KEK's name and, when bound, its topic.
func encryptionContext(ctx context.Context, kek string) map[string]string {
	ec := map[string]string{ContextKEK: kek}
	if t := kms.BindingFrom(ctx).Topic; t != "" {
		ec[ContextTopic] = t
	}
	return ec
}

// Wrap implements kms.KMS with Encrypt. The DEK is made by the caller (crypto/rand) rather than by
// GenerateDataKey: one call either way, and the filters' key handling stays the same for every KMS.
func (k *KMS) Wrap(ctx context.Context, kek string, dek []byte) ([]byte, error) {
	if err := checkName(kek); err != nil {
		return nil, err
	}
	out, err := k.c.Encrypt(ctx, &awskms.EncryptInput{
		KeyId:             aws.String(kek),
		Plaintext:         dek,
		EncryptionContext: encryptionContext(ctx, kek),
	})
	if err != nil {
		return nil, mapErr("Encrypt", kek, err)
	}
	return out.CiphertextBlob, nil
}

// Unwrap implements kms.KMS with Decrypt. No key is named: the ciphertext names the KMS key it was made
// with, so records wrapped before the KEK's alias was moved to a new key still decrypt; the encryption
// context, which must match, ties it to the KEK name the record carries.
func (k *KMS) Unwrap(ctx context.Context, kek string, wrapped []byte) ([]byte, error) {
	if err := checkName(kek); err != nil {
		return nil, err
	}
	out, err := k.c.Decrypt(ctx, &awskms.DecryptInput{
		CiphertextBlob:    wrapped,
		EncryptionContext: encryptionContext(ctx, kek),
	})
	if err != nil {
		return nil, mapErr("Decrypt", kek, err)
	}
	return out.Plaintext, nil
}

// DeriveKey implements kms.KMS with GenerateMac (HMAC-SHA-256) under the KEK's HMAC key. AWS does not
// rotate HMAC keys, so there is one version: 1.
func (k *KMS) DeriveKey(ctx context.Context, kek string, version int, label []byte) ([]byte, int, error) {
	if version != 0 && version != 1 {
		return nil, 0, fmt.Errorf("%w: KEK %q has no derived-key version %d: AWS KMS HMAC keys have one version, 1", kms.ErrKeyNotFound, kek, version)
	}
	if err := checkName(kek); err != nil {
		return nil, 0, err
	}
	hk := k.HMACKeyOf(kek)
	msg := append([]byte(deriveLabelPrefix), label...)
	out, err := k.c.GenerateMac(ctx, &awskms.GenerateMacInput{
		KeyId:        aws.String(hk),
		Message:      msg,
		MacAlgorithm: types.MacAlgorithmSpecHmacSha256,
	})
	if err != nil {
		return nil, 0, mapErr("GenerateMac", hk, err)
	}
	if len(out.Mac) != sha256.Size {
		return nil, 0, fmt.Errorf("%w: GenerateMac with %s returned %d bytes, want %d", kms.ErrInvalid, hk, len(out.Mac), sha256.Size)
	}
	return out.Mac, 1, nil
}

// mapErr turns an AWS error into the kms errors the filters act on. Disabled keys, keys pending deletion and
// refused access are unavailable, not missing: a producer gets a retriable error, never the plaintext that
// on_missing_kek: plaintext allows for a key that does not exist, and resumes when the key is enabled again.
func mapErr(op, key string, err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code := ae.ErrorCode()
		switch code {
		case "NotFoundException":
			return fmt.Errorf("%w: AWS KMS %s: key %q does not exist (%s)", kms.ErrKeyNotFound, op, key, ae.ErrorMessage())
		case "InvalidCiphertextException", "IncorrectKeyException":
			return fmt.Errorf("%w: AWS KMS %s under %q: %s: the wrapped key was altered, made under another key, "+
				"or for another topic", kms.ErrInvalid, op, key, code)
		case "DisabledException", "KMSInvalidStateException":
			return fmt.Errorf("%w: AWS KMS %s: key %q is disabled or pending deletion (%s): enable it to resume", kms.ErrUnavailable, op, key, code)
		case "AccessDeniedException":
			return fmt.Errorf("%w: AWS KMS %s: access to key %q denied: grant the gateway's role kms:%s on it (docs/kms.md)", kms.ErrUnavailable, op, key, op)
		case "ThrottlingException", "LimitExceededException", "KMSInternalException", "DependencyTimeoutException",
			"KeyUnavailableException", "ServiceUnavailableException", "InternalFailure", "RequestTimeout":
			return fmt.Errorf("%w: AWS KMS %s: %s: %s", kms.ErrUnavailable, op, code, ae.ErrorMessage())
		}
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() >= http.StatusInternalServerError {
			return fmt.Errorf("%w: AWS KMS %s: %s", kms.ErrUnavailable, op, code)
		}
		return fmt.Errorf("AWS KMS %s with key %q: %s: %s", op, key, code, ae.ErrorMessage())
	}
	// No answer from AWS: the network, the retry budget, credentials that could not be had, the deadline.
	return fmt.Errorf("%w: AWS KMS %s: %w", kms.ErrUnavailable, op, err)
}
