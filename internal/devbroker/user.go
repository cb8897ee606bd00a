package devbroker

import (
	"fmt"
	"strings"
)

// SASL mechanisms the cluster accepts.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

var mechanisms = []string{MechanismPlain, MechanismScramSHA256, MechanismScramSHA512}

// User is a SASL user. Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512;
// empty means the user may log in with any of the three.
type User struct{ Mechanism, Name, Password string }

// ParseUser parses the value of a --user flag: "MECHANISM:name:password", or
// "name:password" for a user of all three mechanisms (Mechanism ""). The
// mechanism is case-insensitive, the name cannot contain ':', and the
// password is everything after the name's colon, colons included.
func ParseUser(s string) (User, error) {
	first, rest, ok := strings.Cut(s, ":")
	if !ok {
		return User{}, fmt.Errorf("devbroker: user %q: want MECHANISM:name:password or name:password", redact(s))
	}
	var u User
	if mech, isMech := canonicalMechanism(first); isMech {
		name, password, ok := strings.Cut(rest, ":")
		if !ok {
			return User{}, fmt.Errorf("devbroker: user %q: want %s:name:password", redact(s), mech)
		}
		u = User{Mechanism: mech, Name: name, Password: password}
	} else {
		u = User{Name: first, Password: rest}
	}
	if err := u.validate(); err != nil {
		return User{}, err
	}
	return u, nil
}

// String returns the user in ParseUser's format with the password hidden.
func (u User) String() string {
	if u.Mechanism == "" {
		return u.Name + ":***"
	}
	return u.Mechanism + ":" + u.Name + ":***"
}

func (u User) validate() error {
	if u.Mechanism != "" {
		if _, ok := canonicalMechanism(u.Mechanism); !ok {
			return fmt.Errorf("devbroker: user %q: unknown SASL mechanism %q (want one of %s)", u.Name, u.Mechanism, strings.Join(mechanisms, ", "))
		}
	}
	if u.Name == "" {
		return fmt.Errorf("devbroker: user %s: empty name", u)
	}
	if strings.Contains(u.Name, ":") {
		return fmt.Errorf("devbroker: user %q: name cannot contain ':'", u.Name)
	}
	if u.Password == "" {
		return fmt.Errorf("devbroker: user %q: empty password", u.Name)
	}
	return nil
}

// expandUsers validates users and turns each mechanism-less user into one
// user per mechanism, with canonical mechanism names.
func expandUsers(users []User) ([]User, error) {
	var out []User
	for _, u := range users {
		if err := u.validate(); err != nil {
			return nil, err
		}
		if u.Mechanism == "" {
			for _, m := range mechanisms {
				out = append(out, User{Mechanism: m, Name: u.Name, Password: u.Password})
			}
			continue
		}
		u.Mechanism, _ = canonicalMechanism(u.Mechanism)
		out = append(out, u)
	}
	return out, nil
}

func canonicalMechanism(s string) (string, bool) {
	for _, m := range mechanisms {
		if strings.EqualFold(s, m) {
			return m, true
		}
	}
	return "", false
}

// redact keeps a malformed flag's password out of error messages: everything
// after the last colon could be one.
func redact(s string) string {
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		return s[:i+1] + "***"
	}
	return "***"
}
