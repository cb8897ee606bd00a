package authconfig

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/auth/credstore"
	"github.com/straitgw/strait/internal/auth/oauth"
	"github.com/straitgw/strait/internal/auth/sasl"
)

func TestValidate(t *testing.T) {
	d := func(s string) *time.Duration { v, _ := time.ParseDuration(s); return &v }
	cases := []struct {
		cfg  Config
		says string
	}{
		{Config{}, "mechanisms: is empty"},
		{Config{Mechanisms: []string{"scram-sha-512"}, Credentials: "x"}, `mechanisms[0]: "scram-sha-512" is not offered`},
		{Config{Mechanisms: []string{"PLAIN", "PLAIN"}, Credentials: "x"}, "mechanisms[1]: PLAIN is listed twice"},
		{Config{Mechanisms: []string{"SCRAM-SHA-256"}}, "credentials: is required for PLAIN and SCRAM"},
		{Config{Mechanisms: []string{"OAUTHBEARER"}, Credentials: "x"}, "credentials: is set, but no mechanism"},
		{Config{Mechanisms: []string{"OAUTHBEARER"}}, "oauthbearer: is required for OAUTHBEARER"},
		{Config{Mechanisms: []string{"PLAIN"}, Credentials: "x", OAuthBearer: &oauth.Config{}}, "oauthbearer: is set, but OAUTHBEARER is not among"},
		{Config{Mechanisms: []string{"OAUTHBEARER"}, OAuthBearer: &oauth.Config{JWKSFile: "k.json", Audience: []string{"kafka"}}}, "oauthbearer.issuer: is empty"},
		{Config{Mechanisms: []string{"PLAIN"}, Credentials: "x", MaxSessionLifetime: d("-1s")}, "max_session_lifetime: -1s is negative"},
		{Config{Mechanisms: []string{"PLAIN"}, Credentials: "x", MaxSessionLifetime: d("5s")}, "max_session_lifetime: 5s is under 10s"},
		{Config{Mechanisms: []string{"PLAIN"}, Credentials: "x", FailureDelay: d("1m")}, "failure_delay: 1m0s: use a duration from 0s to 10s"},
		{Config{Mechanisms: []string{"PLAIN"}, Credentials: "x", FailureBudget: func() *int { n := -1; return &n }()}, "failure_budget: -1 is negative"},
		{Config{Mechanisms: []string{"SCRAM-SHA-512"}, Credentials: "x", SCRAMNonce: "lenient"}, `scram_nonce: "lenient": use strict`},
	}
	for _, tc := range cases {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: %v, want an error saying %q", tc.cfg, err, tc.says)
		}
	}
	ok := Config{Mechanisms: []string{"SCRAM-SHA-512", "PLAIN"}, Credentials: "x"}
	if err := ok.Validate(); err != nil {
		t.Errorf("a good config: %v", err)
	}
}

// TestBuild opens the store and makes the mechanisms in the order listed,
// with the defaults; a store that does not exist says how to make it.
func TestBuild(t *testing.T) {
	store := filepath.Join(t.TempDir(), "users.store")
	c := Config{Mechanisms: []string{"SCRAM-SHA-512", "PLAIN", "SCRAM-SHA-256"}, Credentials: store}
	if _, err := c.Build(nil); err == nil || !strings.Contains(err.Error(), "strait users add") {
		t.Errorf("a missing store: %v, want an error saying how to make it", err)
	}
	if _, err := credstore.AddUser(store, "alice", "correct horse", credstore.MinIterations); err != nil {
		t.Fatal(err)
	}
	b, err := c.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range b.Mechanisms {
		names = append(names, m.Name())
	}
	if strings.Join(names, ",") != "SCRAM-SHA-512,PLAIN,SCRAM-SHA-256" {
		t.Errorf("mechanisms %v, want them in the order listed", names)
	}
	if b.MaxSessionLifetime != DefaultMaxSessionLifetime || b.FailureDelay != DefaultFailureDelay || b.FailureBudget != DefaultFailureBudget || b.Store == nil {
		t.Errorf("built %+v: want the defaults and the store", b)
	}
	for nonce, strict := range map[string]bool{"": false, "librdkafka_compatible": false, "strict": true} {
		c.SCRAMNonce = nonce
		b, err := c.Build(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range b.Mechanisms {
			if s, ok := m.(*sasl.SCRAM); ok && s.StrictNonce != strict {
				t.Errorf("scram_nonce %q: %s strict %v, want %v", nonce, s.Name(), s.StrictNonce, strict)
			}
		}
	}
}
