package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	kafkasasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"golang.org/x/oauth2/clientcredentials"
)

// ClusterSASL is the gateway's own SASL identity toward a cluster's
// brokers: every broker connection and the gateway's own client use it.
// Secrets come from files or the environment, never from the config.
type ClusterSASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER.
	Mechanism string `yaml:"mechanism"`
	// Username, and the password from PasswordFile or PasswordEnv, for
	// PLAIN and SCRAM.
	Username     string `yaml:"username,omitempty"`
	PasswordFile string `yaml:"password_file,omitempty"`
	PasswordEnv  string `yaml:"password_env,omitempty"`
	// For OAUTHBEARER: the OAuth 2 client-credentials grant at TokenURL,
	// with ClientID and the secret from ClientSecretFile or
	// ClientSecretEnv; the token is fetched again before it expires.
	TokenURL         string   `yaml:"token_url,omitempty"`
	ClientID         string   `yaml:"client_id,omitempty"`
	ClientSecretFile string   `yaml:"client_secret_file,omitempty"`
	ClientSecretEnv  string   `yaml:"client_secret_env,omitempty"`
	Scopes           []string `yaml:"scopes,omitempty"`
}

// UpstreamIdentity maps client principals (from SASL terminated at the
// gateway, or from TLS client certificates) to SASL credentials of their
// own toward the brokers, so that the cluster's ACLs, quotas and audit log
// see the real user.
type UpstreamIdentity struct {
	// Principals maps a principal to the credentials its broker
	// connections authenticate with (the same settings as clusters.*.sasl).
	Principals map[string]*ClusterSASL `yaml:"principals"`
	// Unmapped is what a principal without an entry gets: gateway (the
	// cluster's own identity, clusters.*.sasl; the default) or refuse.
	Unmapped string `yaml:"unmapped,omitempty"`
}

// RefusesUnmapped reports whether principals without an entry are refused.
func (u *UpstreamIdentity) RefusesUnmapped() bool { return u.Unmapped == "refuse" }

// upstreamIdentity checks a virtual cluster's upstream_identity block.
func (v *validator) upstreamIdentity(p string, vc *VirtualCluster) {
	u := vc.UpstreamIdentity
	if u == nil {
		return
	}
	if vc.SASL.Kind == 0 && (vc.TLS == nil || vc.TLS.Principal == nil) {
		v.add(p, "maps client principals, but the virtual cluster names none: add a sasl block (clients authenticate to the gateway) or tls.principal (clients named by certificate)")
	}
	if u.Unmapped != "" {
		v.oneOf(p+".unmapped", u.Unmapped, "gateway", "refuse")
	}
	if len(u.Principals) == 0 {
		v.add(p+".principals", "is empty: map each principal to its credentials, e.g. principals: {alice: {mechanism: SCRAM-SHA-512, username: alice, password_file: /etc/strait/alice.password}}")
	}
	names := make([]string, 0, len(u.Principals))
	for name := range u.Principals {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s := u.Principals[name]
		if s == nil {
			v.add(p+".principals."+name, "is empty: set mechanism, username and password_file (or password_env)")
			continue
		}
		v.clusterSASL(p+".principals."+name, s)
	}
}

var clusterMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}

// clusterSASL checks a cluster's sasl block.
func (v *validator) clusterSASL(p string, s *ClusterSASL) {
	if s == nil {
		return
	}
	if !slices.Contains(clusterMechanisms, s.Mechanism) {
		v.add(p+".mechanism", fmt.Sprintf("%q is not a mechanism: use one of %s", s.Mechanism, strings.Join(clusterMechanisms, ", ")))
		return
	}
	secret := func(what, file, env string) {
		switch {
		case file != "" && env != "":
			v.add(p+"."+what+"_file", "is set along with "+what+"_env: give the "+what+" one way")
		case file == "" && env == "":
			v.add(p+"."+what+"_file", "is required: name a file holding the "+what+" ("+what+"_file) or an environment variable ("+what+"_env); never write it in the config")
		case file != "":
			if _, err := readSecret(file, ""); err != nil {
				v.add(p+"."+what+"_file", err.Error())
			}
		default:
			if _, err := readSecret("", env); err != nil {
				v.add(p+"."+what+"_env", err.Error())
			}
		}
	}
	if s.Mechanism == "OAUTHBEARER" {
		if s.TokenURL == "" {
			v.add(p+".token_url", "is required for OAUTHBEARER: the token endpoint of the identity provider (client-credentials grant)")
		} else if !strings.HasPrefix(s.TokenURL, "https://") && !strings.HasPrefix(s.TokenURL, "http://127.0.0.1") && !strings.HasPrefix(s.TokenURL, "http://localhost") {
			v.add(p+".token_url", "must be https (plain http only to 127.0.0.1 or localhost): the client secret travels to it")
		}
		if s.ClientID == "" {
			v.add(p+".client_id", "is required for OAUTHBEARER")
		}
		secret("client_secret", s.ClientSecretFile, s.ClientSecretEnv)
		if s.Username != "" || s.PasswordFile != "" || s.PasswordEnv != "" {
			v.add(p+".username", "is for PLAIN and SCRAM: OAUTHBEARER uses token_url, client_id and the client secret")
		}
		return
	}
	if s.Username == "" {
		v.add(p+".username", "is required for "+s.Mechanism+": the user the gateway logs in to the brokers as")
	}
	secret("password", s.PasswordFile, s.PasswordEnv)
	if s.TokenURL != "" || s.ClientID != "" {
		v.add(p+".token_url", "is for OAUTHBEARER: "+s.Mechanism+" uses username and password")
	}
}

// readSecret reads a secret from a file (its trailing newline dropped) or
// an environment variable. Errors never show the secret.
func readSecret(file, env string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("cannot read %s: %v", file, errors.Unwrap(err))
		}
		s := strings.TrimRight(string(b), "\r\n")
		if s == "" {
			return "", fmt.Errorf("%s is empty", file)
		}
		return s, nil
	}
	s, ok := os.LookupEnv(env)
	if !ok || s == "" {
		return "", fmt.Errorf("environment variable %s is not set", env)
	}
	return s, nil
}

// Build returns the mechanism the gateway authenticates to the brokers
// with, or nil when s is nil.
func (s *ClusterSASL) Build() (kafkasasl.Mechanism, error) {
	if s == nil {
		return nil, nil
	}
	if s.Mechanism == "OAUTHBEARER" {
		secret, err := readSecret(s.ClientSecretFile, s.ClientSecretEnv)
		if err != nil {
			return nil, fmt.Errorf("sasl client secret: %w", err)
		}
		cc := clientcredentials.Config{ClientID: s.ClientID, ClientSecret: secret, TokenURL: s.TokenURL, Scopes: s.Scopes}
		// A token source that caches its token and fetches a new one
		// shortly before it expires; every broker connection asks it.
		ts := cc.TokenSource(context.Background())
		return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
			tok, err := ts.Token()
			if err != nil {
				return oauth.Auth{}, fmt.Errorf("fetching the gateway's OAuth token from %s: %w", s.TokenURL, err)
			}
			return oauth.Auth{Token: tok.AccessToken}, nil
		}), nil
	}
	pass, err := readSecret(s.PasswordFile, s.PasswordEnv)
	if err != nil {
		return nil, fmt.Errorf("sasl password: %w", err)
	}
	switch s.Mechanism {
	case "PLAIN":
		return plain.Auth{User: s.Username, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.Username, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.Username, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("sasl mechanism %q: use one of %s", s.Mechanism, strings.Join(clusterMechanisms, ", "))
}
