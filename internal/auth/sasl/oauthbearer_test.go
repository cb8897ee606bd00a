package sasl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	kgooauth "github.com/twmb/franz-go/pkg/sasl/oauth"
)

// A token in the shape of a JWT; the validator below does not read it.
const testBearerToken = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"

var testTokenExpiry = time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC)

// fakeTokenValidator accepts testBearerToken as alice, and answers any other with
// err (a refusal if err is nil).
type fakeTokenValidator struct {
	err   error
	calls int
}

func (f *fakeTokenValidator) Validate(_ context.Context, token string) (string, time.Time, error) {
	f.calls++
	if token == testBearerToken && f.err == nil {
		return "alice", testTokenExpiry, nil
	}
	if f.err != nil {
		return "", time.Time{}, f.err
	}
	return "", time.Time{}, fmt.Errorf("%w: token expired", ErrAuthFailed)
}

// franzOAuthFirst is franz-go's initial OAUTHBEARER message for auth.
func franzOAuthFirst(t *testing.T, auth kgooauth.Auth) (kgosasl.Session, []byte) {
	t.Helper()
	session, msg, err := auth.AsMechanism().Authenticate(context.Background(), "broker:9092")
	if err != nil {
		t.Fatal(err)
	}
	return session, msg
}

func TestOAuthBearerSuccessWithFranzGo(t *testing.T) {
	for _, auth := range []kgooauth.Auth{
		{Token: testBearerToken},
		{Token: testBearerToken, Zid: "alice"},
		{Token: testBearerToken, Extensions: map[string]string{"logicalCluster": "lkc-1", "traceId": "a b"}},
	} {
		t.Run(fmt.Sprintf("zid=%q,ext=%d", auth.Zid, len(auth.Extensions)), func(t *testing.T) {
			v := &fakeTokenValidator{}
			m := NewOAuthBearer(v, OAuthBearerOptions{})
			if m.Name() != "OAUTHBEARER" || m.Name() != kgooauth.Oauth(nil).Name() {
				t.Fatalf("name %q", m.Name())
			}
			session, first := franzOAuthFirst(t, auth)
			ex := m.Start(context.Background(), "127.0.0.1:5000")
			answer, done, err := ex.Next(first)
			if err != nil || !done {
				t.Fatalf("Next = %q, %v, %v; want done", answer, done, err)
			}
			if answer == nil || len(answer) != 0 {
				t.Errorf("answer %q, want empty (not nil)", answer)
			}
			if r := ex.Result(); r.Principal != "alice" || !r.Expiry.Equal(testTokenExpiry) {
				t.Errorf("result %+v, want alice until %s", r, testTokenExpiry)
			}
			clientDone, reply, err := session.Challenge(answer)
			if err != nil || !clientDone || reply != nil {
				t.Errorf("franz-go on the answer: done %v, reply %q, %v; want done", clientDone, reply, err)
			}
			if _, _, err := ex.Next([]byte{1}); !errors.Is(err, ErrMalformed) {
				t.Errorf("a message after the end: %v, want ErrMalformed", err)
			}
		})
	}
}

// A refused token: the error status, franz-go's %x01, then the failure;
// franz-go reports the failure when the gateway fails the exchange, and
// would report it too if the gateway answered anything more.
func TestOAuthBearerRefusedWithFranzGo(t *testing.T) {
	v := &fakeTokenValidator{}
	m := NewOAuthBearer(v, OAuthBearerOptions{Scope: "kafka", OpenIDConfiguration: "https://idp.test/.well-known/openid-configuration"})
	session, first := franzOAuthFirst(t, kgooauth.Auth{Token: "eyJ.bad.token"})
	ex := m.Start(context.Background(), "127.0.0.1:5000")

	status, done, err := ex.Next(first)
	if err != nil || done {
		t.Fatalf("first Next = %q, %v, %v; want the error status, not done", status, done, err)
	}
	var got map[string]string
	if err := json.Unmarshal(status, &got); err != nil {
		t.Fatalf("status %q is not JSON: %v", status, err)
	}
	want := map[string]string{"status": "invalid_token", "scope": "kafka", "openid-configuration": "https://idp.test/.well-known/openid-configuration"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("status %v, want %v", got, want)
	}

	clientDone, ack, err := session.Challenge(status)
	if err != nil || clientDone || string(ack) != "\x01" {
		t.Fatalf("franz-go on the status: done %v, reply %q, %v; want %%x01", clientDone, ack, err)
	}
	answer, done, err := ex.Next(ack)
	if !done || answer != nil {
		t.Fatalf("second Next = %q, %v; want done with no answer", answer, done)
	}
	if !errors.Is(err, ErrAuthFailed) || !strings.Contains(err.Error(), "token expired") {
		t.Fatalf("error %v, want ErrAuthFailed saying why", err)
	}
	if strings.Contains(err.Error(), "eyJ.bad.token") {
		t.Errorf("error %q shows the token", err)
	}
	if _, _, err := session.Challenge(nil); err == nil || !strings.Contains(err.Error(), "invalid_token") {
		t.Errorf("franz-go, asked again: %v; want the failure with the status", err)
	}
	if r := ex.Result(); r != (Result{}) {
		t.Errorf("result of a failed exchange: %+v", r)
	}
}

