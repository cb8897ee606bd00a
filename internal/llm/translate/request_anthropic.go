package translate

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/straitgw/strait/internal/llm/jsonscan"
)

// Anthropic request types as read: only the fields Strait translates.

type anMessageIn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anBlockIn struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Source *struct {
		Type      string          `json:"type"`
		MediaType string          `json:"media_type"`
		Data      string          `json:"data"`
		URL       string          `json:"url"`
		Content   json.RawMessage `json:"content"`
	} `json:"source"`
	Title        string          `json:"title"`
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	ToolUseID    string          `json:"tool_use_id"`
	Content      json.RawMessage `json:"content"`
	IsError      bool            `json:"is_error"`
	CacheControl json.RawMessage `json:"cache_control"`
	Citations    json.RawMessage `json:"citations"`
}

type anToolIn struct {
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl json.RawMessage `json:"cache_control"`
}

// OpenAI request types, as Strait writes them.

type oaRequest struct {
	Model               string          `json:"model"`
	Messages            []oaMessageOut  `json:"messages"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	Stop                []string        `json:"stop,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *oaStreamOpts   `json:"stream_options,omitempty"`
	Tools               []oaToolOut     `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	User                string          `json:"user,omitempty"`
}

type oaStreamOpts struct {
	IncludeUsage bool `json:"include_usage"`
}

type oaMessageOut struct {
	Role       string          `json:"role"`
	Content    any             `json:"content"` // string, []oaPartOut or nil
	ToolCalls  []oaToolCallOut `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type oaPartOut struct {
	Type     string      `json:"type"`
	Text     *string     `json:"text,omitempty"`
	ImageURL *oaImageURL `json:"image_url,omitempty"`
	File     *oaFile     `json:"file,omitempty"`
}

type oaImageURL struct {
	URL string `json:"url"`
}

type oaFile struct {
	FileData string `json:"file_data"`
	Filename string `json:"filename"`
}

type oaToolCallOut struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Function oaFunctionCall `json:"function"`
}

type oaFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type oaToolOut struct {
	Type     string       `json:"type"`
	Function oaFunctionIn `json:"function"`
}

type oaFunctionIn struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

func textPart(s string) oaPartOut { return oaPartOut{Type: "text", Text: &s} }

// anRequestIn is an Anthropic request as read: the fields Strait
// translates.
type anRequestIn struct {
	Messages      []anMessageIn              `json:"messages"`
	System        json.RawMessage            `json:"system"`
	MaxTokens     *int                       `json:"max_tokens"`
	Temperature   *float64                   `json:"temperature"`
	TopP          *float64                   `json:"top_p"`
	StopSequences []string                   `json:"stop_sequences"`
	Stream        bool                       `json:"stream"`
	Tools         []anToolIn                 `json:"tools"`
	ToolChoice    json.RawMessage            `json:"tool_choice"`
	Metadata      map[string]json.RawMessage `json:"metadata"`
}

