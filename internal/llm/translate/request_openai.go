package translate

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/straitgw/strait/internal/llm/jsonscan"
)

// OpenAI request types: only the fields Strait translates.

type oaMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             string          `json:"name"`
	ToolCalls        []oaToolCall    `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Refusal          json.RawMessage `json:"refusal"`
	FunctionCall     json.RawMessage `json:"function_call"`
	Audio            json.RawMessage `json:"audio"`
}

type oaToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type oaPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
	File *struct {
		FileData string `json:"file_data"`
		FileID   string `json:"file_id"`
		Filename string `json:"filename"`
	} `json:"file"`
}

type oaTool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      json.RawMessage `json:"strict"`
	} `json:"function"`
}

// Anthropic request types, as Strait writes them.

type anRequest struct {
	Model         string          `json:"model"`
	System        any             `json:"system,omitempty"`
	Messages      []anMessage     `json:"messages"`
	MaxTokens     int             `json:"max_tokens"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	Tools         []anTool        `json:"tools,omitempty"`
	ToolChoice    json.RawMessage `json:"tool_choice,omitempty"`
	Metadata      *anMetadata     `json:"metadata,omitempty"`
}

type anMetadata struct {
	UserID string `json:"user_id"`
}

type anMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"` // string or []anBlock
}

type anBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Source    *anSource       `json:"source,omitempty"`
	Title     string          `json:"title,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   any             `json:"content,omitempty"` // tool_result: string or []anBlock
}

type anSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type anTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

func textBlock(s string) anBlock { return anBlock{Type: "text", Text: &s} }

// oaRequestIn is an OpenAI request as read: the fields Strait translates.
type oaRequestIn struct {
	Messages            []oaMessage     `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	Stop                stopField       `json:"stop"`
	Stream              bool            `json:"stream"`
	N                   *int            `json:"n"`
	Tools               []oaTool        `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	User                string          `json:"user"`
	Functions           json.RawMessage `json:"functions"`
	FunctionCall        json.RawMessage `json:"function_call"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// stopField is OpenAI's stop: a string or an array of strings.
type stopField []string

func (s *stopField) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := unmarshal(b, &one); err != nil {
			return err
		}
		*s = stopField{one}
		return nil
	}
	var many []string
	if err := unmarshal(b, &many); err != nil {
		// stop is a top-level field, so its path is known here.
		path, msg := explainDecode(b, err, "", "stop", "a string or an array of strings")
		return &fieldError{path, msg}
	}
	*s = many
	return nil
}

// openAIFieldsHandled are the OpenAI request fields translated, or consumed
// without loss, going to Anthropic. stream_options is among them: Anthropic
// always reports usage in its stream, and the translated stream passes it
// on in the usage chunk exactly when the client asked for one
// (Translated.IncludeUsage, StreamOptions).
var openAIFieldsHandled = []string{
	"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
	"stop", "stream", "n", "tools", "tool_choice", "parallel_tool_calls", "user",
	"stream_options", "functions", "function_call",
}

// emptySchema is the input_schema of a function declared without
// parameters: Anthropic requires one.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

func (t *reqTranslation) openAIToAnthropic(body []byte, model string) ([]byte, bool, error) {
	req, err := t.anthropicRequest(body, model)
	if err != nil {
		return nil, false, err
	}
	out, err := writeRequest(req, appendANRequest)
	return out, req.Stream, err
}