func TestOAuthBearerInsufficientScope(t *testing.T) {
	v := &fakeTokenValidator{err: fmt.Errorf("%w: the token lacks scope %q", ErrInsufficientScope, "kafka")}
	ex := NewOAuthBearer(v, OAuthBearerOptions{Scope: "kafka"}).Start(context.Background(), "c")
	_, first := franzOAuthFirst(t, kgooauth.Auth{Token: testBearerToken})
	status, done, err := ex.Next(first)
	if err != nil || done || string(status) != `{"status":"insufficient_scope","scope":"kafka"}` {
		t.Fatalf("Next = %s, %v, %v; want the insufficient_scope status", status, done, err)
	}
	_, done, err = ex.Next([]byte{1})
	if !done || !errors.Is(err, ErrAuthFailed) || !errors.Is(err, ErrInsufficientScope) {
		t.Fatalf("second Next: done %v, %v; want ErrInsufficientScope", done, err)
	}
}

// A token that cannot be checked now, or an unreadable message, fails at
// once: no status round.
func TestOAuthBearerFailsAtOnce(t *testing.T) {
	v := &fakeTokenValidator{err: fmt.Errorf("%w: jwks_url: connection refused", ErrUnavailable)}
	ex := NewOAuthBearer(v, OAuthBearerOptions{}).Start(context.Background(), "c")
	_, first := franzOAuthFirst(t, kgooauth.Auth{Token: testBearerToken})
	answer, done, err := ex.Next(first)
	if !done || answer != nil || !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrAuthFailed) {
		t.Fatalf("unavailable: %q, %v, %v; want done with ErrUnavailable only", answer, done, err)
	}

	v = &fakeTokenValidator{}
	ex = NewOAuthBearer(v, OAuthBearerOptions{}).Start(context.Background(), "c")
	answer, done, err = ex.Next([]byte("n,,\x01auth=Basic YWxpY2U6cHc=\x01\x01"))
	if !done || answer != nil || !errors.Is(err, ErrMalformed) {
		t.Fatalf("malformed: %q, %v, %v; want done with ErrMalformed", answer, done, err)
	}
	if v.calls != 0 {
		t.Errorf("the validator was called for a malformed message")
	}
}

// A validator's error of no known kind is a refusal.
func TestOAuthBearerForeignError(t *testing.T) {
	v := &fakeTokenValidator{err: errors.New("no")}
	ex := NewOAuthBearer(v, OAuthBearerOptions{}).Start(context.Background(), "c")
	_, first := franzOAuthFirst(t, kgooauth.Auth{Token: testBearerToken})
	if status, done, _ := ex.Next(first); done || string(status) != `{"status":"invalid_token"}` {
		t.Fatalf("Next = %s, %v; want the invalid_token status", status, done)
	}
	if _, _, err := ex.Next([]byte{1}); !errors.Is(err, ErrAuthFailed) || err.Error() != "authentication failed: invalid credentials: no" {
		t.Fatalf("error %q, want ErrAuthFailed", err)
	}
}

func TestOAuthBearerAuthzID(t *testing.T) {
	tests := []struct {
		zid string
		ok  bool
	}{
		{"alice", true},
		{"bob", false},
		{"Alice", false},
	}
	for _, tc := range tests {
		t.Run(tc.zid, func(t *testing.T) {
			ex := NewOAuthBearer(&fakeTokenValidator{}, OAuthBearerOptions{}).Start(context.Background(), "c")
			_, first := franzOAuthFirst(t, kgooauth.Auth{Token: testBearerToken, Zid: tc.zid})
			answer, done, err := ex.Next(first)
			if tc.ok {
				if err != nil || !done || ex.Result().Principal != "alice" {
					t.Fatalf("Next = %q, %v, %v", answer, done, err)
				}
				return
			}
			if done || err != nil || string(answer) != `{"status":"invalid_token"}` {
				t.Fatalf("Next = %q, %v, %v; want the invalid_token status", answer, done, err)
			}
			_, _, err = ex.Next([]byte{1})
			if !errors.Is(err, ErrAuthFailed) || !strings.Contains(err.Error(), "a=") {
				t.Fatalf("error %v, want ErrAuthFailed naming a=", err)
			}
		})
	}
}

