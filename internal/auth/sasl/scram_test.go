package sasl_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/auth/sasl"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/xdg-go/scram"
)

// scramMechs are the SCRAM mechanisms with their xdg-go client hash.
var scramMechs = []struct {
	name   string
	new    func(sasl.Credentials) *sasl.SCRAM
	client scram.HashGeneratorFcn
}{
	{"SCRAM-SHA-256", sasl.NewSCRAMSHA256, scram.SHA256},
	{"SCRAM-SHA-512", sasl.NewSCRAMSHA512, scram.SHA512},
}

// outcome is how one exchange went.
type outcome struct {
	serverFirst string // the server's first answer
	rounds      int    // client messages the server took
	err         error  // the server's error, nil if it authenticated the client
	principal   string
	clientOK    bool // the client verified server-final
}

// exchangeXDG runs one exchange between conv (an xdg-go client conversation) and the mechanism.
func exchangeXDG(t testing.TB, mech sasl.Mechanism, conv *scram.ClientConversation) outcome {
	t.Helper()
	var o outcome
	ex := mech.Start(context.Background(), "127.0.0.1:1")
	msg, err := conv.Step("")
	if err != nil {
		t.Fatalf("client-first: %v", err)
	}
	for {
		o.rounds++
		answer, done, err := ex.Next([]byte(msg))
		if o.rounds == 1 {
			o.serverFirst = string(answer)
		}
		if err != nil {
			if !done {
				t.Fatalf("round %d: error %v without done", o.rounds, err)
			}
			o.err = err
			return o
		}
		if done {
			if _, err := conv.Step(string(answer)); err == nil && conv.Valid() {
				o.clientOK = true
			}
			o.principal = ex.Result().Principal
			return o
		}
		if o.rounds > 2 {
			t.Fatal("the exchange goes on past two rounds")
		}
		if msg, err = conv.Step(string(answer)); err != nil {
			t.Fatalf("the client refused server-first-message %q: %v", answer, err)
		}
	}
}

func xdgConv(t testing.TB, h scram.HashGeneratorFcn, user, password, authzid string) *scram.ClientConversation {
	t.Helper()
	c, err := h.NewClient(user, password, authzid)
	if err != nil {
		t.Fatal(err)
	}
	return c.NewConversation()
}

// TestSCRAMWithXDGClient: xdg-go's client authenticates with the right password and verifies the server;
// a wrong password and an unknown user fail at client-final with the same error.
func TestSCRAMWithXDGClient(t *testing.T) {
	store := newStore(t, "alice", "alice-pw", "a,b=c", "comma-pw")
	for _, m := range scramMechs {
		t.Run(m.name, func(t *testing.T) {
			mech := m.new(store)
			if mech.Name() != m.name {
				t.Errorf("Name() = %q", mech.Name())
			}
			for _, tt := range []struct {
				name, user, password, authzid string
			}{
				{"alice", "alice", "alice-pw", ""},
				{"alice as herself", "alice", "alice-pw", "alice"},
				{"a name with , and =", "a,b=c", "comma-pw", ""},
			} {
				o := exchangeXDG(t, mech, xdgConv(t, m.client, tt.user, tt.password, tt.authzid))
				if o.err != nil || o.rounds != 2 || o.principal != tt.user || !o.clientOK {
					t.Errorf("%s: %+v; want %s authenticated in 2 rounds and the server verified", tt.name, o, tt.user)
				}
			}
			for _, tt := range []struct {
				name, user, password, authzid string
			}{
				{"wrong password", "alice", "bob-pw", ""},
				{"unknown user", "mallory", "alice-pw", ""},
				{"authzid of another", "alice", "alice-pw", "bob"},
			} {
				o := exchangeXDG(t, mech, xdgConv(t, m.client, tt.user, tt.password, tt.authzid))
				if o.err != sasl.ErrAuthFailed || o.principal != "" {
					t.Errorf("%s: %+v; want ErrAuthFailed itself", tt.name, o)
				}
				if tt.authzid == "" && o.rounds != 2 {
					t.Errorf("%s failed after %d rounds, want 2", tt.name, o.rounds)
				}
			}
		})
	}
}