// anthropicRequest reads an OpenAI request body into the Anthropic request
// it translates to.
func (t *reqTranslation) anthropicRequest(body []byte, model string) (*anRequest, error) {
	var in oaRequestIn
	others, err := decodeOpenAIRequest(body, &in)
	if err != nil {
		return nil, err
	}
	if !isNull(in.Functions) {
		return nil, badRequest("functions", "functions is the legacy function-calling API, which Strait does not translate; use tools")
	}
	if !isNull(in.FunctionCall) {
		return nil, badRequest("function_call", "function_call is the legacy function-calling API, which Strait does not translate; use tool_choice")
	}
	if others {
		t.dropUnknown(body, openAIFieldsHandled)
	}
	t.includeUsage = in.StreamOptions != nil && in.StreamOptions.IncludeUsage
	req := anRequest{Model: model, Stream: in.Stream, StopSequences: in.Stop, TopP: in.TopP}

	if in.N != nil && *in.N != 1 {
		return nil, badRequest("n", "n is %d, but the Anthropic API returns exactly one choice; set n to 1 or leave it out", *in.N)
	}
	maxTokens, err := t.maxTokens(&in)
	if err != nil {
		return nil, err
	}
	req.MaxTokens = maxTokens
	req.Temperature = in.Temperature
	if req.Temperature != nil && *req.Temperature > 1 {
		// OpenAI's range is 0 to 2, Anthropic's 0 to 1: clamp rather than
		// fail, as Anthropic's own OpenAI compatibility does.
		one := 1.0
		req.Temperature = &one
	}
	if in.User != "" {
		req.Metadata = &anMetadata{UserID: in.User}
	}
	if len(in.Messages) == 0 {
		return nil, badRequest("messages", "messages is missing or empty; send at least one message")
	}
	system, messages, err := t.openAIMessages(in.Messages)
	if err != nil {
		return nil, err
	}
	req.Messages = messages
	switch len(system) {
	case 0:
	case 1:
		req.System = system[0]
	default:
		blocks := make([]anBlock, len(system))
		for i, s := range system {
			blocks[i] = textBlock(s)
		}
		req.System = blocks
	}
	if err := t.openAITools(&in, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// maxTokens picks max_completion_tokens, then max_tokens, then the default,
// and applies the cap.
func (t *reqTranslation) maxTokens(in *oaRequestIn) (int, error) {
	n := 0
	for _, f := range []struct {
		name string
		v    *int
	}{{"max_completion_tokens", in.MaxCompletionTokens}, {"max_tokens", in.MaxTokens}} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 {
			return 0, badRequest(f.name, "%s is %d; it must be at least 1", f.name, *f.v)
		}
		n = *f.v
		break
	}
	if n == 0 {
		n = t.opt.DefaultMaxTokens
		if n <= 0 {
			n = DefaultMaxTokens
		}
	}
	if t.opt.MaxTokensCap > 0 && n > t.opt.MaxTokensCap {
		n = t.opt.MaxTokensCap
	}
	return n, nil
}

// openAIMessages converts the message list: system and developer messages
// are hoisted out; tool results become user messages of tool_result blocks;
// consecutive turns of the same role merge, since Anthropic wants them
// alternating.
func (t *reqTranslation) openAIMessages(msgs []oaMessage) (system []string, out []anMessage, err error) {
	blocksOf := make([][]anBlock, 0, len(msgs))
	roles := make([]string, 0, len(msgs))
	add := func(role string, blocks []anBlock) {
		if len(blocks) == 0 {
			return
		}
		if n := len(roles); n > 0 && roles[n-1] == role {
			blocksOf[n-1] = append(blocksOf[n-1], blocks...)
			return
		}
		roles = append(roles, role)
		blocksOf = append(blocksOf, blocks)
	}
	for i := range msgs {
		m := &msgs[i]
		at := "messages[" + itoa(i) + "]"
		if m.Name != "" {
			t.drop("messages[].name")
		}
		if !isNull(m.FunctionCall) {
			return nil, nil, badRequest(at+".function_call", "%s.function_call is the legacy function-calling API, which Strait does not translate; use tool_calls", at)
		}
		if !isNull(m.Audio) {
			return nil, nil, badRequest(at+".audio", "%s.audio refers to an OpenAI audio response, which the Anthropic API cannot take", at)
		}
		switch m.Role {
		case "system", "developer":
			text, err := textOnly(m.Content, at)
			if err != nil {
				return nil, nil, err
			}
			if text != "" {
				system = append(system, text)
			}
		case "user":
			blocks, err := t.openAIParts(m.Content, at, false)
			if err != nil {
				return nil, nil, err
			}
			add("user", blocks)
		case "assistant":
			blocks, err := t.openAIParts(m.Content, at, true)
			if err != nil {
				return nil, nil, err
			}
			if !isNull(m.ReasoningContent) {
				// A thinking block needs the provider's signature, which an
				// OpenAI client never had; Anthropic accepts history without it.
				t.drop("messages[].reasoning_content")
			}
			for j, tc := range m.ToolCalls {
				b, err := toolUseBlock(tc, at+".tool_calls["+itoa(j)+"]")
				if err != nil {
					return nil, nil, err
				}
				blocks = append(blocks, b)
			}
			add("assistant", blocks)
		case "tool":
			if m.ToolCallID == "" {
				return nil, nil, badRequest(at+".tool_call_id", "%s has role tool but no tool_call_id", at)
			}
			b := anBlock{Type: "tool_result", ToolUseID: m.ToolCallID}
			if !isNull(m.Content) {
				if m.Content[0] == '"' {
					var s string
					if err := decodeContent(m.Content, &s, at, "a string"); err != nil {
						return nil, nil, err
					}
					if s != "" {
						b.Content = s
					}
				} else {
					parts, err := t.openAIParts(m.Content, at, false)
					if err != nil {
						return nil, nil, err
					}
					if len(parts) > 0 {
						b.Content = parts
					}
				}
			}
			add("user", []anBlock{b})
		case "function":
			return nil, nil, badRequest(at+".role", "%s has role function, the legacy function-calling API, which Strait does not translate; use role tool", at)
		default:
			return nil, nil, badRequest(at+".role", "%s has role %q; want system, developer, user, assistant or tool", at, m.Role)
		}
	}
	out = make([]anMessage, len(roles))
	for i, role := range roles {
		blocks := blocksOf[i]
		if role == "user" {
			// Anthropic wants a message's tool_result blocks before anything
			// else in it.
			toolResultsFirst(blocks)
		}
		out[i] = anMessage{Role: role, Content: blocks}
		if len(blocks) == 1 && blocks[0].Type == "text" {
			out[i].Content = *blocks[0].Text
		}
	}
	return system, out, nil
}

// toolResultsFirst moves tool_result blocks to the front, keeping order.
func toolResultsFirst(blocks []anBlock) {
	n := 0
	for _, b := range blocks {
		if b.Type == "tool_result" {
			n++
		}
	}
	if n == 0 || n == len(blocks) {
		return
	}
	sorted := make([]anBlock, 0, len(blocks))
	for _, b := range blocks {
		if b.Type == "tool_result" {
			sorted = append(sorted, b)
		}
	}
	for _, b := range blocks {
		if b.Type != "tool_result" {
			sorted = append(sorted, b)
		}
	}
	copy(blocks, sorted)
}

// toolUseBlock converts an assistant's tool call. OpenAI's arguments are a
// JSON string, Anthropic's input an object.
func toolUseBlock(tc oaToolCall, at string) (anBlock, error) {
	if tc.Type != "" && tc.Type != "function" {
		return anBlock{}, badRequest(at+".type", "%s has type %q; only function tool calls have an Anthropic equivalent", at, tc.Type)
	}
	if tc.ID == "" {
		return anBlock{}, badRequest(at+".id", "%s has no id; the tool result that answers it needs one", at)
	}
	input, err := argumentsObject(tc.Function.Arguments)
	if err != nil {
		return anBlock{}, badRequest(at+".function.arguments", "%s.function.arguments is %s; Anthropic tool input must be a JSON object", at, err.Error())
	}
	return anBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: input}, nil
}

