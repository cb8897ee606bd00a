package sasl

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/xdg-go/scram"
)

// maxSCRAMMessage bounds a SCRAM client message: a 255-byte name escaped (at most 765 bytes), a nonce and a
// proof take far less. It is checked before a message is parsed.
const maxSCRAMMessage = 4096

// Steps of a SCRAM exchange.
const (
	scramClientFirst = iota // waiting for client-first-message
	scramClientFinal        // server-first-message sent; waiting for client-final-message
	scramDone
)

// SCRAM is a SCRAM mechanism (RFC 5802, RFC 7677): SCRAM-SHA-256 or SCRAM-SHA-512, the server side, with
// users from Credentials. Two rounds: client-first → server-first, client-final → server-final; the
// exchange ends with server-final. No channel binding: Kafka clients never use it, so a client that asks
// for it ('p=') is refused.
//
// An unknown user is challenged with phantom credentials (Credentials.Lookup) and fails at client-final as
// a wrong password does: the same error after the same rounds.
type SCRAM struct {
	name  string
	hash  scram.HashGeneratorFcn
	creds Credentials
	// StrictNonce refuses the client-final nonce of librdkafka before
	// 2.6.1 (see legacyFinal); by default it is accepted.
	StrictNonce bool
}

// NewSCRAMSHA256 returns the SCRAM-SHA-256 mechanism over creds.
func NewSCRAMSHA256(creds Credentials) *SCRAM {
	return &SCRAM{name: "SCRAM-SHA-256", hash: scram.SHA256, creds: creds}
}

// NewSCRAMSHA512 returns the SCRAM-SHA-512 mechanism over creds.
func NewSCRAMSHA512(creds Credentials) *SCRAM {
	return &SCRAM{name: "SCRAM-SHA-512", hash: scram.SHA512, creds: creds}
}

// Name is "SCRAM-SHA-256" or "SCRAM-SHA-512".
func (m *SCRAM) Name() string { return m.name }

// Start begins one SCRAM authentication.
func (m *SCRAM) Start(context.Context, string) Exchange { return &scramExchange{m: m} }

// scramExchange is one SCRAM authentication.
type scramExchange struct {
	m      *SCRAM
	step   int
	conv   *scram.ServerConversation
	found  bool // the user has credentials: false while the exchange runs on phantom ones
	result Result
	// For legacyFinal: client-first-message, server-first-message and
	// the user's keys (phantom ones for an unknown user).
	clientFirstMsg, serverFirstMsg string
	storedKey, serverKey           []byte
}

func (e *scramExchange) Next(msg []byte) ([]byte, bool, error) {
	switch e.step {
	case scramClientFirst:
		return e.clientFirst(msg)
	case scramClientFinal:
		return e.clientFinal(msg)
	}
	return nil, true, fmt.Errorf("%w: %s: a message after the exchange ended", ErrMalformed, e.m.name)
}

func (e *scramExchange) Result() Result { return e.result }

// clientFirst reads client-first-message (gs2-header, user name, client nonce) and answers with
// server-first-message: the nonce, and the user's salt and iteration count, or phantom ones.
func (e *scramExchange) clientFirst(msg []byte) ([]byte, bool, error) {
	e.step = scramDone
	if err := e.check(msg, "client-first-message"); err != nil {
		return nil, true, err
	}
	switch {
	case bytes.HasPrefix(msg, []byte("p=")):
		return nil, true, fmt.Errorf("%w: %s: channel binding ('p=') is not offered; send 'n' as Kafka clients do", ErrMalformed, e.m.name)
	case asksForTokenAuth(msg):
		return nil, true, fmt.Errorf("%w: %s: delegation tokens (tokenauth=true) are not accepted", ErrMalformed, e.m.name)
	}
	server, err := e.m.hash.NewServer(e.lookup)
	if err != nil {
		return nil, true, fmt.Errorf("%w: %s: %v", ErrUnavailable, e.m.name, err) // never: NewServer has no failure
	}
	e.conv = server.NewConversation()
	out, err := e.conv.Step(string(msg))
	if err != nil {
		why := "it does not follow RFC 5802 §7"
		if strings.HasPrefix(out, "e=") { // one of the library's fixed reasons, such as e=invalid-username-encoding
			why = out
		}
		return nil, true, fmt.Errorf("%w: %s client-first-message: %s", ErrMalformed, e.m.name, why)
	}
	// As Kafka: the authorization identity, if any, must be the user's own. It is checked after the lookup
	// (which the library does while reading the message), for a known and an unknown user alike.
	if authz := e.conv.AuthzID(); authz != "" && authz != e.conv.Username() {
		return nil, true, ErrAuthFailed
	}
	e.step = scramClientFinal
	e.clientFirstMsg, e.serverFirstMsg = string(msg), out
	return []byte(out), false, nil
}

// clientFinal reads client-final-message (channel binding, nonce, proof) and, if the proof verifies
// against the user's StoredKey, answers with server-final-message, the server's signature.
func (e *scramExchange) clientFinal(msg []byte) ([]byte, bool, error) {
	e.step = scramDone
	if err := e.check(msg, "client-final-message"); err != nil {
		return nil, true, err
	}
	if !e.m.StrictNonce {
		if out, ok, legacy := e.legacyFinal(string(msg)); legacy {
			if !ok || !e.found {
				return nil, true, ErrAuthFailed
			}
			e.result = Result{Principal: e.conv.Username(), LegacySCRAMNonce: true}
			return []byte(out), true, nil
		}
	}
	out, err := e.conv.Step(string(msg))
	// Every failure here, a proof that does not verify, a changed nonce or gs2-header, an unreadable
	// message, is the one error: none of them may say more than "wrong password" about the user.
	if err != nil || !e.conv.Valid() || !e.found {
		return nil, true, ErrAuthFailed
	}
	e.result = Result{Principal: e.conv.Username()}
	return []byte(out), true, nil
}

