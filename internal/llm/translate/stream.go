package translate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"

	"github.com/straitgw/strait/internal/llm/jsonscan"
	"github.com/straitgw/strait/internal/llm/sse"
)

// Stream translates a provider's event stream into the client dialect, one
// provider event at a time. It writes client events as soon as they can be
// produced, buffering only what the rules require (the OpenAI finish_reason
// is held until the usage chunk that follows it, so that Anthropic's
// message_delta carries both). A Stream is not safe for concurrent use.
type Stream interface {
	// Event handles one provider event. It returns an error only when w
	// fails or the provider sent a malformed event that makes continuing
	// impossible (after writing the client's error event).
	Event(ev sse.Event, w *sse.Writer) error
	// End is called once, when the provider stream is over: cause is nil at
	// a clean EOF, or the read error. If the provider's terminator (OpenAI
	// `[DONE]`, Anthropic `message_stop`) was not seen, or cause != nil, End
	// writes the client dialect's error event (Anthropic `event: error`;
	// OpenAI: a chunk carrying an "error" object and no `[DONE]`) and
	// returns a non-nil error describing the truncation. Provider error
	// events seen earlier were already translated by Event and make End
	// return an error too (for metrics), without writing a second error
	// event. Once the terminator was seen, End returns nil whatever cause
	// is: the client has its whole answer.
	End(w *sse.Writer, cause error) error
	// Usage is the usage seen so far, in OpenAI's sense.
	Usage() Usage
	// Done reports whether the terminator was seen (anything after it is
	// ignored, not forwarded).
	Done() bool
}

// NewStream returns the translator from provider to client dialect. For
// provider == client it returns a pass-through Stream that forwards each
// event's Raw bytes unchanged, never re-encodes, but still tracks the
// terminator, usage and errors (and drops junk after the terminator).
// clientModel replaces the provider's model name in translated streams
// ("" keeps the provider's); the pass-through leaves it as sent.
func NewStream(provider, client Dialect, clientModel string) Stream {
	return NewStreamWith(provider, client, clientModel, StreamOptions{IncludeUsage: true})
}

// StreamOptions are what the client asked of its stream.
type StreamOptions struct {
	// IncludeUsage sends an OpenAI client the closing usage chunk (empty
	// choices, usage only), as OpenAI does only for
	// stream_options.include_usage. Other clients ignore it.
	IncludeUsage bool
	// OmitUsageChunk drops the usage-only chunk (empty choices) of a
	// same-dialect OpenAI stream after reading its usage: the gateway asked
	// the provider for it, the client did not.
	OmitUsageChunk bool
}

// NewStreamWith is NewStream for a client that may not want everything a
// translated stream can carry.
func NewStreamWith(provider, client Dialect, clientModel string, opt StreamOptions) Stream {
	b := streamBase{client: client}
	switch {
	case provider == client:
		return &passThrough{streamBase: b, omitUsage: client == OpenAI && opt.OmitUsageChunk}
	case provider == Anthropic:
		return &anthropicToOpenAI{streamBase: b, clientModel: clientModel, omitUsage: !opt.IncludeUsage}
	default:
		return &openAIToAnthropic{streamBase: b, clientModel: clientModel, open: -1}
	}
}

// ErrStreamTruncated is wrapped by the error End returns when the provider
// stream ended before its terminator.
var ErrStreamTruncated = errors.New("the provider's stream ended before it was complete")

// ProviderError is returned by End when the provider sent an error event
// (or error chunk) mid-stream; it has already been sent to the client.
type ProviderError struct{ Err *Error }

func (e ProviderError) Error() string { return "provider sent an error mid-stream: " + e.Err.Error() }

func (e ProviderError) Unwrap() error { return e.Err }

// streamBase holds what every Stream tracks.
type streamBase struct {
	client Dialect
	done   bool
	// failed is set once the client was sent an error event: further
	// provider events are ignored and End returns it.
	failed error
	usage  Usage
	buf    []byte
}

func (s *streamBase) Usage() Usage { return s.usage }
func (s *streamBase) Done() bool   { return s.done }

// ignoring reports whether provider events are no longer wanted.
func (s *streamBase) ignoring() bool { return s.done || s.failed != nil }