// anthropicFieldsHandled are the Anthropic request fields translated going
// to OpenAI.
var anthropicFieldsHandled = []string{
	"model", "messages", "system", "max_tokens", "temperature", "top_p",
	"stop_sequences", "stream", "tools", "tool_choice", "metadata",
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func (t *reqTranslation) anthropicToOpenAI(body []byte, model string) ([]byte, bool, error) {
	req, err := t.openAIRequest(body, model)
	if err != nil {
		return nil, false, err
	}
	out, err := writeRequest(req, appendOARequest)
	return out, req.Stream, err
}

// openAIRequest reads an Anthropic request body into the OpenAI request it
// translates to.
func (t *reqTranslation) openAIRequest(body []byte, model string) (*oaRequest, error) {
	var in anRequestIn
	others, err := decodeAnthropicRequest(body, &in)
	if err != nil {
		return nil, err
	}
	if others {
		t.dropUnknown(body, anthropicFieldsHandled)
	}
	req := oaRequest{Model: model, Stream: in.Stream, Temperature: in.Temperature, TopP: in.TopP, Stop: in.StopSequences}
	if in.Stream {
		// Without it an OpenAI stream carries no usage, and message_delta
		// would have no output_tokens to report.
		req.StreamOptions = &oaStreamOpts{IncludeUsage: true}
	}
	switch {
	case in.MaxTokens == nil:
		return nil, badRequest("max_tokens", "max_tokens is required by the Anthropic Messages API")
	case *in.MaxTokens < 1:
		return nil, badRequest("max_tokens", "max_tokens is %d; it must be at least 1", *in.MaxTokens)
	}
	req.MaxCompletionTokens = *in.MaxTokens
	for _, k := range sortedKeys(in.Metadata) {
		if k == "user_id" {
			if !isNull(in.Metadata[k]) {
				if err := decodeField(in.Metadata[k], &req.User, "metadata.user_id", "a string"); err != nil {
					return nil, err
				}
			}
		} else if !isNull(in.Metadata[k]) {
			t.drop("metadata." + k)
		}
	}
	if !isNull(in.System) {
		content, err := t.anthropicSystem(in.System)
		if err != nil {
			return nil, err
		}
		if content != nil {
			req.Messages = append(req.Messages, oaMessageOut{Role: "system", Content: content})
		}
	}
	if len(in.Messages) == 0 {
		return nil, badRequest("messages", "messages is missing or empty; send at least one message")
	}
	for i := range in.Messages {
		out, err := t.anthropicMessage(&in.Messages[i], "messages["+itoa(i)+"]")
		if err != nil {
			return nil, err
		}
		req.Messages = append(req.Messages, out...)
	}
	if err := t.anthropicTools(&in, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// anthropicSystem converts the top-level system prompt (a string or text
// blocks) into a system message's content; nil if it is empty.
func (t *reqTranslation) anthropicSystem(raw json.RawMessage) (any, error) {
	if raw[0] == '"' {
		var s string
		if err := decodeField(raw, &s, "system", "a string"); err != nil {
			return nil, err
		}
		if s == "" {
			return nil, nil
		}
		return s, nil
	}
	var blocks []anBlockIn
	if err := decodeField(raw, &blocks, "system", "a string or an array of text blocks"); err != nil {
		return nil, err
	}
	parts := make([]oaPartOut, 0, len(blocks))
	for i, b := range blocks {
		if b.Type != "text" {
			return nil, badRequest(sprintf("system[%d].type", i), "system[%d] has type %q; a system prompt may only hold text", i, b.Type)
		}
		if !isNull(b.CacheControl) {
			t.drop("system[].cache_control")
		}
		if b.Text != "" {
			parts = append(parts, textPart(b.Text))
		}
	}
	return partsContent(parts), nil
}

// partsContent is a single text part as a plain string, several parts as an
// array, none as nil.
func partsContent(parts []oaPartOut) any {
	switch {
	case len(parts) == 0:
		return nil
	case len(parts) == 1 && parts[0].Type == "text":
		return *parts[0].Text
	}
	return parts
}

// anthropicMessage converts one message. A user message's tool_result
// blocks become tool messages placed before the rest of it, since OpenAI
// wants tool results right after the assistant's tool calls.
func (t *reqTranslation) anthropicMessage(m *anMessageIn, at string) ([]oaMessageOut, error) {
	if m.Role != "user" && m.Role != "assistant" {
		return nil, badRequest(at+".role", "%s has role %q; want user or assistant", at, m.Role)
	}
	if isNull(m.Content) {
		return nil, badRequest(at+".content", "%s has no content", at)
	}
	if m.Content[0] == '"' {
		var s string
		if err := decodeContent(m.Content, &s, at, "a string"); err != nil {
			return nil, err
		}
		return []oaMessageOut{{Role: m.Role, Content: s}}, nil
	}
	var blocks []anBlockIn
	if err := decodeContent(m.Content, &blocks, at, "a string or an array of content blocks"); err != nil {
		return nil, err
	}
	var out []oaMessageOut
	var parts []oaPartOut
	var calls []oaToolCallOut
	for j := range blocks {
		b := &blocks[j]
		bat := sprintf("%s.content[%d]", at, j)
		if !isNull(b.CacheControl) {
			t.drop("messages[].content[].cache_control")
		}
		if !isNull(b.Citations) {
			t.drop("messages[].content[].citations")
		}
		switch {
		case b.Type == "text":
			if b.Text != "" {
				parts = append(parts, textPart(b.Text))
			}
		case b.Type == "image" && m.Role == "user":
			p, err := imagePart(b, bat)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		case b.Type == "document" && m.Role == "user":
			p, err := documentPart(b, bat)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		case b.Type == "tool_result" && m.Role == "user":
			tm, err := t.toolMessage(b, bat)
			if err != nil {
				return nil, err
			}
			out = append(out, tm)
		case b.Type == "tool_use" && m.Role == "assistant":
			if b.ID == "" {
				return nil, badRequest(bat+".id", "%s is a tool_use block without an id", bat)
			}
			args := "{}"
			if !isNull(b.Input) {
				args = string(compactJSON(nil, b.Input))
			}
			calls = append(calls, oaToolCallOut{ID: b.ID, Type: "function",
				Function: oaFunctionCall{Name: b.Name, Arguments: args}})
		case (b.Type == "thinking" || b.Type == "redacted_thinking") && m.Role == "assistant":
			// OpenAI takes no reasoning in history; the model does without.
			t.drop("messages[].content[]." + b.Type)
		default:
			return nil, badRequest(bat+".type", "%s is a %q block in a %s message, which has no OpenAI equivalent", bat, b.Type, m.Role)
		}
	}
	if m.Role == "assistant" {
		msg := oaMessageOut{Role: "assistant", Content: textContent(parts), ToolCalls: calls}
		if msg.Content == nil && len(calls) == 0 {
			return nil, nil // only thinking: nothing left to send
		}
		return []oaMessageOut{msg}, nil
	}
	if len(parts) > 0 || len(out) == 0 {
		content := partsContent(parts)
		if content == nil {
			content = ""
		}
		out = append(out, oaMessageOut{Role: "user", Content: content})
	}
	return out, nil
}

// textContent is an assistant's text parts as one string (OpenAI assistant
// content is text only), nil if there is none.
func textContent(parts []oaPartOut) any {
	if len(parts) == 0 {
		return nil
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(*p.Text)
	}
	return b.String()
}

func imagePart(b *anBlockIn, at string) (oaPartOut, error) {
	if b.Source == nil {
		return oaPartOut{}, badRequest(at+".source", "%s is an image without a source", at)
	}
	switch b.Source.Type {
	case "base64":
		return oaPartOut{Type: "image_url", ImageURL: &oaImageURL{
			URL: "data:" + b.Source.MediaType + ";base64," + b.Source.Data}}, nil
	case "url":
		return oaPartOut{Type: "image_url", ImageURL: &oaImageURL{URL: b.Source.URL}}, nil
	}
	return oaPartOut{}, badRequest(at+".source.type", "%s is an image with a %q source, which OpenAI cannot read; send it as base64 or a URL", at, b.Source.Type)
}

func documentPart(b *anBlockIn, at string) (oaPartOut, error) {
	if b.Source == nil {
		return oaPartOut{}, badRequest(at+".source", "%s is a document without a source", at)
	}
	switch b.Source.Type {
	case "base64":
		name := b.Title
		if name == "" {
			name = "document.pdf"
		}
		return oaPartOut{Type: "file", File: &oaFile{
			FileData: "data:" + b.Source.MediaType + ";base64," + b.Source.Data, Filename: name}}, nil
	case "text":
		return textPart(b.Source.Data), nil
	}
	return oaPartOut{}, badRequest(at+".source.type", "%s is a document with a %q source, which OpenAI chat completions cannot read; send it as base64 or text", at, b.Source.Type)
}

// toolMessage converts a tool_result block into an OpenAI tool message.
func (t *reqTranslation) toolMessage(b *anBlockIn, at string) (oaMessageOut, error) {
	if b.ToolUseID == "" {
		return oaMessageOut{}, badRequest(at+".tool_use_id", "%s is a tool_result without a tool_use_id", at)
	}
	if b.IsError {
		// OpenAI has no flag for a failed tool; the content says so.
		t.drop("messages[].content[].is_error")
	}
	msg := oaMessageOut{Role: "tool", ToolCallID: b.ToolUseID, Content: ""}
	if isNull(b.Content) {
		return msg, nil
	}
	if b.Content[0] == '"' {
		var s string
		if err := decodeContent(b.Content, &s, at, "a string"); err != nil {
			return oaMessageOut{}, err
		}
		msg.Content = s
		return msg, nil
	}
	var inner []anBlockIn
	if err := decodeContent(b.Content, &inner, at, "a string or an array of content blocks"); err != nil {
		return oaMessageOut{}, err
	}
	parts := make([]oaPartOut, 0, len(inner))
	for k, ib := range inner {
		if ib.Type != "text" {
			return oaMessageOut{}, badRequest(sprintf("%s.content[%d].type", at, k),
				"%s.content[%d] is a %q block; OpenAI tool messages hold text only", at, k, ib.Type)
		}
		if !isNull(ib.CacheControl) {
			t.drop("messages[].content[].cache_control")
		}
		parts = append(parts, textPart(ib.Text))
	}
	if c := partsContent(parts); c != nil {
		msg.Content = c
	}
	return msg, nil
}

// anthropicTools converts tools and tool_choice.
func (t *reqTranslation) anthropicTools(in *anRequestIn, req *oaRequest) error {
	for i, tool := range in.Tools {
		at := "tools[" + itoa(i) + "]"
		if tool.Type != "" && tool.Type != "custom" {
			return badRequest(at+".type", "%s is the Anthropic server tool %q, which has no OpenAI equivalent", at, tool.Type)
		}
		if tool.Name == "" {
			return badRequest(at+".name", "%s has no name", at)
		}
		if !isNull(tool.CacheControl) {
			t.drop("tools[].cache_control")
		}
		schema := emptySchema
		if !isNull(tool.InputSchema) {
			if tool.InputSchema[0] != '{' {
				return badRequest(at+".input_schema", "%s.input_schema must be a JSON Schema object, not %s", at, kindOf(tool.InputSchema))
			}
			schema = tool.InputSchema
		}
		req.Tools = append(req.Tools, oaToolOut{Type: "function",
			Function: oaFunctionIn{Name: tool.Name, Description: tool.Description, Parameters: schema}})
	}
	raw := in.ToolChoice
	if isNull(raw) {
		return nil
	}
	var tc struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
	}
	if err := decodeField(raw, &tc, "tool_choice", "an object with a type"); err != nil {
		return err
	}
	switch tc.Type {
	case "auto":
		req.ToolChoice = json.RawMessage(`"auto"`)
	case "any":
		req.ToolChoice = json.RawMessage(`"required"`)
	case "none":
		req.ToolChoice = json.RawMessage(`"none"`)
	case "tool":
		if tc.Name == "" {
			return badRequest("tool_choice.name", `tool_choice of type "tool" needs a name`)
		}
		b := append([]byte(nil), `{"type":"function","function":{"name":`...)
		b = jsonscan.AppendString(b, tc.Name)
		req.ToolChoice = append(b, "}}"...)
	default:
		return badRequest("tool_choice.type", "tool_choice type %q is not one of auto, any, tool, none", tc.Type)
	}
	if tc.DisableParallelToolUse && len(req.Tools) > 0 && tc.Type != "none" {
		// OpenAI accepts parallel_tool_calls only together with tools.
		no := false
		req.ParallelToolCalls = &no
	}
	return nil
}