type argError string

func (e argError) Error() string { return string(e) }

// argumentsObject turns OpenAI tool-call arguments (a string holding a JSON
// object; an object is accepted too) into the object. Empty arguments are
// an empty object, as a tool without parameters gets "".
func argumentsObject(raw json.RawMessage) (json.RawMessage, error) {
	obj := []byte(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := unmarshal(raw, &s); err != nil {
			return nil, argError("not a valid JSON string")
		}
		obj = []byte(s)
	}
	obj = bytes.TrimSpace(obj)
	if len(obj) == 0 || string(obj) == "null" {
		return json.RawMessage(`{}`), nil
	}
	if obj[0] != '{' || !json.Valid(obj) {
		return nil, argError("not a JSON object")
	}
	return compactJSON(nil, obj), nil
}

// textOnly reads content that may only hold text: a string or text parts,
// joined with blank lines.
func textOnly(raw json.RawMessage, at string) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := decodeContent(raw, &s, at, "a string"); err != nil {
			return "", err
		}
		return s, nil
	}
	var parts []oaPart
	if err := decodeContent(raw, &parts, at, "a string or an array of content parts"); err != nil {
		return "", err
	}
	texts := make([]string, 0, len(parts))
	for j, p := range parts {
		if p.Type != "text" {
			return "", badRequest(sprintf("%s.content[%d].type", at, j), "%s.content[%d] has type %q; a system message may only hold text", at, j, p.Type)
		}
		if p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n\n"), nil
}

