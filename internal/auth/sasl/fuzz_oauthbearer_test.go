package sasl

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
)

// To fuzz:
//
//	go test ./internal/auth/sasl -run '^$' -fuzz FuzzOAuthBearerMessage -fuzztime 60s

// FuzzOAuthBearerMessage: the parser of the client's initial response
// never panics; what it accepts has a token of bearer characters within
// the bounds, and written back in the RFC's form it parses to the same
// message. The exchange on top of it ends in one step or two, never more.
func FuzzOAuthBearerMessage(f *testing.F) {
	for _, seed := range []string{
		"n,,\x01auth=Bearer abc\x01\x01",
		"n,a=alice,\x01auth=Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln\x01\x01",
		"n,a=user@example.com,\x01host=server.example.com\x01port=143\x01auth=Bearer vF9dft4qmTc2Nvb3RlckBhbHRhdmlzdGEuY29tCg==\x01\x01",
		"y,a=a=2Cb=3Dc,\x01auth=bearer x\x01logicalCluster=lkc-1\x01traceId=a b\x01\x01",
		"n,,\x01auth=Bearer abc\x01\x01host=h\x01\x01",
		"p=tls-unique,,\x01auth=Bearer abc\x01\x01",
		"n,,\x01\x01",
		"\x01",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, err := parseOAuthBearerMessage(msg)
		accepted := err == nil && m.token == testBearerToken && (m.authzid == "" || m.authzid == "alice")
		checkOAuthBearerExchange(t, msg, accepted)
		if err != nil {
			return
		}
		if m.token == "" || len(msg) > maxOAuthBearerMessage || len(m.extensions) > maxOAuthBearerPairs {
			t.Fatalf("accepted out of bounds: %+v", m)
		}
		if _, err := readOAuthBearerAuth("Bearer " + m.token); err != nil {
			t.Fatalf("accepted token %q is no bearer token: %v", m.token, err)
		}
		again, err := parseOAuthBearerMessage(writeOAuthBearerMessage(m))
		if err != nil {
			t.Fatalf("accepted %q, but not written back: %v", msg, err)
		}
		if again.authzid != m.authzid || again.token != m.token || again.host != m.host || again.port != m.port ||
			!maps.Equal(again.extensions, m.extensions) {
			t.Fatalf("%+v written back reads %+v", m, again)
		}
	})
}

// checkOAuthBearerExchange runs msg through an exchange whose validator accepts
// testBearerToken only: it ends at once or after the status round.
func checkOAuthBearerExchange(t *testing.T, msg []byte, accepted bool) {
	ex := NewOAuthBearer(&fakeTokenValidator{}, OAuthBearerOptions{}).Start(context.Background(), "fuzz")
	answer, done, err := ex.Next(msg)
	if accepted {
		if !done || err != nil {
			t.Fatalf("testBearerToken not accepted: %v", err)
		}
		return
	}
	if !done {
		if err != nil || !bytes.HasPrefix(answer, []byte(`{"status":`)) {
			t.Fatalf("not done, with answer %q and error %v", answer, err)
		}
		answer, done, err = ex.Next([]byte{1})
	}
	if !done || err == nil || answer != nil {
		t.Fatalf("the exchange did not fail within two steps: %q, %v, %v", answer, done, err)
	}
}

// writeOAuthBearerMessage writes m as a client would.
func writeOAuthBearerMessage(m oauthBearerMessage) []byte {
	var b bytes.Buffer
	b.WriteString("n,")
	if m.authzid != "" {
		b.WriteString("a=" + strings.NewReplacer("=", "=3D", ",", "=2C").Replace(m.authzid))
	}
	b.WriteString(",\x01auth=Bearer " + m.token + "\x01")
	if m.host != "" {
		b.WriteString("host=" + m.host + "\x01")
	}
	if m.port != "" {
		b.WriteString("port=" + m.port + "\x01")
	}
	for _, k := range slices.Sorted(maps.Keys(m.extensions)) {
		b.WriteString(k + "=" + m.extensions[k] + "\x01")
	}
	b.WriteByte(1)
	return b.Bytes()
}
