package devregistry

import (
	"fmt"
	"net/http"
)

// apiError is an answer in the registry's error format: an HTTP status, the
// error_code clients switch on, and a message for people.
type apiError struct {
	status int
	code   int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

// The error codes of Confluent's Schema Registry REST API that this registry
// answers with. Clients depend on the codes, not on the messages.
const (
	codeSubjectNotFound            = 40401
	codeVersionNotFound            = 40402
	codeSchemaNotFound             = 40403
	codeSubjectSoftDeleted         = 40404
	codeSubjectNotSoftDeleted      = 40405
	codeVersionSoftDeleted         = 40406
	codeVersionNotSoftDeleted      = 40407
	codeSubjectCompatNotConfigured = 40408
	codeSubjectModeNotConfigured   = 40409
	// codeIncompatibleSchema is the value Confluent documented for years
	// and franz-go's sr client maps to ErrIncompatibleSchema; the newest
	// Confluent releases send 40901 with the same HTTP status.
	codeIncompatibleSchema        = 409
	codeInvalidSchema             = 42201
	codeInvalidVersion            = 42202
	codeInvalidCompatibilityLevel = 42203
	codeInvalidMode               = 42204
	codeOperationNotPermitted     = 42205
	codeReferenceExists           = 42206
	codeInvalidSubject            = 42208
	codeStoreError                = 50001

	// Errors the HTTP layer finds before a request reaches the registry
	// carry their HTTP status as the code, as Confluent's registry does.
	codeBadRequest            = 400
	codeNotFound              = 404
	codeMethodNotAllowed      = 405
	codeRequestEntityTooLarge = 413
	codeUnsupportedMediaType  = 415
	codeUnprocessableEntity   = 422
	codeInternalServerError   = 500
)

func errSubjectNotFound(subject string) *apiError {
	return &apiError{http.StatusNotFound, codeSubjectNotFound, fmt.Sprintf("subject %q not found", subject)}
}

func errVersionNotFound(v int) *apiError {
	return &apiError{http.StatusNotFound, codeVersionNotFound, fmt.Sprintf("version %d not found", v)}
}

func errLatestNotFound(subject string) *apiError {
	return &apiError{http.StatusNotFound, codeVersionNotFound, fmt.Sprintf("subject %q has no version left", subject)}
}

func errSchemaNotFound(what string) *apiError {
	return &apiError{http.StatusNotFound, codeSchemaNotFound, "schema " + what + " not found"}
}

func errInvalidSchema(format string, args ...any) *apiError {
	return &apiError{http.StatusUnprocessableEntity, codeInvalidSchema, "invalid schema: " + fmt.Sprintf(format, args...)}
}

func errInvalidVersion(v string) *apiError {
	return &apiError{http.StatusUnprocessableEntity, codeInvalidVersion,
		fmt.Sprintf(`the specified version %q is not a valid version id; allowed values are between [1, 2^31-1] and the string "latest"`, v)}
}

func errInvalidCompatibility(level string) *apiError {
	return &apiError{http.StatusUnprocessableEntity, codeInvalidCompatibilityLevel,
		fmt.Sprintf("invalid compatibility level %q; valid values are NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL and FULL_TRANSITIVE", level)}
}

func errInvalidSubject(subject string) *apiError {
	return &apiError{http.StatusUnprocessableEntity, codeInvalidSubject,
		fmt.Sprintf("invalid subject %q: a subject is 1 to %d bytes of UTF-8 without control characters", subject, maxSubjectBytes)}
}

func errReferenced(subject string, v int, ids []int) *apiError {
	return &apiError{http.StatusUnprocessableEntity, codeReferenceExists,
		fmt.Sprintf("version %d of subject %q is referenced by the schemas with ids %v; delete those first", v, subject, ids)}
}

func errBadRequest(msg string) *apiError {
	return &apiError{http.StatusBadRequest, codeBadRequest, msg}
}

func errUnprocessable(msg string) *apiError {
	return &apiError{http.StatusUnprocessableEntity, codeUnprocessableEntity, msg}
}

func errStore(err error) *apiError {
	return &apiError{http.StatusInternalServerError, codeStoreError, "error in the backend data store: " + err.Error()}
}