func (s *streamBase) End(w *sse.Writer, cause error) error {
	if s.done {
		return nil
	}
	if s.failed != nil {
		return s.failed
	}
	e := &Error{Status: 502, Kind: KindAPIError, Message: ErrStreamTruncated.Error()}
	err := error(ErrStreamTruncated)
	if cause != nil {
		if isTimeout(cause) {
			e.Status, e.Kind = 504, KindTimeout
		}
		e.Message += ": " + cause.Error()
		err = &truncatedError{cause: cause}
	}
	s.failed = err
	if werr := s.writeError(w, e); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

type truncatedError struct{ cause error }

func (e *truncatedError) Error() string {
	return ErrStreamTruncated.Error() + ": " + e.cause.Error()
}

func (e *truncatedError) Unwrap() []error { return []error{ErrStreamTruncated, e.cause} }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// writeError sends e to the client as the client dialect's error event.
func (s *streamBase) writeError(w *sse.Writer, e *Error) error {
	if s.client == Anthropic {
		s.buf = appendAnthropicError(s.buf[:0], e, e.kind())
		return w.Event("error", s.buf)
	}
	s.buf = appendOpenAIError(s.buf[:0], e, e.kind())
	return w.Event("", s.buf)
}

// malformed ends the stream on a provider event that cannot be read: the
// client gets an error event, the caller an error.
func (s *streamBase) malformed(w *sse.Writer, what string, data []byte) error {
	e := &Error{Status: 502, Kind: KindAPIError, Message: "the provider sent a malformed stream event: " + what}
	err := errors.New(e.Message + ": " + bodyText(data))
	s.failed = err
	if werr := s.writeError(w, e); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

// providerError forwards a provider's error event to the client.
func (s *streamBase) providerError(w *sse.Writer, e *Error) error {
	s.failed = ProviderError{e}
	return s.writeError(w, e)
}

// anthropicErrorEvent reads the error of an Anthropic error event.
func anthropicErrorEvent(typ, message string) *Error {
	e := &Error{Kind: typeKind(Anthropic, typ), Message: message}
	if e.Kind == "" {
		e.Kind = KindAPIError
	}
	e.Status = kindStatus[e.Kind]
	if e.Message == "" {
		e.Message = "the provider reported an error mid-stream"
	}
	return e
}

// openAIErrorChunk reads the error object of an OpenAI error chunk (or a
// whole chunk holding one under "error").
func openAIErrorChunk(raw json.RawMessage) *Error {
	var wrapped struct {
		Error json.RawMessage `json:"error"`
	}
	if unmarshal(raw, &wrapped) == nil && len(wrapped.Error) > 0 && wrapped.Error[0] == '{' {
		raw = wrapped.Error
	}
	var inner struct {
		Type    string          `json:"type"`
		Message string          `json:"message"`
		Code    json.RawMessage `json:"code"`
	}
	e := &Error{Kind: KindAPIError, Status: 500}
	if unmarshal(raw, &inner) == nil {
		e.Message = inner.Message
		switch {
		case inner.Type == "insufficient_quota":
			e.Kind = KindBilling
		case bytes.Contains(inner.Code, []byte("rate_limit")) || bytes.Contains([]byte(inner.Type), []byte("rate_limit")):
			e.Kind = KindRateLimit
		case inner.Type == "invalid_request_error":
			e.Kind = KindInvalidRequest
		}
		e.Status = kindStatus[e.Kind]
	} else {
		var s string
		if unmarshal(raw, &s) == nil {
			e.Message = s
		}
	}
	if e.Message == "" {
		e.Message = "the provider reported an error mid-stream"
	}
	return e
}

// passThrough forwards a same-dialect stream byte for byte.
type passThrough struct {
	streamBase
	omitUsage bool
}

func (s *passThrough) Event(ev sse.Event, w *sse.Writer) error {
	if s.done || s.failed != nil {
		// Junk after the terminator, and anything after the provider's
		// error event (the stream has failed, as a translated one stops
		// there too), is not forwarded.
		return nil
	}
	if s.omitUsage && ev.Data != nil && isUsageChunk(ev.Data) {
		s.watchOpenAI(ev.Name, ev.Data)
		return nil
	}
	if err := w.Raw(ev.Raw); err != nil {
		return err
	}
	if ev.Data == nil {
		return nil
	}
	if s.client == OpenAI {
		s.watchOpenAI(ev.Name, ev.Data)
	} else {
		s.watchAnthropic(ev.Name, ev.Data)
	}
	return nil
}

// isUsageChunk reports whether an OpenAI chunk is the closing usage chunk:
// empty choices and a usage object.
func isUsageChunk(data []byte) bool {
	if !hasObjectField(data, `"usage"`) {
		return false
	}
	var emptyChoices, usage bool
	jsonscan.Members(data, func(k, v []byte) bool {
		switch string(k) {
		case "choices":
			emptyChoices = len(bytes.TrimSpace(bytes.Trim(bytes.TrimSpace(v), "[]"))) == 0 && len(v) >= 2 && v[0] == '['
		case "usage":
			usage = len(v) > 0 && v[0] == '{'
		}
		return true
	})
	return emptyChoices && usage
}

func (s *passThrough) watchOpenAI(name string, data []byte) {
	if bytes.Equal(bytes.TrimSpace(data), doneData) {
		s.done = true
		return
	}
	if name == "error" {
		s.failed = ProviderError{openAIErrorChunk(data)}
		return
	}
	hasUsage := hasObjectField(data, `"usage"`)
	hasError := hasObjectField(data, `"error"`)
	if !hasUsage && !hasError {
		return
	}
	if !hasError {
		// The usage chunk, once a stream: read by scanning, as the
		// gateway reads a JSON answer's; anything unusual is decoded.
		var usage []byte
		err := jsonscan.Members(data, func(k, v []byte) bool {
			if string(k) == "usage" {
				usage = v // the last, as the decoder takes it
			}
			return true
		})
		if u, ok := UsageOf(OpenAI, usage); ok && err == nil {
			s.usage = u
			return
		}
	}
	var c struct {
		Usage *oaUsage        `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
	if unmarshal(data, &c) != nil {
		return
	}
	if c.Usage != nil {
		s.usage = c.Usage.usage()
	}
	if !isNull(c.Error) {
		s.failed = ProviderError{openAIErrorChunk(c.Error)}
	}
}

func (s *passThrough) watchAnthropic(name string, data []byte) {
	switch name {
	case "message_start", "message_delta", "message_stop", "error":
	case "content_block_delta", "content_block_start", "content_block_stop", "ping":
		return // the hot path: nothing to track
	default:
		// No or unknown event name: go by the type in the data.
	}
	var e anEvent
	if unmarshal(data, &e) != nil {
		return
	}
	switch e.Type {
	case "message_start":
		if e.Message != nil && e.Message.Usage != nil {
			s.usage = e.Message.Usage.usage()
		}
	case "message_delta":
		e.Usage.apply(&s.usage)
	case "message_stop":
		s.done = true
	case "error":
		var typ, msg string
		if e.Error != nil {
			typ, msg = e.Error.Type, e.Error.Message
		}
		s.failed = ProviderError{anthropicErrorEvent(typ, msg)}
	}
}

var doneData = []byte("[DONE]")

// hasObjectField reports whether data contains key followed by a colon and
// an object or string, cheaply, before paying for a decode. It may report
// true for a match inside a string; the decode settles it.
func hasObjectField(data []byte, key string) bool {
	for {
		i := bytes.Index(data, []byte(key))
		if i < 0 {
			return false
		}
		rest := bytes.TrimLeft(data[i+len(key):], " \t\r\n")
		if len(rest) > 0 && rest[0] == ':' {
			rest = bytes.TrimLeft(rest[1:], " \t\r\n")
			if len(rest) > 0 && (rest[0] == '{' || rest[0] == '"') {
				return true
			}
		}
		data = data[i+len(key):]
	}
}

// anEvent is any Anthropic stream event: only the fields Strait reads.
type anEvent struct {
	Type    string `json:"type"`
	Message *struct {
		ID    string   `json:"id"`
		Model string   `json:"model"`
		Usage *anUsage `json:"usage"`
	} `json:"message"`
	Index        int `json:"index"`
	ContentBlock *struct {
		Type     string          `json:"type"`
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Text     string          `json:"text"`
		Thinking string          `json:"thinking"`
		Input    json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		Thinking    string `json:"thinking"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anDeltaUsage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// anDeltaUsage is message_delta usage: every count is a cumulative total,
// and those absent keep their earlier value.
type anDeltaUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
}

// apply updates u (in OpenAI's sense) with the counts present.
func (d *anDeltaUsage) apply(u *Usage) {
	if d == nil {
		return
	}
	in := u.Input - u.CacheRead - u.CacheWrite
	if d.InputTokens != nil {
		in = *d.InputTokens
	}
	if d.CacheReadInputTokens != nil {
		u.CacheRead = *d.CacheReadInputTokens
	}
	if d.CacheCreationInputTokens != nil {
		u.CacheWrite = *d.CacheCreationInputTokens
	}
	u.Input = in + u.CacheRead + u.CacheWrite
	if d.OutputTokens != nil {
		u.Output = *d.OutputTokens
	}
}