// franzSession runs one exchange between franz-go's SCRAM client and the mechanism.
func exchangeFranz(t *testing.T, mechName string, mech sasl.Mechanism, user, password string) outcome {
	t.Helper()
	auth := kscram.Auth{User: user, Pass: password}
	client := auth.AsSha256Mechanism()
	if mechName == "SCRAM-SHA-512" {
		client = auth.AsSha512Mechanism()
	}
	session, msg, err := client.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	var o outcome
	ex := mech.Start(context.Background(), "127.0.0.1:1")
	for {
		o.rounds++
		answer, done, err := ex.Next(msg)
		if o.rounds == 1 {
			o.serverFirst = string(answer)
		}
		if err != nil {
			o.err = err
			return o
		}
		clientDone, next, cerr := session.Challenge(answer)
		if done {
			o.clientOK = cerr == nil && clientDone
			o.principal = ex.Result().Principal
			return o
		}
		if cerr != nil || o.rounds > 2 {
			t.Fatalf("round %d: franz-go's client: %v", o.rounds, cerr)
		}
		msg = next
	}
}

// TestSCRAMWithFranzClient: the SCRAM client of franz-go, the Kafka client the gateway's tests use,
// authenticates, verifies the server, and fails as xdg-go's does.
func TestSCRAMWithFranzClient(t *testing.T) {
	store := newStore(t, "alice", "alice-pw", "a,b=c", "comma-pw")
	for _, m := range scramMechs {
		t.Run(m.name, func(t *testing.T) {
			mech := m.new(store)
			for _, user := range []string{"alice", "a,b=c"} {
				pw := map[string]string{"alice": "alice-pw", "a,b=c": "comma-pw"}[user]
				if o := exchangeFranz(t, m.name, mech, user, pw); o.err != nil || o.rounds != 2 || o.principal != user || !o.clientOK {
					t.Errorf("%s: %+v; want authenticated in 2 rounds, the server verified", user, o)
				}
			}
			wrong := exchangeFranz(t, m.name, mech, "alice", "bob-pw")
			unknown := exchangeFranz(t, m.name, mech, "mallory", "alice-pw")
			for _, o := range []outcome{wrong, unknown} {
				if o.err != sasl.ErrAuthFailed || o.rounds != 2 {
					t.Errorf("%+v; want ErrAuthFailed itself at round 2", o)
				}
			}
		})
	}
}

// serverFirstFields returns the salt and iteration count of a server-first-message.
func serverFirstFields(t testing.TB, s string) (salt, iters string) {
	t.Helper()
	f := strings.Split(s, ",")
	if len(f) != 3 || !strings.HasPrefix(f[0], "r=") || !strings.HasPrefix(f[1], "s=") || !strings.HasPrefix(f[2], "i=") {
		t.Fatalf("server-first-message %q is not r=,s=,i=", s)
	}
	return f[1], f[2]
}

// TestSCRAMPhantom: an unknown user's challenge looks like a known user's: a salt of the same length, the
// same iteration count, the same salt on every attempt for the same name, another for another name.
func TestSCRAMPhantom(t *testing.T) {
	store := newStore(t, "alice", "alice-pw")
	for _, m := range scramMechs {
		t.Run(m.name, func(t *testing.T) {
			mech := m.new(store)
			first := func(user string) string {
				answer, done, err := mech.Start(context.Background(), "").Next([]byte("n,,n=" + user + ",r=clientnonce"))
				if err != nil || done {
					t.Fatalf("client-first of %s: %v, done %v", user, err, done)
				}
				return string(answer)
			}
			aliceSalt, aliceIters := serverFirstFields(t, first("alice"))
			mallorySalt, malloryIters := serverFirstFields(t, first("mallory"))
			again, _ := serverFirstFields(t, first("mallory"))
			trudySalt, _ := serverFirstFields(t, first("trudy"))
			if len(mallorySalt) != len(aliceSalt) || malloryIters != aliceIters {
				t.Errorf("unknown user: %s %s; known user: %s %s; want the same shape", mallorySalt, malloryIters, aliceSalt, aliceIters)
			}
			if again != mallorySalt {
				t.Errorf("the same unknown user got salts %s and %s", mallorySalt, again)
			}
			if trudySalt == mallorySalt {
				t.Error("two unknown users got the same salt")
			}
			if a2, _ := serverFirstFields(t, first("alice")); a2 != aliceSalt {
				t.Errorf("alice got salts %s and %s", aliceSalt, a2)
			}
		})
	}
}

