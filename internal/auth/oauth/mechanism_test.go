package oauth

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	kgooauth "github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/straitgw/strait/internal/auth/sasl"
)

// The OAUTHBEARER mechanism with a Validator, driven by franz-go's client:
// what a Kafka client connecting to the gateway goes through.
func TestOAuthBearerWithValidator(t *testing.T) {
	v, srv, _ := served(t, rsaKey(), ecKey())
	mech := sasl.NewOAuthBearer(v, sasl.OAuthBearerOptions{Scope: "kafka"})
	var _ sasl.TokenValidator = v

	run := func(t *testing.T, token string) (answers [][]byte, result sasl.Result, err error, clientErr error) {
		t.Helper()
		session, msg, err := kgooauth.Auth{Token: token}.AsMechanism().Authenticate(ctx, "127.0.0.1:9092")
		must(t, err)
		ex := mech.Start(ctx, "127.0.0.1:50000")
		for step := 0; ; step++ {
			if step == 3 {
				t.Fatal("the exchange goes on past two steps")
			}
			answer, done, err := ex.Next(msg)
			if answer != nil {
				answers = append(answers, answer)
				var clientDone bool
				clientDone, msg, clientErr = session.Challenge(answer)
				if clientDone && !done {
					t.Fatal("the client is done, the gateway is not")
				}
			}
			if done {
				return answers, ex.Result(), err, clientErr
			}
		}
	}

	t.Run("valid", func(t *testing.T) {
		answers, result, err, clientErr := run(t, sign(t, ecKey(), goodClaims()))
		if err != nil || clientErr != nil {
			t.Fatalf("gateway %v, client %v", err, clientErr)
		}
		if len(answers) != 1 || len(answers[0]) != 0 {
			t.Errorf("answers %q, want one empty", answers)
		}
		if result.Principal != "alice" || !result.Expiry.Equal(testNow.Add(time.Hour)) {
			t.Errorf("result %+v", result)
		}
	})

	invalid := []struct {
		name   string
		token  string
		kind   error
		status string
	}{
		{"expired", sign(t, rsaKey(), goodClaims().with("exp", testNow.Add(-time.Hour).Unix())), ErrExpired, "invalid_token"},
		{"wrong audience", sign(t, rsaKey(), goodClaims().with("aud", "billing")), ErrAudience, "invalid_token"},
		{"unknown kid", sign(t, rsaKey2(), goodClaims()), ErrUnknownKey, "invalid_token"},
		{"alg none", b64JSON(t, map[string]string{"alg": "none"}) + "." + b64JSON(t, goodClaims()) + ".", ErrAlgorithm, "invalid_token"},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			answers, result, err, clientErr := run(t, tc.token)
			if !errors.Is(err, tc.kind) || !errors.Is(err, sasl.ErrAuthFailed) {
				t.Fatalf("gateway error %v, want %v", err, tc.kind)
			}
			if len(answers) != 1 {
				t.Fatalf("answers %q, want the error status only", answers)
			}
			var status struct{ Status, Scope string }
			must(t, json.Unmarshal(answers[0], &status))
			if status.Status != tc.status || status.Scope != "kafka" {
				t.Errorf("status %s", answers[0])
			}
			if clientErr != nil {
				t.Errorf("franz-go failed before acknowledging the status: %v", clientErr)
			}
			if result != (sasl.Result{}) {
				t.Errorf("result %+v", result)
			}
			if strings.Contains(err.Error(), tc.token) {
				t.Errorf("error %q shows the token", err)
			}
		})
	}

	t.Run("keys unavailable", func(t *testing.T) {
		fresh := newValidator(t, baseConfig(srv.URL), newClock())
		srv.Close()
		ex := sasl.NewOAuthBearer(fresh, sasl.OAuthBearerOptions{}).Start(ctx, "c")
		_, msg, err := kgooauth.Auth{Token: sign(t, rsaKey(), goodClaims())}.AsMechanism().Authenticate(ctx, "b")
		must(t, err)
		answer, done, err := ex.Next(msg)
		if !done || answer != nil || !errors.Is(err, sasl.ErrUnavailable) {
			t.Fatalf("Next = %q, %v, %v; want done with ErrUnavailable", answer, done, err)
		}
	})
}