func TestParseOAuthBearerMessage(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		want oauthBearerMessage
	}{
		{"minimal", "n,,\x01auth=Bearer abc\x01\x01", oauthBearerMessage{token: "abc"}},
		{"RFC 7628 example", "n,a=user@example.com,\x01host=server.example.com\x01port=143\x01auth=Bearer vF9dft4qmTc2Nvb3RlckBhbHRhdmlzdGEuY29tCg==\x01\x01",
			oauthBearerMessage{authzid: "user@example.com", host: "server.example.com", port: "143", token: "vF9dft4qmTc2Nvb3RlckBhbHRhdmlzdGEuY29tCg=="}},
		{"scheme in lower case", "n,,\x01auth=bearer a.b.c\x01\x01", oauthBearerMessage{token: "a.b.c"}},
		{"y flag", "y,,\x01auth=Bearer abc\x01\x01", oauthBearerMessage{token: "abc"}},
		{"escaped authzid", "n,a=a=2Cb=3Dc,\x01auth=Bearer abc\x01\x01", oauthBearerMessage{authzid: "a,b=c", token: "abc"}},
		{"extensions", "n,,\x01auth=Bearer abc\x01logicalCluster=lkc-1\x01empty=\x01\x01",
			oauthBearerMessage{token: "abc", extensions: map[string]string{"logicalCluster": "lkc-1", "empty": ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseOAuthBearerMessage([]byte(tc.msg))
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseOAuthBearerMessageRefuses(t *testing.T) {
	many := "n,,\x01auth=Bearer abc\x01"
	for i := range maxOAuthBearerPairs {
		many += fmt.Sprintf("k%c=v\x01", 'a'+i%26)
	}
	tests := []struct {
		name, msg, want string
	}{
		{"empty", "", "GS2 header"},
		{"only kvsep", "\x01", "GS2 header"},
		{"no GS2 header", "auth=Bearer abc\x01\x01", "GS2 header"},
		{"channel binding", "p=tls-unique,,\x01auth=Bearer abc\x01\x01", "channel binding"},
		{"bad flag", "x,,\x01auth=Bearer abc\x01\x01", "n or y"},
		{"header not ended", "n,a=alice", "not ended"},
		{"second field not a=", "n,b=alice,\x01auth=Bearer abc\x01\x01", "a=<authorization id>"},
		{"empty authzid", "n,a=,\x01auth=Bearer abc\x01\x01", "is empty"},
		{"bad escape", "n,a=al=ice,\x01auth=Bearer abc\x01\x01", "=2C"},
		{"control in authzid", "n,a=al\nice,\x01auth=Bearer abc\x01\x01", "UTF-8 text"},
		{"no kvsep", "n,,auth=Bearer abc\x01\x01", "framed"},
		{"not ended", "n,,\x01auth=Bearer abc\x01", "framed"},
		{"no pairs", "n,,\x01\x01", "no auth"},
		{"no auth", "n,,\x01host=h\x01\x01", "no auth"},
		{"empty pair", "n,,\x01auth=Bearer abc\x01\x01host=h\x01\x01", "no key"},
		{"no =", "n,,\x01auth\x01\x01", "no key"},
		{"empty key", "n,,\x01=x\x01auth=Bearer abc\x01\x01", "no key"},
		{"key not letters", "n,,\x01auth=Bearer abc\x01x-y=1\x01\x01", "letters"},
		{"value with a control", "n,,\x01auth=Bearer abc\x01x=\x00\x01\x01", "printable"},
		{"value not ASCII", "n,,\x01auth=Bearer abc\x01x=é\x01\x01", "printable"},
		{"auth twice", "n,,\x01auth=Bearer abc\x01auth=Bearer def\x01\x01", "twice"},
		{"host twice", "n,,\x01host=\x01host=h\x01auth=Bearer abc\x01\x01", "twice"},
		{"basic", "n,,\x01auth=Basic abc\x01\x01", "Bearer <token>"},
		{"no space", "n,,\x01auth=Bearerabc\x01\x01", "Bearer <token>"},
		{"empty token", "n,,\x01auth=Bearer \x01\x01", "empty token"},
		{"only padding", "n,,\x01auth=Bearer ==\x01\x01", "empty token"},
		{"token with a space", "n,,\x01auth=Bearer a b\x01\x01", "characters"},
		{"padding inside", "n,,\x01auth=Bearer a=b\x01\x01", "characters"},
		{"too many pairs", many + "\x01", "key=value pairs"},
		{"too large", "n,,\x01auth=Bearer " + strings.Repeat("a", maxOAuthBearerMessage) + "\x01\x01", "bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseOAuthBearerMessage([]byte(tc.msg))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if strings.Contains(tc.msg, "abc") && strings.Contains(err.Error(), "Bearer abc") {
				t.Errorf("error %q shows the token", err)
			}
		})
	}
}