// TestSCRAMMalformed: client messages the mechanism refuses, and where.
func TestSCRAMMalformed(t *testing.T) {
	mech := sasl.NewSCRAMSHA256(newStore(t, "alice", "alice-pw"))
	tests := []struct {
		name string
		msg  string
		want string // in the error
	}{
		{"empty", "", "is empty"},
		{"channel binding", "p=tls-unique,,n=alice,r=abc", "channel binding ('p=') is not offered"},
		{"channel binding of an unknown type", "p=foo,,n=alice,r=abc", "channel binding"},
		{"delegation token", "n,,n=alice,r=abc,tokenauth=true", "delegation tokens"},
		{"delegation token, other case", "n,,n=alice,r=abc,tokenauth=TRUE", "delegation tokens"},
		{"bad name escape", "n,,n=a=2Xb,r=abc", "e=invalid-username-encoding"},
		{"raw = in the name", "n,,n=a=b,r=abc", "e=invalid-username-encoding"},
		{"bad authzid escape", "n,a=x=y,n=alice,r=abc", "client-first-message"},
		{"too few fields", "n,,n=alice", "does not follow RFC 5802"},
		{"no gs2 header", "n=alice,r=abc", "does not follow RFC 5802"},
		{"unknown flag", "x,,n=alice,r=abc", "does not follow RFC 5802"},
		{"mandatory extension", "n,,m=ext,n=alice,r=abc", "does not follow RFC 5802"},
		{"NUL", "n,,n=al\x00ice,r=abc", "without NUL"},
		{"not UTF-8", "n,,n=al\xffice,r=abc", "not UTF-8"},
		{"too long", "n,,n=" + strings.Repeat("a", 4096) + ",r=abc", "at most 4096"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := mech.Start(context.Background(), "")
			answer, done, err := ex.Next([]byte(tt.msg))
			if !done || !errors.Is(err, sasl.ErrMalformed) || answer != nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Next = %q, %v, %v; want done with ErrMalformed saying %q", answer, done, err, tt.want)
			}
			if _, done, err := ex.Next([]byte("c=biws,r=abc,p=AAAA")); !done || !errors.Is(err, sasl.ErrMalformed) {
				t.Errorf("a message after the end: %v, %v", done, err)
			}
		})
	}

	// 'y': the client could bind but thinks the server cannot, which is so: accepted (RFC 5802 §6).
	if _, done, err := mech.Start(context.Background(), "").Next([]byte("y,,n=alice,r=abc")); err != nil || done {
		t.Errorf("gs2 flag y: %v, done %v; want a challenge", err, done)
	}
	// Unknown extensions after the nonce are ignored, as the RFC asks.
	if _, done, err := mech.Start(context.Background(), "").Next([]byte("n,,n=alice,r=abc,tokenauth=false,x=1")); err != nil || done {
		t.Errorf("extensions: %v, done %v; want a challenge", err, done)
	}
}