// openAIParts converts message content (a string or content parts) into
// Anthropic blocks, leaving out empty text, which Anthropic rejects.
func (t *reqTranslation) openAIParts(raw json.RawMessage, at string, assistant bool) ([]anBlock, error) {
	if isNull(raw) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := decodeContent(raw, &s, at, "a string"); err != nil {
			return nil, err
		}
		if s == "" {
			return nil, nil
		}
		return []anBlock{textBlock(s)}, nil
	}
	var parts []oaPart
	if err := decodeContent(raw, &parts, at, "a string or an array of content parts"); err != nil {
		return nil, err
	}
	blocks := make([]anBlock, 0, len(parts))
	for j, p := range parts {
		pat := at + ".content[" + itoa(j) + "]"
		switch {
		case p.Type == "text":
			if p.Text != "" {
				blocks = append(blocks, textBlock(p.Text))
			}
		case p.Type == "refusal" && assistant:
			if p.Refusal != "" {
				blocks = append(blocks, textBlock(p.Refusal))
			}
		case p.Type == "image_url" && !assistant:
			if p.ImageURL == nil {
				return nil, badRequest(pat+".image_url", "%s has type image_url but no image_url", pat)
			}
			if p.ImageURL.Detail != "" {
				t.drop("messages[].content[].image_url.detail")
			}
			src, err := imageSource(p.ImageURL.URL, pat)
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, anBlock{Type: "image", Source: src})
		case p.Type == "file" && !assistant:
			b, err := fileBlock(p, pat)
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, b)
		default:
			return nil, badRequest(pat+".type", "%s has type %q, which has no Anthropic equivalent in this position", pat, p.Type)
		}
	}
	return blocks, nil
}

// imageSource converts an OpenAI image URL: a data: URI becomes a base64
// source, an http(s) URL a url source.
func imageSource(url, at string) (*anSource, error) {
	if mediaType, data, ok := parseDataURI(url); ok {
		return &anSource{Type: "base64", MediaType: mediaType, Data: data}, nil
	}
	lower := strings.ToLower(url[:min(len(url), 8)])
	if strings.HasPrefix(lower, "https://") || strings.HasPrefix(lower, "http://") {
		return &anSource{Type: "url", URL: url}, nil
	}
	return nil, badRequest(at+".image_url.url", "%s.image_url.url must be an http(s) URL or a base64 data: URI", at)
}

// parseDataURI splits "data:<media type>;base64,<data>".
func parseDataURI(uri string) (mediaType, data string, ok bool) {
	rest, ok := strings.CutPrefix(uri, "data:")
	if !ok {
		return "", "", false
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return "", "", false
	}
	mediaType, ok = strings.CutSuffix(meta, ";base64")
	if !ok || mediaType == "" {
		return "", "", false
	}
	return mediaType, data, true
}

