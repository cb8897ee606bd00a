package mockllm

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/straitgw/strait/internal/llm/jsonscan"
)

// request is what the server needs of a chat completion or message request.
type request struct {
	model        string
	stream       bool
	includeUsage bool // OpenAI stream_options.include_usage
	maxTokens    int  // 0: none given
	stop         []string
	inputTokens  int
	tool         *toolDef // the tool to call; nil answers in text
}

// toolDef is a tool a request offers.
type toolDef struct {
	name   string
	schema json.RawMessage
}

// badRequest is a request the real provider rejects with a 400. msg says
// why, param names the offending field when there is one.
type badRequest struct {
	msg   string
	param string
}

func (e *badRequest) Error() string { return e.msg }

func invalid(param, format string, args ...any) *badRequest {
	return &badRequest{msg: fmt.Sprintf(format, args...), param: param}
}

// tokens estimates the tokens of n bytes of text: a quarter, rounded up,
// at least 1 (providers count at least one token even for nothing).
func tokens(n int) int { return max(1, (n+3)/4) }

// content is a message's content, a string or an array of blocks, reduced
// to what the server needs: how many bytes of text it carries, and its tool
// blocks (Anthropic).
type content struct {
	// bad is a value of the wrong JSON type in the content, kept to be
	// reported with the content's path, which only the caller knows.
	bad         *shapeError
	textBytes   int
	toolUses    []string // IDs of tool_use blocks
	toolResults []string // tool_use_id of tool_result blocks
	// resultsFirst is false if a tool_result block follows a block of
	// another type, which Anthropic rejects.
	resultsFirst bool
}