// TestSCRAMBadClientFinal: a client-final-message that does not fit the exchange fails as a wrong
// password does, whoever the user.
func TestSCRAMBadClientFinal(t *testing.T) {
	mech := sasl.NewSCRAMSHA256(newStore(t, "alice", "alice-pw"))
	for _, user := range []string{"alice", "mallory"} {
		start := func() (sasl.Exchange, string) {
			ex := mech.Start(context.Background(), "")
			answer, _, err := ex.Next([]byte("n,,n=" + user + ",r=abc"))
			if err != nil {
				t.Fatal(err)
			}
			return ex, strings.TrimPrefix(strings.Split(string(answer), ",")[0], "r=")
		}
		proof := "p=" + strings.Repeat("A", 43) + "="
		for _, tt := range []struct{ name, msg string }{
			{"wrong proof", "c=biws,r=%s," + proof},
			{"other nonce", "c=biws,r=abcdef," + proof},
			{"other gs2 header", "c=eSws,r=%s," + proof},
			{"short proof", "c=biws,r=%s,p=AAAA"},
			{"no proof", "c=biws,r=%s"},
			{"garbage", "hello"},
			{"too long", strings.Repeat("x", 5000)},
		} {
			ex, nonce := start()
			msg := tt.msg
			if strings.Contains(msg, "%s") {
				msg = fmt.Sprintf(msg, nonce)
			}
			answer, done, err := ex.Next([]byte(msg))
			want := sasl.ErrAuthFailed
			if len(msg) > 4096 {
				want = sasl.ErrMalformed
			}
			if !done || !errors.Is(err, want) || answer != nil {
				t.Errorf("%s, %s: %q, %v, %v; want done with %v", user, tt.name, answer, done, err, want)
			}
		}
	}
}

// TestSCRAMReplay: a client-final-message recorded from a successful exchange does not authenticate
// another: the server's nonce differs.
func TestSCRAMReplay(t *testing.T) {
	mech := sasl.NewSCRAMSHA256(newStore(t, "alice", "alice-pw"))
	conv := xdgConv(t, scram.SHA256, "alice", "alice-pw", "")
	c1, _ := conv.Step("")
	ex := mech.Start(context.Background(), "")
	s1, _, _ := ex.Next([]byte(c1))
	c2, err := conv.Step(string(s1))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ex.Next([]byte(c2)); err != nil {
		t.Fatalf("the recorded exchange itself: %v", err)
	}
	ex2 := mech.Start(context.Background(), "")
	if _, _, err := ex2.Next([]byte(c1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ex2.Next([]byte(c2)); err != sasl.ErrAuthFailed {
		t.Errorf("replayed client-final: %v, want ErrAuthFailed", err)
	}
}

// TestSCRAMMechanismsApart: credentials for one hash do not serve the other: a client of SCRAM-SHA-512
// talking to SCRAM-SHA-256 fails.
func TestSCRAMMechanismsApart(t *testing.T) {
	store := newStore(t, "alice", "alice-pw")
	o := exchangeXDG(t, sasl.NewSCRAMSHA256(store), xdgConv(t, scram.SHA512, "alice", "alice-pw", ""))
	if o.err == nil {
		t.Error("a SCRAM-SHA-512 client authenticated with SCRAM-SHA-256")
	}
	if !bytes.Contains([]byte(o.serverFirst), []byte("i=4096")) {
		t.Errorf("server-first %q does not carry the stored iteration count", o.serverFirst)
	}
}

// notFound answers every lookup with the real credentials of one password, but says the user is unknown.
type notFound struct{ creds sasl.SCRAMCredentials }

func (n notFound) Lookup(string, string) (sasl.SCRAMCredentials, bool) { return n.creds, false }
func (notFound) VerifyPlain(string, string) bool                       { return false }

// TestSCRAMNotFoundNeverAuthenticates: a user the credentials say they do not have is refused even if the
// proof verifies against what they returned.
func TestSCRAMNotFoundNeverAuthenticates(t *testing.T) {
	client, err := scram.SHA256.NewClient("alice", "alice-pw", "")
	if err != nil {
		t.Fatal(err)
	}
	kf := scram.KeyFactors{Salt: "0123456789abcdef", Iters: 4096}
	sc := client.GetStoredCredentials(kf)
	creds := sasl.SCRAMCredentials{Salt: []byte(kf.Salt), Iterations: kf.Iters, StoredKey: sc.StoredKey, ServerKey: sc.ServerKey}
	if o := exchangeXDG(t, sasl.NewSCRAMSHA256(notFound{creds}), client.NewConversation()); o.err != sasl.ErrAuthFailed {
		t.Errorf("%+v; want ErrAuthFailed", o)
	}
}