// lookup is the library's CredentialLookup: the user's credentials, or phantom ones.
func (e *scramExchange) lookup(user string) (scram.StoredCredentials, error) {
	c, found := e.m.creds.Lookup(user, e.m.name)
	e.found = found
	e.storedKey, e.serverKey = c.StoredKey, c.ServerKey
	return scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations},
		StoredKey:  c.StoredKey,
		ServerKey:  c.ServerKey,
	}, nil
}

// check bounds a client message before it is parsed: RFC 5802 messages are short UTF-8 text without NUL.
func (e *scramExchange) check(msg []byte, what string) error {
	switch {
	case len(msg) == 0:
		return fmt.Errorf("%w: %s %s is empty", ErrMalformed, e.m.name, what)
	case len(msg) > maxSCRAMMessage:
		return fmt.Errorf("%w: %s %s of %d bytes, at most %d", ErrMalformed, e.m.name, what, len(msg), maxSCRAMMessage)
	case !utf8.Valid(msg) || bytes.IndexByte(msg, 0) >= 0:
		return fmt.Errorf("%w: %s %s is not UTF-8 text without NUL", ErrMalformed, e.m.name, what)
	}
	return nil
}

// asksForTokenAuth reports whether client-first-message carries Kafka's tokenauth=true extension (KIP-48):
// the name and password are then a delegation token's, which the gateway does not issue.
func asksForTokenAuth(msg []byte) bool {
	fields := bytes.Split(msg, []byte(","))
	if len(fields) <= 4 {
		return false // gs2-cbind-flag, authzid, n=, r=: no extensions
	}
	for _, f := range fields[4:] {
		if v, ok := bytes.CutPrefix(f, []byte("tokenauth=")); ok && strings.EqualFold(string(v), "true") {
			return true
		}
	}
	return false
}

var _ Mechanism = (*SCRAM)(nil)

// legacyFinal verifies a client-final-message whose nonce is the one
// librdkafka before 2.6.1 sends (confluentinc/librdkafka#4895): its own
// nonce again, followed by the nonce the server sent (which begins with
// the client's), where RFC 5802 asks for the server's nonce alone. legacy
// reports whether msg has that form; ok whether its proof verifies, and
// out is then server-final-message.
//
// Accepting it costs no security: the proof is computed over the whole
// exchange (client-first, server-first with the server's fresh nonce, and
// this message as sent), so it still cannot be replayed into another
// exchange. Kafka before 3.8.1 accepted any nonce here, 3.8.1 to 3.9 any
// that ends with the server's; Kafka 4 refuses this form, and with it
// every librdkafka client older than 2.6.1.
func (e *scramExchange) legacyFinal(msg string) (out string, ok, legacy bool) {
	bare, proof, found := strings.Cut(msg, ",p=")
	if !found || strings.Contains(proof, ",") {
		return "", false, false
	}
	c, rest, _ := strings.Cut(bare, ",")
	r, _, _ := strings.Cut(rest, ",")
	serverNonce := attr(e.serverFirstMsg, "r=")
	gs2, clientBare := gs2Split(e.clientFirstMsg)
	clientNonce := attr(clientBare, "r=")
	if clientNonce == "" || serverNonce == "" || r != "r="+clientNonce+serverNonce {
		return "", false, false
	}
	if c != "c="+base64.StdEncoding.EncodeToString([]byte(gs2)) {
		return "", false, true
	}
	p, err := base64.StdEncoding.DecodeString(proof)
	h := e.m.hash()
	if err != nil || len(p) != h.Size() || len(e.storedKey) != h.Size() {
		return "", false, true
	}
	authMessage := []byte(clientBare + "," + e.serverFirstMsg + "," + bare)
	mac := func(key []byte) []byte {
		m := hmac.New(e.m.hash, key)
		m.Write(authMessage)
		return m.Sum(nil)
	}
	clientKey := mac(e.storedKey)
	for i := range clientKey {
		clientKey[i] ^= p[i]
	}
	h.Write(clientKey)
	if subtle.ConstantTimeCompare(h.Sum(nil), e.storedKey) != 1 {
		return "", false, true
	}
	return "v=" + base64.StdEncoding.EncodeToString(mac(e.serverKey)), true, true
}

// gs2Split splits client-first-message into its gs2-header (with its
// trailing comma) and client-first-message-bare.
func gs2Split(msg string) (gs2, bare string) {
	i := strings.Index(msg, ",")
	if i < 0 {
		return "", msg
	}
	j := strings.Index(msg[i+1:], ",")
	if j < 0 {
		return "", msg
	}
	return msg[:i+1+j+1], msg[i+1+j+1:]
}

// attr returns the value of the first attribute with prefix (such as
// "r=") in a comma-separated SCRAM message.
func attr(msg, prefix string) string {
	for f := range strings.SplitSeq(msg, ",") {
		if v, ok := strings.CutPrefix(f, prefix); ok {
			return v
		}
	}
	return ""
}
