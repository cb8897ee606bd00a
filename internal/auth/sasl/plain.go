package sasl

import (
	"bytes"
	"context"
	"fmt"
	"unicode/utf8"
)

// Bounds of a PLAIN message (RFC 4616): servers must accept identities of up to 255 octets; passwords are
// allowed up to 1 KiB (credstore's bound), so that the message, and the work to check it, stay small.
const (
	maxPlainIdentity = 255
	maxPlainPassword = 1024
	maxPlainMessage  = 2*maxPlainIdentity + maxPlainPassword + 2
)

// Plain is the SASL PLAIN mechanism (RFC 4616): the client sends its name and password in one message, and
// the gateway checks them against Credentials. It sends the password in the clear: offer it on TLS
// listeners only.
type Plain struct {
	creds Credentials
}

// NewPlain returns the PLAIN mechanism over creds.
func NewPlain(creds Credentials) *Plain { return &Plain{creds: creds} }

// Name is "PLAIN".
func (*Plain) Name() string { return "PLAIN" }

// Start begins one PLAIN authentication.
func (p *Plain) Start(context.Context, string) Exchange { return &plainExchange{creds: p.creds} }

// plainExchange is one PLAIN authentication: one client message, no answer.
type plainExchange struct {
	creds  Credentials
	done   bool
	result Result
}

// Next takes the client's one message, authzid NUL authcid NUL passwd, and ends the exchange. The
// authorization identity must be empty or the authentication identity: the gateway acts for no one else.
func (e *plainExchange) Next(msg []byte) ([]byte, bool, error) {
	if e.done {
		return nil, true, fmt.Errorf("%w: PLAIN: a message after the exchange ended", ErrMalformed)
	}
	e.done = true
	authzid, authcid, passwd, err := parsePlain(msg)
	if err != nil {
		return nil, true, err
	}
	// The password is checked first whatever the authzid, so that every failure costs the same.
	ok := e.creds.VerifyPlain(authcid, passwd)
	if !ok || (authzid != "" && authzid != authcid) {
		return nil, true, ErrAuthFailed
	}
	e.result = Result{Principal: authcid}
	return []byte{}, true, nil // an empty answer, as Kafka sends
}

func (e *plainExchange) Result() Result { return e.result }

// parsePlain splits a PLAIN message into its three fields, checking their sizes and encoding.
func parsePlain(msg []byte) (authzid, authcid, passwd string, err error) {
	if len(msg) > maxPlainMessage {
		return "", "", "", fmt.Errorf("%w: PLAIN message of %d bytes, at most %d", ErrMalformed, len(msg), maxPlainMessage)
	}
	fields := bytes.Split(msg, []byte{0})
	switch {
	case len(fields) != 3:
		return "", "", "", fmt.Errorf("%w: a PLAIN message is authzid NUL authcid NUL password; this one has %d fields", ErrMalformed, len(fields))
	case len(fields[1]) == 0 || len(fields[2]) == 0:
		return "", "", "", fmt.Errorf("%w: PLAIN message without a user name or password", ErrMalformed)
	case len(fields[0]) > maxPlainIdentity || len(fields[1]) > maxPlainIdentity:
		return "", "", "", fmt.Errorf("%w: PLAIN identity longer than %d bytes", ErrMalformed, maxPlainIdentity)
	case len(fields[2]) > maxPlainPassword:
		return "", "", "", fmt.Errorf("%w: PLAIN password longer than %d bytes", ErrMalformed, maxPlainPassword)
	case !utf8.Valid(fields[0]) || !utf8.Valid(fields[1]) || !utf8.Valid(fields[2]):
		return "", "", "", fmt.Errorf("%w: PLAIN message is not UTF-8", ErrMalformed)
	}
	return string(fields[0]), string(fields[1]), string(fields[2]), nil
}

var _ Mechanism = (*Plain)(nil)
