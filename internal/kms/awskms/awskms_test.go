package awskms_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/kms/awskms"
	"github.com/straitgw/strait/internal/kms/awskms/localkms"
)

func open(t *testing.T, s *localkms.Server) *awskms.KMS {
	t.Helper()
	k, err := awskms.New(context.Background(), awskms.Options{Region: localkms.Region, Endpoint: s.Endpoint, Credentials: localkms.Credentials})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newDEK(t *testing.T) []byte {
	dek := make([]byte, 32)
	if _, err := rand.Read(dek); err != nil {
		t.Fatal(err)
	}
	return dek
}

// A DEK wrapped under a KEK named by alias unwraps under the same KEK name
// and binding, fits the envelope, and under any other name or topic is
// refused by the KMS itself.
func TestWrapUnwrap(t *testing.T) {
	s := localkms.Start(t)
	s.CreateKEK("alias/orders-kek")
	s.CreateKEK("alias/other-kek")
	k := open(t, s)
	ctx := kms.WithBinding(ctxT(t), kms.Binding{Topic: "orders"})
	dek := newDEK(t)
	w, err := k.Wrap(ctx, "alias/orders-kek", dek)
	if err != nil {
		t.Fatal(err)
	}
	if len(w) == 0 || len(w) > 255 {
		t.Fatalf("wrapped DEK is %d bytes; the envelope holds 1 to 255", len(w))
	}
	if bytes.Contains(w, dek) {
		t.Fatal("the wrapped DEK contains the DEK")
	}
	got, err := k.Unwrap(ctx, "alias/orders-kek", w)
	if err != nil || !bytes.Equal(got, dek) {
		t.Fatalf("Unwrap = %x, %v; want the DEK", got, err)
	}
	for name, c := range map[string]struct {
		ctx context.Context
		kek string
	}{
		"another topic": {kms.WithBinding(ctxT(t), kms.Binding{Topic: "payments"}), "alias/orders-kek"},
		"no topic":      {ctxT(t), "alias/orders-kek"},
		"another KEK":   {ctx, "alias/other-kek"},
	} {
		if _, err := k.Unwrap(c.ctx, c.kek, w); !errors.Is(err, kms.ErrInvalid) {
			t.Errorf("%s: Unwrap err %v, want ErrInvalid", name, err)
		}
	}
	tampered := append([]byte(nil), w...)
	tampered[len(tampered)-1] ^= 1
	if _, err := k.Unwrap(ctx, "alias/orders-kek", tampered); !errors.Is(err, kms.ErrInvalid) {
		t.Errorf("tampered: Unwrap err %v, want ErrInvalid", err)
	}
}

func TestErrors(t *testing.T) {
	s := localkms.Start(t)
	id := s.CreateKEK("alias/disabled-kek")
	k := open(t, s)
	ctx := ctxT(t)

	if _, err := k.Wrap(ctx, "alias/missing-kek", newDEK(t)); !errors.Is(err, kms.ErrKeyNotFound) {
		t.Errorf("missing alias: %v, want ErrKeyNotFound", err)
	}
	// A filesystem vault's KEK name is not asked about.
	if _, err := k.Unwrap(ctx, "orders-kek", []byte{1, 2, 3}); !errors.Is(err, kms.ErrKeyNotFound) {
		t.Errorf("vault name: %v, want ErrKeyNotFound", err)
	}
	w, err := k.Wrap(ctx, "alias/disabled-kek", newDEK(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().DisableKey(ctx, &sdk.DisableKeyInput{KeyId: aws.String(id)}); err != nil {
		t.Fatal(err)
	}
	// Disabled is not missing: retriable, and never plaintext.
	if _, err := k.Wrap(ctx, "alias/disabled-kek", newDEK(t)); !errors.Is(err, kms.ErrUnavailable) || errors.Is(err, kms.ErrKeyNotFound) {
		t.Errorf("disabled key, Wrap: %v, want ErrUnavailable only", err)
	}
	if _, err := k.Unwrap(ctx, "alias/disabled-kek", w); !errors.Is(err, kms.ErrUnavailable) {
		t.Errorf("disabled key, Unwrap: %v, want ErrUnavailable", err)
	}
	if _, err := s.Client().EnableKey(ctx, &sdk.EnableKeyInput{KeyId: aws.String(id)}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Unwrap(ctx, "alias/disabled-kek", w); err != nil {
		t.Errorf("enabled again, Unwrap: %v", err)
	}

	// An outage: the call fails as unavailable, retried within the
	// caller's deadline and no longer.
	s.Stop()
	short, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := k.Wrap(short, "alias/disabled-kek", newDEK(t)); !errors.Is(err, kms.ErrUnavailable) {
		t.Errorf("server stopped: %v, want ErrUnavailable", err)
	}
	s.Restart()
	if _, err := k.Unwrap(ctxT(t), "alias/disabled-kek", w); err != nil {
		t.Errorf("server back: Unwrap: %v", err)
	}
}

// Manual rotation: the alias moves to a new KMS key. New DEKs are wrapped
// under the new key; DEKs wrapped before still unwrap, by the key their
// ciphertext names.
func TestAliasMovedToNewKey(t *testing.T) {
	s := localkms.Start(t)
	s.CreateKEK("alias/rot-kek")
	k := open(t, s)
	ctx := ctxT(t)
	dek := newDEK(t)
	old, err := k.Wrap(ctx, "alias/rot-kek", dek)
	if err != nil {
		t.Fatal(err)
	}
	next := s.CreateKEK("")
	if _, err := s.Client().UpdateAlias(ctx, &sdk.UpdateAliasInput{AliasName: aws.String("alias/rot-kek"), TargetKeyId: aws.String(next)}); err != nil {
		t.Fatal(err)
	}
	dek2 := newDEK(t)
	w2, err := k.Wrap(ctx, "alias/rot-kek", dek2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(w2, []byte(next)) {
		t.Errorf("a DEK wrapped after the move does not name the new key %s", next) // local-kms's ciphertext names its key
	}
	for _, c := range []struct{ w, dek []byte }{{old, dek}, {w2, dek2}} {
		if got, err := k.Unwrap(ctx, "alias/rot-kek", c.w); err != nil || !bytes.Equal(got, c.dek) {
			t.Errorf("Unwrap after the move: %v", err)
		}
	}
}

// DeriveKey is GenerateMac under the KEK's HMAC key: the same for every
// client and label, different per label and per KEK, one version.
func TestDeriveKey(t *testing.T) {
	s := localkms.Start(t)
	s.CreateKEK("alias/users-kek")
	s.CreateHMACKey("alias/users-kek-hmac")
	s.CreateKEK("alias/nomac-kek")
	ctx := ctxT(t)
	a, b := open(t, s), open(t, s)
	k1, v, err := a.DeriveKey(ctx, "alias/users-kek", 0, []byte("label"))
	if err != nil || v != 1 || len(k1) != 32 {
		t.Fatalf("DeriveKey = %d bytes, version %d, %v", len(k1), v, err)
	}
	k2, _, err := b.DeriveKey(ctx, "alias/users-kek", 1, []byte("label"))
	if err != nil || !bytes.Equal(k1, k2) {
		t.Errorf("another client, version 1: %x %v; want %x", k2, err, k1)
	}
	k3, _, _ := a.DeriveKey(ctx, "alias/users-kek", 0, []byte("other"))
	if bytes.Equal(k1, k3) {
		t.Error("two labels gave one key")
	}
	if _, _, err := a.DeriveKey(ctx, "alias/users-kek", 2, []byte("label")); !errors.Is(err, kms.ErrKeyNotFound) {
		t.Errorf("version 2: %v, want ErrKeyNotFound", err)
	}
	if _, _, err := a.DeriveKey(ctx, "alias/nomac-kek", 0, []byte("label")); !errors.Is(err, kms.ErrKeyNotFound) {
		t.Errorf("no HMAC key: %v, want ErrKeyNotFound", err)
	}
}

func TestNewChecks(t *testing.T) {
	if _, err := awskms.New(context.Background(), awskms.Options{Region: "eu-west-2", HMACKey: "alias/fixed"}); err == nil {
		t.Error("an hmac_key without {kek} was accepted")
	}
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	if _, err := awskms.New(context.Background(), awskms.Options{}); err == nil {
		t.Error("no region anywhere, and New succeeded")
	}
}