// fileBlock converts an OpenAI file part: inline PDF data becomes a base64
// document, inline plain text a text document. Uploaded file ids live in
// OpenAI's storage and cannot be sent to Anthropic.
func fileBlock(p oaPart, at string) (anBlock, error) {
	if p.File == nil {
		return anBlock{}, badRequest(at+".file", "%s has type file but no file", at)
	}
	if p.File.FileData == "" {
		return anBlock{}, badRequest(at+".file.file_id", "%s refers to an uploaded OpenAI file, which the Anthropic API cannot read; send the content inline as file_data", at)
	}
	mediaType, data, ok := parseDataURI(p.File.FileData)
	if !ok {
		return anBlock{}, badRequest(at+".file.file_data", "%s.file.file_data must be a base64 data: URI", at)
	}
	b := anBlock{Type: "document", Title: p.File.Filename}
	switch mediaType {
	case "application/pdf":
		b.Source = &anSource{Type: "base64", MediaType: mediaType, Data: data}
	case "text/plain":
		text, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return anBlock{}, badRequest(at+".file.file_data", "%s.file.file_data is not valid base64", at)
		}
		b.Source = &anSource{Type: "text", MediaType: mediaType, Data: string(text)}
	default:
		return anBlock{}, badRequest(at+".file.file_data", "%s is a %s file; the Anthropic API takes PDF and plain-text documents", at, mediaType)
	}
	return b, nil
}

// openAITools converts tools, tool_choice and parallel_tool_calls.
func (t *reqTranslation) openAITools(in *oaRequestIn, req *anRequest) error {
	for i, tool := range in.Tools {
		at := "tools[" + itoa(i) + "]"
		if tool.Type != "function" || tool.Function == nil {
			return badRequest(at+".type", "%s has type %q; only function tools have an Anthropic equivalent", at, tool.Type)
		}
		fn := tool.Function
		if fn.Name == "" {
			return badRequest(at+".function.name", "%s has no function name", at)
		}
		if !isNull(fn.Strict) {
			t.drop("tools[].function.strict")
		}
		schema := emptySchema
		if !isNull(fn.Parameters) {
			if fn.Parameters[0] != '{' {
				return badRequest(at+".function.parameters", "%s.function.parameters must be a JSON Schema object, not %s", at, kindOf(fn.Parameters))
			}
			schema = fn.Parameters
		}
		req.Tools = append(req.Tools, anTool{Name: fn.Name, Description: fn.Description, InputSchema: schema})
	}

	var choice string // Anthropic tool_choice type
	var name string
	if raw := in.ToolChoice; !isNull(raw) {
		var s string
		if unmarshal(raw, &s) == nil {
			switch s {
			case "auto":
				choice = "auto"
			case "required":
				choice = "any"
			case "none":
				choice = "none"
			default:
				return badRequest("tool_choice", "tool_choice %q is not one of auto, required, none", s)
			}
		} else {
			var named struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if err := unmarshal(raw, &named); err != nil || named.Type != "function" || named.Function.Name == "" {
				return badRequest("tool_choice", `tool_choice must be "auto", "required", "none" or {"type":"function","function":{"name":...}}`)
			}
			choice, name = "tool", named.Function.Name
		}
	}
	parallel := in.ParallelToolCalls
	noParallel := parallel != nil && !*parallel && choice != "none"
	if noParallel && choice == "" {
		choice = "auto"
	}
	if choice == "" {
		return nil
	}
	b := append([]byte(nil), `{"type":`...)
	b = jsonscan.AppendString(b, choice)
	if name != "" {
		b = append(b, `,"name":`...)
		b = jsonscan.AppendString(b, name)
	}
	if noParallel {
		b = append(b, `,"disable_parallel_tool_use":true`...)
	}
	req.ToolChoice = append(b, '}')
	return nil
}
