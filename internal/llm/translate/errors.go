package translate

import (
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/straitgw/strait/internal/llm/jsonscan"
)

// Error is a failure in a dialect-neutral form.
type Error struct {
	// Status is the HTTP status to send.
	Status int
	// Kind is the neutral kind: "invalid_request", "authentication",
	// "permission", "billing", "not_found", "request_too_large",
	// "rate_limit", "api_error", "overloaded", "timeout".
	Kind string
	// Message says what went wrong; for a provider's error it is the
	// provider's own message.
	Message string
	// Param is the OpenAI param the error is about, optional.
	Param string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.kind())
	b.WriteString(" (HTTP ")
	b.WriteString(itoa(e.status()))
	b.WriteString(")")
	if e.Param != "" {
		b.WriteString(" in ")
		b.WriteString(e.Param)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	return b.String()
}

// Neutral error kinds.
const (
	KindInvalidRequest  = "invalid_request"
	KindAuthentication  = "authentication"
	KindPermission      = "permission"
	KindBilling         = "billing"
	KindNotFound        = "not_found"
	KindRequestTooLarge = "request_too_large"
	KindRateLimit       = "rate_limit"
	KindAPIError        = "api_error"
	KindOverloaded      = "overloaded"
	KindTimeout         = "timeout"
)

// kindStatus is the HTTP status of each kind, as Anthropic sends it.
var kindStatus = map[string]int{
	KindInvalidRequest:  400,
	KindAuthentication:  401,
	KindBilling:         402,
	KindPermission:      403,
	KindNotFound:        404,
	KindRequestTooLarge: 413,
	KindRateLimit:       429,
	KindAPIError:        500,
	KindOverloaded:      529,
	KindTimeout:         504,
}

// statusKind derives a kind from an HTTP status.
func statusKind(status int) string {
	switch status {
	case 400, 409, 422:
		return KindInvalidRequest
	case 401:
		return KindAuthentication
	case 402:
		return KindBilling
	case 403:
		return KindPermission
	case 404:
		return KindNotFound
	case 413:
		return KindRequestTooLarge
	case 429:
		return KindRateLimit
	case 408, 504:
		return KindTimeout
	case 503, 529:
		return KindOverloaded
	}
	if status >= 400 && status < 500 {
		return KindInvalidRequest
	}
	return KindAPIError
}

func (e *Error) kind() string {
	if _, ok := kindStatus[e.Kind]; ok {
		return e.Kind
	}
	return statusKind(e.Status)
}

func (e *Error) status() int {
	if e.Status >= 400 && e.Status <= 599 {
		return e.Status
	}
	return kindStatus[e.kind()]
}

// Anthropic error types by kind, and back.
var anthropicType = map[string]string{
	KindInvalidRequest:  "invalid_request_error",
	KindAuthentication:  "authentication_error",
	KindPermission:      "permission_error",
	KindBilling:         "billing_error",
	KindNotFound:        "not_found_error",
	KindRequestTooLarge: "request_too_large",
	KindRateLimit:       "rate_limit_error",
	KindAPIError:        "api_error",
	KindOverloaded:      "overloaded_error",
	KindTimeout:         "timeout_error",
}

// OpenAI error types by kind. OpenAI's own types are few (invalid_request_error,
// server_error, insufficient_quota…) and clients branch on the HTTP status, so
// the type names the kind in OpenAI's spelling.
var openAIType = map[string]string{
	KindInvalidRequest:  "invalid_request_error",
	KindAuthentication:  "authentication_error",
	KindPermission:      "permission_error",
	KindBilling:         "insufficient_quota",
	KindNotFound:        "not_found_error",
	KindRequestTooLarge: "invalid_request_error",
	KindRateLimit:       "rate_limit_error",
	KindAPIError:        "server_error",
	KindOverloaded:      "server_error",
	KindTimeout:         "timeout_error",
}

// openAICode is the error code OpenAI uses for the kinds that have a
// well-known one.
var openAICode = map[string]string{
	KindAuthentication: "invalid_api_key",
	KindRateLimit:      "rate_limit_exceeded",
	KindBilling:        "insufficient_quota",
}

