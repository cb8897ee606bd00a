package schema

import "errors"

// The outcomes a lookup or validation can fail with. Errors returned by
// this package match at most one of them with errors.Is, so a caller can map
// each to its own answer: refuse the record, or ask the producer to retry.
// (ErrNoPrefix and ErrMalformedIndexes are details of ErrInvalidRecord. A
// registry that refuses a request as malformed, HTTP 400 or 422, matches
// none.)
var (
	// ErrNotFound: the source says the schema, subject or version does not
	// exist (registry error codes 40401, 40402, 40403, 40404, 40406).
	ErrNotFound = errors.New("not found")
	// ErrUnavailable: the source could not answer — the registry is
	// unreachable, timed out, failed (5xx), refused our credentials, or
	// answered something unreadable. Retrying later may succeed.
	ErrUnavailable = errors.New("schema registry unavailable")
	// ErrInvalidSchema: the schema exists but cannot be used: it does not
	// compile, has an unknown type, or a reference cannot be resolved.
	ErrInvalidSchema = errors.New("invalid schema")
	// ErrNotAllowed: the payload's schema is not one the rule allows (not
	// registered under the rule's subject, not in its id list, or of a
	// format it does not accept).
	ErrNotAllowed = errors.New("schema not allowed")
	// ErrInvalidRecord: the payload does not match its schema (or is not
	// JSON where JSON is required).
	ErrInvalidRecord = errors.New("record does not match its schema")
)

// Error is an error of this package: one of the kinds above, a message,
// and the underlying cause if any.
type Error struct {
	// Kind is ErrNotFound, ErrUnavailable, ErrInvalidSchema, ErrNotAllowed
	// or ErrInvalidRecord.
	Kind error
	// Msg says what failed; empty when Err says it all.
	Msg string
	// Err is the cause, or nil.
	Err error
}

func (e *Error) Error() string {
	switch {
	case e.Msg == "":
		return e.Err.Error()
	case e.Err == nil:
		return e.Msg
	}
	return e.Msg + ": " + e.Err.Error()
}

// Is matches the error's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

func (e *Error) Unwrap() error { return e.Err }

func newError(kind error, msg string, cause error) *Error {
	return &Error{Kind: kind, Msg: msg, Err: cause}
}
