package translate

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/straitgw/strait/internal/llm/jsonscan"
)

// Dialect names an API dialect.
type Dialect string

// The dialects the gateway speaks.
const (
	OpenAI    Dialect = "openai"
	Anthropic Dialect = "anthropic"
)

func (d Dialect) valid() bool { return d == OpenAI || d == Anthropic }

// Options tune request translation.
type Options struct {
	// DefaultMaxTokens is put in an Anthropic request when the OpenAI client
	// gave neither max_tokens nor max_completion_tokens. 0 means 4096.
	DefaultMaxTokens int
	// MaxTokensCap, if > 0, caps max_tokens going to Anthropic.
	MaxTokensCap int
	// Strict rejects (400) request fields that have no equivalent in the
	// provider dialect instead of dropping them. Either way, the dropped
	// field names are returned in Translated.Dropped for logging.
	Strict bool
}

// DefaultMaxTokens is the max_tokens an Anthropic request gets when the
// OpenAI client set none and Options.DefaultMaxTokens is 0.
const DefaultMaxTokens = 4096

// Translated is a translated request.
type Translated struct {
	Body []byte
	// Stream is whether the client asked for a streamed response.
	Stream bool
	// Dropped names the fields that had no equivalent and were dropped, each
	// once, in the order met ("seed", "messages[].name",
	// "tools[].cache_control"…).
	Dropped []string
	// IncludeUsage is whether an OpenAI client asked for the usage chunk
	// of a stream (stream_options.include_usage); pass it to
	// NewStreamWith.
	IncludeUsage bool
}

// Usage is token usage in OpenAI's sense: Input counts every prompt token,
// cached ones included; CacheRead and CacheWrite are the parts of Input read
// from and written to the provider's prompt cache.
type Usage struct{ Input, Output, CacheRead, CacheWrite int }

// Request translates a client request body of dialect client into dialect
// provider, setting the model to model (the routed upstream model name).
//
// For OpenAI to Anthropic it does not need stream_options (Anthropic always
// reports usage); for Anthropic to OpenAI streaming it sets
// stream_options.include_usage so that usage can be reported in
// message_delta. For the same dialect it only rewrites the model, leaving
// every other byte as it was (the gateway normally uses its own fast path
// then). Errors are *Error with Status 400 and a message naming the field.
func Request(client, provider Dialect, body []byte, model string, opt Options) (Translated, error) {
	if !client.valid() || !provider.valid() {
		return Translated{}, &Error{Status: 500, Kind: KindAPIError,
			Message: sprintf("translate: unknown dialect pair %q to %q", client, provider)}
	}
	if client == provider {
		var head struct {
			Stream bool `json:"stream"`
		}
		if err := decodeBody(body, &head); err != nil {
			return Translated{}, err
		}
		out, err := replaceModel(body, model)
		if err != nil {
			return Translated{}, err
		}
		return Translated{Body: out, Stream: head.Stream}, nil
	}
	t := &reqTranslation{opt: opt}
	var out []byte
	var stream bool
	var err error
	if client == OpenAI {
		out, stream, err = t.openAIToAnthropic(body, model)
	} else {
		out, stream, err = t.anthropicToOpenAI(body, model)
	}
	if err != nil {
		return Translated{}, err
	}
	if opt.Strict && len(t.dropped) > 0 {
		return Translated{}, badRequest(t.dropped[0],
			"%s no equivalent in the %s API, and this route rejects such fields instead of dropping them; remove %s",
			listFields(t.dropped), providerName(provider), pluralIt(len(t.dropped)))
	}
	return Translated{Body: out, Stream: stream, Dropped: t.dropped, IncludeUsage: t.includeUsage}, nil
}

func providerName(d Dialect) string {
	if d == OpenAI {
		return "OpenAI chat completions"
	}
	return "Anthropic Messages"
}

// listFields names the fields for a sentence, with its verb.
func listFields(f []string) string {
	if len(f) == 1 {
		return "field " + f[0] + " has"
	}
	return "fields " + strings.Join(f[:len(f)-1], ", ") + " and " + f[len(f)-1] + " have"
}

func pluralIt(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// reqTranslation carries one request translation's state.
type reqTranslation struct {
	opt          Options
	dropped      []string
	includeUsage bool
}

// drop records that field had no equivalent.
func (t *reqTranslation) drop(field string) {
	if !slices.Contains(t.dropped, field) {
		t.dropped = append(t.dropped, field)
	}
}

// dropUnknown records every top-level field of body (a valid JSON object)
// that is not in handled and not null.
func (t *reqTranslation) dropUnknown(body []byte, handled []string) {
	var unknown []string
	forEachKey(body, func(key []byte, null bool) {
		if null {
			return
		}
		for _, h := range handled {
			// encoding/json matches keys without regard to case, so the
			// same key counts as handled here.
			if bytes.EqualFold(key, []byte(h)) {
				return
			}
		}
		unknown = append(unknown, string(key))
	})
	slices.Sort(unknown)
	for _, k := range unknown {
		t.drop(k)
	}
}

// decodeBody decodes a request body, turning a decoding failure into a 400
// naming the offending field.
func decodeBody(body []byte, v any) error {
	if err := unmarshal(body, v); err != nil {
		path, msg := explainDecode(body, err, "the request body", "", "a JSON object")
		return badRequest(path, "%s", msg)
	}
	if bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
		return badRequest("", "the request body must be a JSON object, not null")
	}
	return nil
}

// decodeOpenAIRequest and decodeAnthropicRequest are decodeBody for a
// request to translate, in a zero value, decoded by hand if it can be.
// others reports whether the body may have top-level members that are
// neither fields nor model (and not null): only then need they be looked
// for.
func decodeOpenAIRequest(body []byte, in *oaRequestIn) (others bool, err error) {
	d := handDecoder{b: body}
	if d.oaRequestIn(in) && d.end() {
		return d.others > 0, nil
	}
	*in = oaRequestIn{}
	return true, decodeBody(body, in)
}

func decodeAnthropicRequest(body []byte, in *anRequestIn) (others bool, err error) {
	d := handDecoder{b: body}
	if d.anRequestIn(in) && d.end() {
		return d.others > 0, nil
	}
	*in = anRequestIn{}
	return true, decodeBody(body, in)
}

// replaceModel sets the top-level "model" of body to model, keeping every
// other byte of the body as it is.
func replaceModel(body []byte, model string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // '{', checked by decodeBody
		return nil, badRequest("", "the request body must be a JSON object")
	}
	newVal := jsonscan.AppendString(nil, model)
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			_, msg := explainDecode(body, err, "the request body", "", "a JSON object")
			return nil, badRequest("", "%s", msg)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			_, msg := explainDecode(body, err, "the request body", "", "a JSON object")
			return nil, badRequest("", "%s", msg)
		}
		if key != "model" {
			continue
		}
		end := int(dec.InputOffset())
		start := end - len(raw)
		out := make([]byte, 0, len(body)-len(raw)+len(newVal))
		out = append(out, body[:start]...)
		out = append(out, newVal...)
		return append(out, body[end:]...), nil
	}
	// No model field: add one right after the opening brace.
	open := bytes.IndexByte(body, '{')
	out := make([]byte, 0, len(body)+len(newVal)+10)
	out = append(out, body[:open+1]...)
	out = append(out, `"model":`...)
	out = append(out, newVal...)
	rest := bytes.TrimLeft(body[open+1:], " \t\r\n")
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, body[open+1:]...), nil
}