// ErrorBody renders e as dialect d's error JSON (OpenAI
// {"error":{message,type,param,code}}; Anthropic
// {"type":"error","error":{"type","message"}}) and returns the status to use
// for that dialect: OpenAI clients do not know 529, so it becomes 503.
func ErrorBody(d Dialect, e *Error) (status int, body []byte) {
	status = e.status()
	kind := e.kind()
	if d == OpenAI {
		if status == 529 {
			status = http.StatusServiceUnavailable
		}
		return status, appendOpenAIError(nil, e, kind)
	}
	return status, appendAnthropicError(nil, e, kind)
}

func appendOpenAIError(b []byte, e *Error, kind string) []byte {
	b = append(b, `{"error":{"message":`...)
	b = jsonscan.AppendString(b, e.Message)
	b = append(b, `,"type":`...)
	b = jsonscan.AppendString(b, openAIType[kind])
	b = append(b, `,"param":`...)
	b = appendStringOrNull(b, e.Param)
	b = append(b, `,"code":`...)
	b = appendStringOrNull(b, openAICode[kind])
	return append(b, "}}"...)
}

func appendAnthropicError(b []byte, e *Error, kind string) []byte {
	b = append(b, `{"type":"error","error":{"type":`...)
	b = jsonscan.AppendString(b, anthropicType[kind])
	b = append(b, `,"message":`...)
	b = jsonscan.AppendString(b, e.Message)
	return append(b, "}}"...)
}

// maxErrorText bounds the message taken from an error body that is not the
// dialect's error JSON (an HTML page from a load balancer, say).
const maxErrorText = 512

// ParseError reads a provider's error response (status and body of dialect
// d) into an *Error, keeping the provider's message. A body that is not the
// dialect's error JSON still gives a useful Error: the kind from the status,
// the message the trimmed body text (bounded), or the status text.
func ParseError(d Dialect, status int, body []byte) *Error {
	e := &Error{Status: status}
	if status < 400 || status > 599 {
		// A provider that reports an error with a success (or nonsense)
		// status is itself failing.
		e.Status = http.StatusBadGateway
	}
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	isJSON := unmarshal(body, &env) == nil
	if isJSON {
		var inner struct {
			Type    string          `json:"type"`
			Message string          `json:"message"`
			Param   json.RawMessage `json:"param"`
			Code    json.RawMessage `json:"code"`
		}
		var text string
		switch {
		case len(env.Error) > 0 && env.Error[0] == '{' && unmarshal(env.Error, &inner) == nil:
			e.Message = inner.Message
			e.Kind = typeKind(d, inner.Type)
			var p string
			if unmarshal(inner.Param, &p) == nil {
				e.Param = p
			}
		case len(env.Error) > 0 && unmarshal(env.Error, &text) == nil:
			e.Message = text // {"error":"..."}, as some servers send
		default:
			e.Message = env.Message
		}
	}
	if e.Message == "" && !isJSON {
		e.Message = bodyText(body)
	}
	if e.Message == "" {
		e.Message = http.StatusText(e.Status)
	}
	if e.Message == "" {
		e.Message = "provider error"
	}
	if e.Kind == "" {
		e.Kind = statusKind(e.Status)
	}
	return e
}

// typeKind maps a provider's error type to a kind, "" if unknown.
func typeKind(d Dialect, typ string) string {
	if d == Anthropic {
		for k, t := range anthropicType {
			if t == typ {
				return k
			}
		}
		return ""
	}
	switch typ {
	case "insufficient_quota":
		return KindBilling
	}
	return "" // OpenAI's types are too coarse: the status decides
}

// bodyText is the start of a non-JSON body as a one-line message.
func bodyText(body []byte) string {
	s := strings.Join(strings.Fields(string(body[:min(len(body), 4*maxErrorText)])), " ")
	if len(s) <= maxErrorText {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "\uFFFD") + "…"
}

// badRequest is the error for a request that cannot be translated.
func badRequest(param, format string, args ...any) *Error {
	return &Error{Status: 400, Kind: KindInvalidRequest, Param: param, Message: sprintf(format, args...)}
}
