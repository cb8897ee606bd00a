// Package certprincipal turns a TLS client certificate into a principal, by
// rules in the style of Kafka's ssl.principal.mapping.rules: each rule is a
// regular expression over the certificate's subject (RFC 2253 form, as
// "CN=alice,OU=eng,O=Acme") and a replacement, optionally lower- or
// upper-cased; the first rule that matches gives the principal, and
// DEFAULT gives the whole subject. A virtual cluster that uses mTLS instead
// of SASL names its clients this way.
//
// It imports nothing of ours.
package certprincipal

import (
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Source is what the rules read from a certificate.
type Source string

const (
	// Subject: the subject's distinguished name, RFC 2253 form.
	Subject Source = "subject"
	// SANDNS, SANEmail, SANURI: the first subject alternative name of that
	// kind.
	SANDNS   Source = "san_dns"
	SANEmail Source = "san_email"
	SANURI   Source = "san_uri"
)

// Mapper maps certificates to principals. It is immutable and safe for
// concurrent use.
type Mapper struct {
	source Source
	rules  []rule
}

type rule struct {
	def     bool // DEFAULT: the source as it is
	re      *regexp.Regexp
	replace string
	lower   bool
	upper   bool
}

// ErrNoMatch is a certificate no rule maps: the connection has no
// principal, and is refused.
var ErrNoMatch = errors.New("no principal mapping rule matches the client certificate")

// New parses rules, Kafka's syntax: a comma-separated list of
// `RULE:pattern/replacement/` (with an optional `L` or `U` after the last
// slash) and `DEFAULT`. An empty list is DEFAULT alone. source says what
// they read; "" is Subject.
func New(source Source, rules string) (*Mapper, error) {
	switch source {
	case "":
		source = Subject
	case Subject, SANDNS, SANEmail, SANURI:
	default:
		return nil, fmt.Errorf("principal source %q: use subject, san_dns, san_email or san_uri", source)
	}
	m := &Mapper{source: source}
	rest := strings.TrimSpace(rules)
	if rest == "" {
		rest = "DEFAULT"
	}
	for rest != "" {
		switch {
		case strings.HasPrefix(rest, "DEFAULT"):
			m.rules = append(m.rules, rule{def: true})
			rest = rest[len("DEFAULT"):]
		case strings.HasPrefix(rest, "RULE:"):
			r, after, err := parseRule(rest[len("RULE:"):])
			if err != nil {
				return nil, err
			}
			m.rules = append(m.rules, r)
			rest = after
		default:
			return nil, fmt.Errorf("principal mapping rules: %q: each rule is RULE:pattern/replacement/[LU] or DEFAULT, separated by commas", rest)
		}
		rest = strings.TrimSpace(rest)
		if rest != "" {
			if rest[0] != ',' {
				return nil, fmt.Errorf("principal mapping rules: expected ',' before %q", rest)
			}
			rest = strings.TrimSpace(rest[1:])
			if rest == "" {
				return nil, errors.New("principal mapping rules: ends with ','")
			}
		}
	}
	return m, nil
}

// parseRule reads `pattern/replacement/[LU]` and returns what follows it.
func parseRule(s string) (rule, string, error) {
	var r rule
	pat, rest, ok := cutUnescaped(s, '/')
	if !ok {
		return r, "", fmt.Errorf("principal mapping rule %q: want RULE:pattern/replacement/", s)
	}
	repl, rest, ok := cutUnescaped(rest, '/')
	if !ok {
		return r, "", fmt.Errorf("principal mapping rule %q: the replacement has no closing '/'", s)
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return r, "", fmt.Errorf("principal mapping rule pattern %q: %w", pat, err)
	}
	r.re, r.replace = re, repl
	switch {
	case strings.HasPrefix(rest, "L"):
		r.lower, rest = true, rest[1:]
	case strings.HasPrefix(rest, "U"):
		r.upper, rest = true, rest[1:]
	}
	return r, rest, nil
}

// cutUnescaped cuts s at the first sep not preceded by a backslash.
func cutUnescaped(s string, sep byte) (before, after string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			continue
		}
		if s[i] == sep {
			return strings.ReplaceAll(s[:i], `\/`, "/"), s[i+1:], true
		}
	}
	return "", "", false
}

// Principal maps a client certificate to a principal.
func (m *Mapper) Principal(cert *x509.Certificate) (string, error) {
	in, err := m.read(cert)
	if err != nil {
		return "", err
	}
	for _, r := range m.rules {
		if r.def {
			return in, nil
		}
		idx := r.re.FindStringSubmatchIndex(in)
		if idx == nil || idx[0] != 0 || idx[1] != len(in) {
			continue // Kafka's rules match the whole name
		}
		out := string(r.re.ExpandString(nil, r.replace, in, idx))
		switch {
		case r.lower:
			out = strings.ToLower(out)
		case r.upper:
			out = strings.ToUpper(out)
		}
		if out == "" {
			continue
		}
		return out, nil
	}
	return "", ErrNoMatch
}

func (m *Mapper) read(cert *x509.Certificate) (string, error) {
	switch m.source {
	case SANDNS:
		if len(cert.DNSNames) > 0 {
			return cert.DNSNames[0], nil
		}
	case SANEmail:
		if len(cert.EmailAddresses) > 0 {
			return cert.EmailAddresses[0], nil
		}
	case SANURI:
		if len(cert.URIs) > 0 {
			return cert.URIs[0].String(), nil
		}
	default:
		return cert.Subject.String(), nil
	}
	return "", fmt.Errorf("%w: the certificate has no %s", ErrNoMatch, m.source)
}
