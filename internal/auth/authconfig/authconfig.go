// Package authconfig reads a virtual cluster's `sasl:` block and builds the
// mechanisms it offers: PLAIN and SCRAM over a credential store, OAUTHBEARER
// over a token validator. The CLI decodes the block into Config (strictly,
// as filter configs are), and hands what Build returns to the proxy's
// authentication stage.
package authconfig

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/straitgw/strait/internal/auth/credstore"
	"github.com/straitgw/strait/internal/auth/oauth"
	"github.com/straitgw/strait/internal/auth/sasl"
)

// Config is a virtual cluster's `sasl:` block.
type Config struct {
	// Mechanisms are offered to clients in this order: PLAIN,
	// SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER.
	Mechanisms []string `yaml:"mechanisms"`
	// Credentials is the credential store file of PLAIN and SCRAM
	// (`strait users add --store FILE NAME` writes it).
	Credentials string `yaml:"credentials"`
	// OAuthBearer configures OAUTHBEARER: the token issuer and its keys.
	OAuthBearer *oauth.Config `yaml:"oauthbearer"`
	// MaxSessionLifetime bounds a session (KIP-368): clients are told to
	// re-authenticate within it, and are disconnected if they do not.
	// Default 1h; 0s: no bound but a token's expiry.
	MaxSessionLifetime *time.Duration `yaml:"max_session_lifetime"`
	// FailureDelay is waited before answering a failed authentication.
	// Default 500ms.
	FailureDelay *time.Duration `yaml:"failure_delay"`
	// FailureBudget is how many failed authentications a minute a client
	// address may have at failure_delay; each one past it waits a second
	// longer than the last, up to 30 s. Default 10; 0: no budget.
	FailureBudget *int `yaml:"failure_budget"`
	// SCRAMNonce is how SCRAM's client-final nonce is checked: strict
	// (RFC 5802, as Kafka 4), or librdkafka_compatible (the default):
	// strict, but for the one form librdkafka before 2.6.1 sends, whose
	// proof still binds the server's fresh nonce.
	SCRAMNonce string `yaml:"scram_nonce"`
}

// Defaults.
const (
	DefaultMaxSessionLifetime = time.Hour
	DefaultFailureDelay       = 500 * time.Millisecond
	DefaultFailureBudget      = 10
)

var known = []string{"PLAIN", credstore.SCRAMSHA256, credstore.SCRAMSHA512, "OAUTHBEARER"}

// Validate reports every problem of the block at once, each naming its
// setting and the fix. It does not read files.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Mechanisms) == 0 {
		bad("mechanisms: is empty: list what clients may authenticate with, e.g. mechanisms: [SCRAM-SHA-512, PLAIN]")
	}
	seen := map[string]bool{}
	needStore := false
	for i, m := range c.Mechanisms {
		switch {
		case !slices.Contains(known, m):
			bad("mechanisms[%d]: %q is not offered: use %s (in capitals)", i, m, strings.Join(known, ", "))
		case seen[m]:
			bad("mechanisms[%d]: %s is listed twice", i, m)
		}
		seen[m] = true
		needStore = needStore || m == "PLAIN" || strings.HasPrefix(m, "SCRAM-")
	}
	switch {
	case needStore && c.Credentials == "":
		bad("credentials: is required for PLAIN and SCRAM: the credential store file, made with `strait users add --store FILE NAME`")
	case !needStore && c.Credentials != "":
		bad("credentials: is set, but no mechanism that uses it (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) is listed")
	}
	switch {
	case seen["OAUTHBEARER"] && c.OAuthBearer == nil:
		bad("oauthbearer: is required for OAUTHBEARER: set issuer, audience and jwks_url (or jwks_file)")
	case !seen["OAUTHBEARER"] && c.OAuthBearer != nil:
		bad("oauthbearer: is set, but OAUTHBEARER is not among the mechanisms")
	case c.OAuthBearer != nil:
		if err := c.OAuthBearer.Validate(); err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				bad("oauthbearer.%s", strings.TrimPrefix(line, "oauthbearer."))
			}
		}
	}
	if d := c.MaxSessionLifetime; d != nil && *d < 0 {
		bad("max_session_lifetime: %s is negative: use a duration such as 1h, or 0s for no bound", *d)
	} else if d != nil && *d > 0 && *d < 10*time.Second {
		bad("max_session_lifetime: %s is under 10s: clients would spend their time re-authenticating", *d)
	}
	if n := c.FailureBudget; n != nil && *n < 0 {
		bad("failure_budget: %d is negative: use the failures a minute an address may have, or 0 for no budget", *n)
	}
	switch c.SCRAMNonce {
	case "", "strict", "librdkafka_compatible":
	default:
		bad("scram_nonce: %q: use strict (RFC 5802, as Kafka 4) or librdkafka_compatible (the default: also accepts the nonce of librdkafka before 2.6.1)", c.SCRAMNonce)
	}
	if d := c.FailureDelay; d != nil && (*d < 0 || *d > 10*time.Second) {
		bad("failure_delay: %s: use a duration from 0s to 10s", *d)
	}
	return errors.Join(errs...)
}

// Built is what the proxy needs of a `sasl:` block.
type Built struct {
	Mechanisms         []sasl.Mechanism
	MaxSessionLifetime time.Duration
	FailureDelay       time.Duration
	FailureBudget      int
	// Store is the credential store, when PLAIN or SCRAM is offered.
	Store *credstore.Store
}

// Build opens the credential store and the token validator and makes the
// mechanisms, in the order the config lists them.
func (c *Config) Build(log *slog.Logger) (*Built, error) {
	b := &Built{MaxSessionLifetime: DefaultMaxSessionLifetime, FailureDelay: DefaultFailureDelay, FailureBudget: DefaultFailureBudget}
	if c.FailureBudget != nil {
		b.FailureBudget = *c.FailureBudget
	}
	if c.MaxSessionLifetime != nil {
		b.MaxSessionLifetime = *c.MaxSessionLifetime
	}
	if c.FailureDelay != nil {
		b.FailureDelay = *c.FailureDelay
	}
	if c.Credentials != "" {
		st, err := credstore.Open(c.Credentials, credstore.Options{Logger: log})
		if err != nil {
			return nil, fmt.Errorf("credentials: %w", err)
		}
		b.Store = st
	}
	var validator *oauth.Validator
	if c.OAuthBearer != nil {
		v, err := oauth.New(*c.OAuthBearer, oauth.Options{Logger: log})
		if err != nil {
			return nil, fmt.Errorf("oauthbearer: %w", err)
		}
		validator = v
	}
	for _, m := range c.Mechanisms {
		switch m {
		case "PLAIN":
			b.Mechanisms = append(b.Mechanisms, sasl.NewPlain(b.Store))
		case credstore.SCRAMSHA256:
			s := sasl.NewSCRAMSHA256(b.Store)
			s.StrictNonce = c.SCRAMNonce == "strict"
			b.Mechanisms = append(b.Mechanisms, s)
		case credstore.SCRAMSHA512:
			s := sasl.NewSCRAMSHA512(b.Store)
			s.StrictNonce = c.SCRAMNonce == "strict"
			b.Mechanisms = append(b.Mechanisms, s)
		case "OAUTHBEARER":
			b.Mechanisms = append(b.Mechanisms, sasl.NewOAuthBearer(validator, sasl.OAuthBearerOptions{Scope: c.OAuthBearer.RequiredScope}))
		}
	}
	return b, nil
}
