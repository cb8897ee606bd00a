package awskms

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"

	"github.com/straitgw/strait/internal/kms"
)

// throttlingKMS answers the first n requests with AWS KMS's throttling
// error, then Encrypt's answer. local-kms never throttles, so this one
// HTTP endpoint stands in for AWS's answer to a busy account.
func throttlingKMS(t *testing.T, n int64) (*KMS, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if calls.Add(1) <= n {
			w.Header().Set("X-Amzn-ErrorType", "ThrottlingException")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"ThrottlingException","message":"Rate exceeded"}`))
			return
		}
		_, _ = w.Write([]byte(`{"CiphertextBlob":"d3JhcHBlZA==","KeyId":"arn:aws:kms:eu-west-2:111122223333:key/k","EncryptionAlgorithm":"SYMMETRIC_DEFAULT"}`))
	}))
	t.Cleanup(srv.Close)
	k, err := New(context.Background(), Options{Region: "eu-west-2", Endpoint: srv.URL,
		Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")})
	if err != nil {
		t.Fatal(err)
	}
	return k, &calls
}

// Throttled calls are retried with backoff, inside the caller's deadline.
func TestThrottlingRetried(t *testing.T) {
	k, calls := throttlingKMS(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := k.Wrap(ctx, "alias/x", make([]byte, 32))
	if err != nil || string(w) != "wrapped" || calls.Load() != 3 {
		t.Fatalf("Wrap = %q, %v after %d requests; want success on the third", w, err, calls.Load())
	}

	k, calls = throttlingKMS(t, 1000)
	if _, err := k.Wrap(ctx, "alias/x", make([]byte, 32)); !errors.Is(err, kms.ErrUnavailable) || calls.Load() != 4 {
		t.Errorf("always throttled: %v after %d requests, want ErrUnavailable after 4", err, calls.Load())
	}
	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	calls.Store(0)
	if _, err := k.Wrap(short, "alias/x", make([]byte, 32)); !errors.Is(err, kms.ErrUnavailable) {
		t.Errorf("deadline during the backoff: %v, want ErrUnavailable", err)
	}
}

func TestMapErr(t *testing.T) {
	for code, want := range map[string]error{
		"NotFoundException":          kms.ErrKeyNotFound,
		"InvalidCiphertextException": kms.ErrInvalid,
		"IncorrectKeyException":      kms.ErrInvalid,
		"DisabledException":          kms.ErrUnavailable,
		"KMSInvalidStateException":   kms.ErrUnavailable,
		"AccessDeniedException":      kms.ErrUnavailable,
		"ThrottlingException":        kms.ErrUnavailable,
		"KMSInternalException":       kms.ErrUnavailable,
		"KeyUnavailableException":    kms.ErrUnavailable,
		"DependencyTimeoutException": kms.ErrUnavailable,
		"ValidationException":        nil,
		"InvalidKeyUsageException":   nil,
	} {
		err := mapErr("Encrypt", "alias/x", &smithy.GenericAPIError{Code: code, Message: "m"})
		for _, sentinel := range []error{kms.ErrKeyNotFound, kms.ErrInvalid, kms.ErrUnavailable} {
			if errors.Is(err, sentinel) != (sentinel == want) {
				t.Errorf("%s: %v; want it to wrap %v only", code, err, want)
			}
		}
	}
	if err := mapErr("Decrypt", "alias/x", errors.New("dial tcp: connection refused")); !errors.Is(err, kms.ErrUnavailable) {
		t.Errorf("no answer: %v, want ErrUnavailable", err)
	}
}
