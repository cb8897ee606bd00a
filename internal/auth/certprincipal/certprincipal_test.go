package certprincipal

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net/url"
	"strings"
	"testing"
)

func cert(cn string, ou ...string) *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: cn, OrganizationalUnit: ou, Organization: []string{"Acme"}},
		DNSNames: []string{"svc.example.internal"}, EmailAddresses: []string{"alice@example.com"},
		URIs: []*url.URL{{Scheme: "spiffe", Host: "example.org", Path: "/ns/prod/sa/billing"}}}
}

func TestPrincipal(t *testing.T) {
	cases := []struct {
		source Source
		rules  string
		cert   *x509.Certificate
		want   string
		err    error
	}{
		{"", "", cert("alice"), "CN=alice,O=Acme", nil},
		{"", `RULE:^CN=([a-z]+),O=Acme$/$1/`, cert("alice"), "alice", nil},
		{"", `RULE:^CN=(.*),O=Acme$/$1/U`, cert("Alice"), "ALICE", nil},
		{"", `RULE:^CN=(.*),O=Acme$/$1/L`, cert("Alice"), "alice", nil},
		{"", `RULE:^CN=(.*),OU=ops,O=Acme$/ops-$1/, DEFAULT`, cert("bob"), "CN=bob,O=Acme", nil},
		{"", `RULE:^CN=(.*),OU=ops,O=Acme$/ops-$1/`, cert("bob"), "", ErrNoMatch},
		{"", `RULE:^CN=(.*),OU=ops,O=Acme$/ops-$1/,RULE:^CN=(.*),O=Acme$/$1/`, cert("carol", "ops"), "ops-carol", nil},
		{"", `RULE:CN=a/x/`, cert("alice"), "", ErrNoMatch}, // must match the whole name
		{SANDNS, `RULE:^([^.]+)\..*$/$1/`, cert("x"), "svc", nil},
		{SANEmail, "", cert("x"), "alice@example.com", nil},
		{SANURI, `RULE:^spiffe:\/\/example.org\/ns\/[^\/]+\/sa\/(.*)$/$1/`, cert("x"), "billing", nil},
		{SANDNS, "", &x509.Certificate{}, "", ErrNoMatch},
	}
	for _, tc := range cases {
		m, err := New(tc.source, tc.rules)
		if err != nil {
			t.Fatalf("New(%q, %q): %v", tc.source, tc.rules, err)
		}
		got, err := m.Principal(tc.cert)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("%s %q on %s: got %q, %v; want %q, %v", tc.source, tc.rules, tc.cert.Subject, got, err, tc.want, tc.err)
		}
	}
}

func TestNewErrors(t *testing.T) {
	for rules, says := range map[string]string{
		"RULE:abc":           "want RULE:pattern/replacement/",
		"RULE:a/b":           "no closing '/'",
		"RULE:(/x/":          "pattern",
		"DEFAULT,":           "ends with ','",
		"DEFAULT DEFAULT":    "expected ','",
		"CN=alice":           "each rule is",
		"RULE:a/b/X,DEFAULT": "expected ','",
	} {
		if _, err := New("", rules); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("New(%q) = %v, want an error saying %q", rules, err, says)
		}
	}
	if _, err := New("issuer", ""); err == nil || !strings.Contains(err.Error(), "san_dns") {
		t.Errorf("an unknown source: %v", err)
	}
}