// block is one content block or content part of either dialect.
type block struct {
	Type      string          `json:"type"`
	Text      textLen         `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   *content        `json:"content"`
}

func (c *content) UnmarshalJSON(b []byte) error {
	*c = content{resultsFirst: true}
	switch b[0] {
	case '"':
		c.textBytes = stringLen(b)
		return nil
	case 'n':
		return nil
	case '[':
	default:
		c.bad = &shapeError{got: jsonKind(b)} // want: the dialect's words for content
		return nil
	}
	var blocks []block
	if err := json.Unmarshal(b, &blocks); err != nil {
		c.bad = shapeOf(b, err)
		return nil
	}
	other := false
	for i := range blocks {
		bl := &blocks[i]
		if bl.Content != nil && bl.Content.bad != nil {
			inner := *bl.Content.bad
			inner.path = fmt.Sprintf("[%d].content", i) + joinSub(inner.path)
			c.bad = &inner
			return nil
		}
		switch bl.Type {
		case "text":
			c.textBytes += int(bl.Text)
			other = true
		case "tool_use":
			c.toolUses = append(c.toolUses, bl.ID)
			c.textBytes += len(bl.Name) + compactLen(bl.Input)
			other = true
		case "tool_result":
			c.toolResults = append(c.toolResults, bl.ToolUseID)
			if bl.Content != nil {
				c.textBytes += bl.Content.textBytes
			}
			if other {
				c.resultsFirst = false
			}
		default:
			other = true
		}
	}
	return nil
}

// textLen is a JSON string field kept only as its decoded length.
type textLen int

func (t *textLen) UnmarshalJSON(b []byte) error {
	if b[0] == '"' {
		*t = textLen(stringLen(b))
	}
	return nil
}

// compactLen is the length of JSON text b without the whitespace between
// its tokens, so that the same arguments count the same however a client
// or a gateway spaced them.
func compactLen(b []byte) int {
	n, inString, escaped := 0, false, false
	for _, c := range b {
		switch {
		case inString:
			n++
			if escaped {
				escaped = false
			} else if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			n++
			inString = c == '"'
		}
	}
	return n
}

// toolMode is what tool_choice asks for.
type toolMode uint8

const (
	toolAuto     toolMode = iota // call a tool if the user spoke last
	toolNone                     // never call a tool
	toolRequired                 // OpenAI "required", Anthropic "any"
	toolNamed                    // call the named tool
)

// pickTool chooses the tool to call, or nil for a text answer: the named
// tool, else the first, when tools are offered, tool_choice allows them and
// the last message is the user's own (not a tool result). After a tool
// result the answer is text whatever tool_choice says, so that agent loops
// driven against the mock end.
func pickTool(tools []toolDef, mode toolMode, name string, userSpokeLast bool, param string) (*toolDef, error) {
	if mode == toolNamed {
		i := slices.IndexFunc(tools, func(t toolDef) bool { return t.name == name })
		if i < 0 {
			return nil, invalid(param, "%s names tool %q, which is not among the request's tools", param, name)
		}
		if !userSpokeLast {
			return nil, nil
		}
		return &tools[i], nil
	}
	if len(tools) == 0 || mode == toolNone || !userSpokeLast {
		return nil, nil
	}
	return &tools[0], nil
}

// OpenAI chat completions.

type oaRequest struct {
	Model               string          `json:"model"`
	Messages            []oaMessage     `json:"messages"`
	Stream              bool            `json:"stream"`
	StreamOptions       *oaStreamOpts   `json:"stream_options"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	Tools               []oaTool        `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
}

type oaStreamOpts struct {
	IncludeUsage bool `json:"include_usage"`
}

type oaMessage struct {
	Role       string       `json:"role"`
	Content    content      `json:"content"`
	ToolCalls  []oaToolCall `json:"tool_calls"`
	ToolCallID string       `json:"tool_call_id"`
}

type oaToolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaTool struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type oaNamedChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// parseOpenAI parses and checks a chat completion request the way the
// OpenAI API does, as far as a mock can tell.
func parseOpenAI(body []byte) (request, error) {
	var in oaRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return request{}, jsonError(body, err, OpenAI)
	}
	for i := range in.Messages {
		if bad := in.Messages[i].Content.bad; bad != nil {
			return request{}, bad.report(fmt.Sprintf("messages[%d].content", i), OpenAI)
		}
	}
	var r request
	if in.Model == "" {
		return r, invalid("model", "you must provide a model parameter")
	}
	if len(in.Messages) == 0 {
		return r, invalid("messages", "messages must be a non-empty array")
	}
	r.model = in.Model
	r.stream = in.Stream
	if in.StreamOptions != nil {
		if !r.stream {
			return r, invalid("stream_options", "stream_options is only allowed when stream is true")
		}
		r.includeUsage = in.StreamOptions.IncludeUsage
	}
	mt := in.MaxCompletionTokens
	if mt == nil {
		mt = in.MaxTokens // the older name
	}
	if mt != nil {
		if *mt < 1 {
			return r, invalid("max_completion_tokens", "max_completion_tokens (or max_tokens) must be at least 1, got %d", *mt)
		}
		r.maxTokens = *mt
	}
	if len(in.Stop) > 0 && in.Stop[0] != 'n' {
		if in.Stop[0] == '"' {
			var s string
			if err := json.Unmarshal(in.Stop, &s); err != nil {
				return r, invalid("stop", "stop must be a string or an array of strings")
			}
			r.stop = []string{s}
		} else if err := json.Unmarshal(in.Stop, &r.stop); err != nil {
			return r, invalid("stop", "stop must be a string or an array of strings")
		}
	}

	// Message text, and the tool-call chain: a tool message answers a call
	// of the assistant message before it.
	text := 0
	var calls []string
	for i := range in.Messages {
		m := &in.Messages[i]
		text += m.Content.textBytes
		switch m.Role {
		case "system", "developer", "user", "function": // function: the deprecated form of tool
			calls = nil
		case "assistant":
			calls = calls[:0]
			for _, tc := range m.ToolCalls {
				calls = append(calls, tc.ID)
				text += len(tc.Function.Name) + compactLen([]byte(tc.Function.Arguments))
			}
		case "tool":
			if !slices.Contains(calls, m.ToolCallID) {
				return r, invalid(fmt.Sprintf("messages.[%d].tool_call_id", i),
					"messages with role 'tool' must answer a tool call of the preceding assistant message; tool_call_id %q is not one of its calls", m.ToolCallID)
			}
		default:
			return r, invalid(fmt.Sprintf("messages.[%d].role", i), "role %q is not one of system, developer, user, assistant, tool or function", m.Role)
		}
	}
	r.inputTokens = tokens(text)

	var tools []toolDef
	for _, t := range in.Tools {
		if t.Type != "function" && t.Type != "" {
			continue // custom tools take free text; the mock calls function tools only
		}
		tools = append(tools, toolDef{name: t.Function.Name, schema: t.Function.Parameters})
	}
	mode, name := toolAuto, ""
	if c := in.ToolChoice; len(c) > 0 && c[0] != 'n' {
		if len(in.Tools) == 0 {
			return r, invalid("tool_choice", "tool_choice is only allowed when tools are given")
		}
		switch string(c) {
		case `"none"`:
			mode = toolNone
		case `"auto"`:
		case `"required"`:
			mode = toolRequired
		default:
			var nc oaNamedChoice
			if err := json.Unmarshal(c, &nc); err != nil {
				return r, invalid("tool_choice", "tool_choice must be none, auto, required or a named function")
			}
			if nc.Type == "function" {
				mode, name = toolNamed, nc.Function.Name
			}
		}
	}
	last := in.Messages[len(in.Messages)-1].Role
	tool, err := pickTool(tools, mode, name, last == "user", "tool_choice")
	if err != nil {
		return r, err
	}
	r.tool = tool
	return r, nil
}

// Anthropic Messages.

type anRequest struct {
	Model         string        `json:"model"`
	Messages      []anMessage   `json:"messages"`
	System        content       `json:"system"`
	MaxTokens     *int          `json:"max_tokens"`
	Stream        bool          `json:"stream"`
	StopSequences []string      `json:"stop_sequences"`
	Tools         []anTool      `json:"tools"`
	ToolChoice    *anToolChoice `json:"tool_choice"`
}

type anMessage struct {
	Role    string  `json:"role"`
	Content content `json:"content"`
}

type anTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// parseAnthropic parses and checks a Messages request the way the
// Anthropic API does, as far as a mock can tell. countOnly is for
// count_tokens, which takes no max_tokens.
func parseAnthropic(body []byte, countOnly bool) (request, error) {
	var in anRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return request{}, jsonError(body, err, Anthropic)
	}
	if in.System.bad != nil {
		return request{}, in.System.bad.report("system", Anthropic)
	}
	for i := range in.Messages {
		if bad := in.Messages[i].Content.bad; bad != nil {
			return request{}, bad.report(fmt.Sprintf("messages[%d].content", i), Anthropic)
		}
	}
	var r request
	if in.Model == "" {
		return r, invalid("model", "model: Field required")
	}
	if len(in.Messages) == 0 {
		return r, invalid("messages", "messages: at least one message is required")
	}
	if !countOnly {
		if in.MaxTokens == nil {
			return r, invalid("max_tokens", "max_tokens: Field required")
		}
		if *in.MaxTokens < 1 {
			return r, invalid("max_tokens", "max_tokens: must be at least 1, got %d", *in.MaxTokens)
		}
		r.maxTokens = *in.MaxTokens
	}
	r.model = in.Model
	r.stream = in.Stream && !countOnly
	r.stop = in.StopSequences

	text := in.System.textBytes
	var prevUses []string
	for i := range in.Messages {
		m := &in.Messages[i]
		text += m.Content.textBytes
		switch m.Role {
		case "user":
			if !m.Content.resultsFirst {
				return r, invalid(fmt.Sprintf("messages.%d.content", i), "messages.%d.content: tool_result blocks must come before any other content in a user message", i)
			}
			for _, id := range m.Content.toolResults {
				if !slices.Contains(prevUses, id) {
					return r, invalid(fmt.Sprintf("messages.%d.content", i), "messages.%d.content: unexpected tool_use_id %q in tool_result blocks: each tool_result must answer a tool_use block of the previous message", i, id)
				}
			}
		case "assistant":
			if len(m.Content.toolResults) > 0 {
				return r, invalid(fmt.Sprintf("messages.%d.content", i), "messages.%d.content: tool_result blocks belong in user messages", i)
			}
		default:
			return r, invalid(fmt.Sprintf("messages.%d.role", i), "messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		prevUses = m.Content.toolUses
	}
	r.inputTokens = tokens(text)

	var tools []toolDef
	for _, t := range in.Tools {
		if t.InputSchema == nil {
			continue // a server tool: the provider runs it, the mock does not
		}
		tools = append(tools, toolDef{name: t.Name, schema: t.InputSchema})
	}
	mode, name := toolAuto, ""
	if c := in.ToolChoice; c != nil {
		switch c.Type {
		case "auto":
		case "none":
			mode = toolNone
		case "any":
			mode = toolRequired
		case "tool":
			mode, name = toolNamed, c.Name
		default:
			return r, invalid("tool_choice.type", "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
		}
	}
	last := &in.Messages[len(in.Messages)-1]
	userSpokeLast := last.Role == "user" && len(last.Content.toolResults) == 0
	tool, err := pickTool(tools, mode, name, userSpokeLast, "tool_choice.name")
	if err != nil {
		return r, err
	}
	r.tool = tool
	return r, nil
}

// jsonError turns a decoding error of body into the 400 a provider sends
// for a body that is not the JSON it expects, naming the field by its path
// as dialect d does and never by the mock's own Go types.
func jsonError(body []byte, err error, d Dialect) *badRequest {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return shapeOf(body, err).report("", d)
	}
	var js *jsonscan.SyntaxError
	if errors.As(jsonscan.Members(body, func(_, _ []byte) bool { return false }), &js) {
		return invalid("", "the request body is not valid JSON at byte %d: %s", js.Offset, js.Msg)
	}
	return invalid("", "the request body is not valid JSON: %v", err)
}

// shapeError is a JSON value of the wrong type: where (a path relative to
// the value decoded, as in [0].text), what the API wants there ("" for
// message content, which each dialect names in its own words) and what
// was sent.
type shapeError struct{ path, want, got string }

// shapeOf describes err, from decoding doc (valid JSON), as a shapeError.
func shapeOf(doc []byte, err error) *shapeError {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return &shapeError{want: "valid JSON", got: "something else"}
	}
	// The offset is at the end of a scalar, or just past an opening
	// bracket: the byte before it is in the value.
	p := te.Field
	if te.Offset > 0 {
		p = jsonscan.PathAt(doc, int(te.Offset)-1)
	}
	got := te.Value
	switch {
	case got == "bool":
		got = "a boolean"
	case got == "object" || got == "array":
		got = "an " + got
	case strings.HasPrefix(got, "number "):
		got = strings.TrimPrefix(got, "number ")
	default:
		got = "a " + got
	}
	return &shapeError{path: p, want: wantOf(te.Type), got: got}
}

// report is the 400 for e found in the value at path at (empty for the
// whole body), worded as dialect d words it.
func (e *shapeError) report(at string, d Dialect) *badRequest {
	p := at + joinSub(e.path)
	if at == "" {
		p = e.path
	}
	want := e.want
	if want == "" {
		want = "a string or an array of content parts"
		if d == Anthropic {
			want = "a string or an array of content blocks"
		}
	}
	if d == Anthropic {
		// Anthropic writes paths with dots only: messages.2.content.
		dotted := strings.NewReplacer("[", ".", "]", "").Replace(p)
		dotted = strings.TrimPrefix(dotted, ".")
		if dotted == "" {
			return invalid("", "the request body: expected %s, got %s", want, e.got)
		}
		return invalid(dotted, "%s: expected %s, got %s", dotted, want, e.got)
	}
	if p == "" {
		return invalid("", "Invalid type for the request body: expected %s, but got %s instead.", want, e.got)
	}
	// OpenAI's param puts a dot before an index: messages.[2].content.
	return invalid(strings.ReplaceAll(p, "[", ".["), "Invalid type for '%s': expected %s, but got %s instead.", p, want, e.got)
}

// joinSub appends a relative path to one that leads to it.
func joinSub(rel string) string {
	if rel == "" || rel[0] == '[' {
		return rel
	}
	return "." + rel
}

// jsonKind names the JSON type of raw, valid JSON.
func jsonKind(raw []byte) string {
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// wantOf says what a value decoded into a t must be, in JSON's terms.
func wantOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[content]() {
		return "" // the dialect's words
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.String {
			return "an array of strings"
		}
		return "an array"
	}
	return "an object"
}
