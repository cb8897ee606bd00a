package config

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClusterSASLErrors: each mistake in a cluster's sasl block is named
// with its path and fix; secrets are never shown.
func TestClusterSASLErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o600)
	t.Setenv("STRAIT_TEST_SET", "s3cret-value")
	cases := []struct {
		block []string
		path  string
		says  string
	}{
		{[]string{"      mechanism: GSSAPI"}, "clusters.local.sasl.mechanism", "use one of PLAIN"},
		{[]string{"      mechanism: PLAIN", "      password_env: STRAIT_TEST_SET"}, "clusters.local.sasl.username", "is required for PLAIN"},
		{[]string{"      mechanism: SCRAM-SHA-512", "      username: gw"}, "clusters.local.sasl.password_file", "never write it in the config"},
		{[]string{"      mechanism: SCRAM-SHA-512", "      username: gw", "      password_env: STRAIT_TEST_UNSET"}, "clusters.local.sasl.password_env", "STRAIT_TEST_UNSET is not set"},
		{[]string{"      mechanism: PLAIN", "      username: gw", "      password_file: " + empty}, "clusters.local.sasl.password_file", "is empty"},
		{[]string{"      mechanism: PLAIN", "      username: gw", "      password_file: /nonexistent/pw"}, "clusters.local.sasl.password_file", "cannot read /nonexistent/pw"},
		{[]string{"      mechanism: PLAIN", "      username: gw", "      password_file: " + empty, "      password_env: STRAIT_TEST_SET"}, "clusters.local.sasl.password_file", "one way"},
		{[]string{"      mechanism: OAUTHBEARER", "      client_id: gw", "      client_secret_env: STRAIT_TEST_SET"}, "clusters.local.sasl.token_url", "is required for OAUTHBEARER"},
		{[]string{"      mechanism: OAUTHBEARER", "      token_url: http://idp.example.com/token", "      client_id: gw", "      client_secret_env: STRAIT_TEST_SET"}, "clusters.local.sasl.token_url", "must be https"},
		{[]string{"      mechanism: OAUTHBEARER", "      token_url: https://idp.example.com/token", "      client_secret_env: STRAIT_TEST_SET"}, "clusters.local.sasl.client_id", "is required"},
	}
	for _, tc := range cases {
		lines := append(with(3, "    bootstrap_servers: [127.0.0.1:9092]\n    sasl:"), "")
		lines = append(lines[:3], append(tc.block, lines[3:]...)...)
		errs := parseErrs(t, doc(lines...))
		e := findErr(errs, tc.path)
		if e == nil || !strings.Contains(e.Error(), tc.says) {
			t.Errorf("%v: errors %v, want %s saying %q", tc.block, errs, tc.path, tc.says)
		}
		if strings.Contains(errs.Error(), "s3cret-value") {
			t.Errorf("%v: an error shows the secret: %v", tc.block, errs)
		}
	}
}

// TestClusterSASLBuild: each mechanism builds from its secrets; the
// OAUTHBEARER one fetches its token with the client-credentials grant.
func TestClusterSASLBuild(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte("gw-pass\n"), 0o600)
	for _, m := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		mech, err := (&ClusterSASL{Mechanism: m, Username: "gw", PasswordFile: pw}).Build()
		if err != nil || mech.Name() != m {
			t.Errorf("%s: %v, %v", m, mech, err)
		}
	}
	plain, _ := (&ClusterSASL{Mechanism: "PLAIN", Username: "gw", PasswordFile: pw}).Build()
	_, first, err := plain.Authenticate(context.Background(), "broker")
	if err != nil || string(first) != "\x00gw\x00gw-pass" {
		t.Errorf("PLAIN's message %q, %v: want the password from the file, without its newline", first, err)
	}

	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, _ := r.BasicAuth()
		if r.FormValue("grant_type") != "client_credentials" || id != "gw" || secret != "client-secret" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "tok-123", "token_type": "bearer", "expires_in": 3600})
	}))
	defer idp.Close()
	t.Setenv("STRAIT_TEST_CLIENT_SECRET", "client-secret")
	mech, err := (&ClusterSASL{Mechanism: "OAUTHBEARER", TokenURL: idp.URL, ClientID: "gw", ClientSecretEnv: "STRAIT_TEST_CLIENT_SECRET"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	_, first, err = mech.Authenticate(context.Background(), "broker")
	if err != nil || !strings.Contains(string(first), "auth=Bearer tok-123") {
		t.Errorf("OAUTHBEARER's message %q, %v: want the token from the endpoint", first, err)
	}
}

// TestUpstreamIdentityErrors: an upstream_identity block needs a principal
// to map and credentials per principal, each mistake named with its path.
func TestUpstreamIdentityErrors(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte("alice-pass\n"), 0o600)
	sasl := []string{"    sasl:", "      mechanisms: [PLAIN]", "      credentials: users.store"}
	cases := []struct {
		lines []string
		path  string
		says  string
	}{
		{[]string{"    upstream_identity:", "      principals:", "        alice: {mechanism: PLAIN, username: alice, password_file: " + pw + "}"},
			"virtual_clusters[0].upstream_identity", "add a sasl block"},
		{append(sasl, "    upstream_identity:", "      unmapped: deny", "      principals:", "        alice: {mechanism: PLAIN, username: alice, password_file: "+pw+"}"),
			"virtual_clusters[0].upstream_identity.unmapped", "use one of gateway, refuse"},
		{append(sasl, "    upstream_identity:", "      unmapped: refuse"),
			"virtual_clusters[0].upstream_identity.principals", "is empty"},
		{append(sasl, "    upstream_identity:", "      principals:", "        alice: {mechanism: SCRAM-SHA-512, username: alice}"),
			"virtual_clusters[0].upstream_identity.principals.alice.password_file", "is required"},
	}
	for _, tc := range cases {
		errs := parseErrs(t, doc(append(append([]string(nil), minimal...), tc.lines...)...))
		e := findErr(errs, tc.path)
		if e == nil || !strings.Contains(e.Error(), tc.says) {
			t.Errorf("%v: errors %v, want %s saying %q", tc.lines, errs, tc.path, tc.says)
		}
	}
	ok := append(append(append([]string(nil), minimal...), sasl...), "    upstream_identity:", "      unmapped: refuse", "      principals:",
		"        alice: {mechanism: SCRAM-SHA-512, username: alice-up, password_file: "+pw+"}")
	cfg := mustParse(t, doc(ok...))
	u := cfg.VirtualClusters[0].UpstreamIdentity
	if u == nil || !u.RefusesUnmapped() || u.Principals["alice"].Username != "alice-up" {
		t.Fatalf("upstream_identity parsed as %+v", u)
	}
	if m, err := u.Principals["alice"].Build(); err != nil || m.Name() != "SCRAM-SHA-512" {
		t.Errorf("alice's mechanism: %v, %v", m, err)
	}
}
