package translate

import (
	"encoding/json"
	"strings"

	"github.com/straitgw/strait/internal/llm/jsonscan"
)

// Anthropic response types: only the fields Strait translates.

type anResponse struct {
	ID         string        `json:"id"`
	Model      string        `json:"model"`
	Content    []anRespBlock `json:"content"`
	StopReason string        `json:"stop_reason"`
	Usage      *anUsage      `json:"usage"`
}

type anRespBlock struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
	Thinking string          `json:"thinking"`
}

type anUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

func (u *anUsage) usage() Usage {
	if u == nil {
		return Usage{}
	}
	return Usage{
		Input:      u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		Output:     u.OutputTokens,
		CacheRead:  u.CacheReadInputTokens,
		CacheWrite: u.CacheCreationInputTokens,
	}
}

// OpenAI response types: only the fields Strait translates.

type oaResponse struct {
	ID      string     `json:"id"`
	Model   string     `json:"model"`
	Choices []oaChoice `json:"choices"`
	Usage   *oaUsage   `json:"usage"`
}

type oaChoice struct {
	Message struct {
		Content          *string      `json:"content"`
		ReasoningContent string       `json:"reasoning_content"`
		Reasoning        string       `json:"reasoning"`
		Refusal          *string      `json:"refusal"`
		ToolCalls        []oaToolCall `json:"tool_calls"`
	} `json:"message"`
	FinishReason string `json:"finish_reason"`
}

type oaUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *oaUsage) usage() Usage {
	if u == nil {
		return Usage{}
	}
	us := Usage{Input: u.PromptTokens, Output: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		us.CacheRead = u.PromptTokensDetails.CachedTokens
	}
	return us
}

// badResponse is the error for a provider response that cannot be read.
func badResponse(format string, args ...any) *Error {
	return &Error{Status: 502, Kind: KindAPIError, Message: "the provider's response " + sprintf(format, args...)}
}

// undecodable is the error for a provider response body that json.Unmarshal
// refused with err; what names what the body should have been.
func undecodable(body []byte, err error, what string) *Error {
	path, msg := explainDecode(body, err, "the provider's response", "", "a JSON object")
	if path == "" {
		return &Error{Status: 502, Kind: KindAPIError, Message: msg}
	}
	return badResponse("is not %s: %s", what, msg)
}

// Response translates a non-streaming success response body from provider
// into client dialect. clientModel is the model name the client asked for,
// put into the response's model field so that a rewritten model name does
// not leak; the provider's model is kept if clientModel is "". Errors are
// *Error with Status 502.
func Response(provider, client Dialect, body []byte, clientModel string) ([]byte, error) {
	if !provider.valid() || !client.valid() {
		return nil, &Error{Status: 500, Kind: KindAPIError,
			Message: sprintf("translate: unknown dialect pair %q to %q", provider, client)}
	}
	if provider == client {
		if clientModel == "" {
			return body, nil
		}
		out, err := replaceModel(body, clientModel)
		if err != nil {
			return nil, badResponse("is not a JSON object")
		}
		return out, nil
	}
	if provider == Anthropic {
		var r anResponse
		if err := unmarshal(body, &r); err != nil {
			return nil, undecodable(body, err, "a valid Anthropic message")
		}
		return anthropicToOpenAIResponse(&r, clientModel), nil
	}
	var r oaResponse
	if err := unmarshal(body, &r); err != nil {
		return nil, undecodable(body, err, "a valid OpenAI chat completion")
	}
	return openAIToAnthropicResponse(&r, clientModel)
}

func anthropicToOpenAIResponse(r *anResponse, clientModel string) []byte {
	model := r.Model
	if clientModel != "" {
		model = clientModel
	}
	var text, thinking strings.Builder
	var calls []byte
	nCalls := 0
	for _, b := range r.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			thinking.WriteString(b.Thinking)
		case "tool_use":
			if nCalls > 0 {
				calls = append(calls, ',')
			}
			nCalls++
			calls = appendToolCall(calls, -1, b.ID, b.Name, argumentsString(b.Input))
		}
		// redacted_thinking is opaque, server tool blocks have no OpenAI
		// form: neither reaches an OpenAI client.
	}
	b := make([]byte, 0, 512+len(r.ID)+len(model)+text.Len()+thinking.Len()+len(calls))
	b = append(b, `{"id":`...)
	b = jsonscan.AppendString(b, openAIID(r.ID))
	b = append(b, `,"object":"chat.completion","created":`...)
	b = appendInt(b, int(now().Unix()))
	b = append(b, `,"model":`...)
	b = jsonscan.AppendString(b, model)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	if text.Len() > 0 || nCalls == 0 {
		b = jsonscan.AppendString(b, text.String())
	} else {
		b = append(b, "null"...)
	}
	if thinking.Len() > 0 {
		b = append(b, `,"reasoning_content":`...)
		b = jsonscan.AppendString(b, thinking.String())
	}
	if nCalls > 0 {
		b = append(b, `,"tool_calls":[`...)
		b = append(b, calls...)
		b = append(b, ']')
	}
	b = append(b, `,"refusal":null},"logprobs":null,"finish_reason":`...)
	b = jsonscan.AppendString(b, finishReason(r.StopReason, nCalls > 0))
	b = append(b, '}', ']')
	if r.Usage != nil {
		b = append(b, `,"usage":`...)
		b = appendOpenAIUsage(b, r.Usage.usage())
	}
	return append(b, '}')
}

// argumentsString is an Anthropic tool input as OpenAI arguments: the
// object's JSON text, "{}" if there is none.
func argumentsString(input json.RawMessage) string {
	if isNull(input) {
		return "{}"
	}
	return string(compactJSON(nil, input))
}

// appendToolCall appends one OpenAI tool call; index < 0 leaves out the
// index (non-streamed responses have none).
func appendToolCall(b []byte, index int, id, name, args string) []byte {
	b = append(b, '{')
	if index >= 0 {
		b = append(b, `"index":`...)
		b = appendInt(b, index)
		b = append(b, ',')
	}
	b = append(b, `"id":`...)
	b = jsonscan.AppendString(b, id)
	b = append(b, `,"type":"function","function":{"name":`...)
	b = jsonscan.AppendString(b, name)
	b = append(b, `,"arguments":`...)
	b = jsonscan.AppendString(b, args)
	return append(b, "}}"...)
}

// appendOpenAIUsage appends u as an OpenAI usage object.
func appendOpenAIUsage(b []byte, u Usage) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = appendInt(b, u.Input)
	b = append(b, `,"completion_tokens":`...)
	b = appendInt(b, u.Output)
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, u.Input+u.Output)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = appendInt(b, u.CacheRead)
	return append(b, "}}"...)
}

// appendAnthropicUsage appends u as an Anthropic usage object, where
// input_tokens excludes the cached tokens.
func appendAnthropicUsage(b []byte, u Usage) []byte {
	b = append(b, `{"input_tokens":`...)
	b = appendInt(b, max(u.Input-u.CacheRead-u.CacheWrite, 0))
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = appendInt(b, u.CacheWrite)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = appendInt(b, u.CacheRead)
	b = append(b, `,"output_tokens":`...)
	b = appendInt(b, u.Output)
	return append(b, '}')
}

func openAIToAnthropicResponse(r *oaResponse, clientModel string) ([]byte, error) {
	if len(r.Choices) == 0 {
		return nil, badResponse("has no choices")
	}
	c := &r.Choices[0] // the request asked for n = 1
	model := r.Model
	if clientModel != "" {
		model = clientModel
	}
	b := make([]byte, 0, 512)
	b = append(b, `{"id":`...)
	b = jsonscan.AppendString(b, anthropicID(r.ID))
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = jsonscan.AppendString(b, model)
	b = append(b, `,"content":[`...)
	n := 0
	sep := func() {
		if n > 0 {
			b = append(b, ',')
		}
		n++
	}
	reasoning := c.Message.ReasoningContent
	if reasoning == "" {
		reasoning = c.Message.Reasoning
	}
	if reasoning != "" {
		sep()
		b = append(b, `{"type":"thinking","thinking":`...)
		b = jsonscan.AppendString(b, reasoning)
		b = append(b, `,"signature":""}`...)
	}
	text := ""
	if c.Message.Content != nil {
		text = *c.Message.Content
	}
	if text == "" && c.Message.Refusal != nil {
		text = *c.Message.Refusal
	}
	if text != "" {
		sep()
		b = append(b, `{"type":"text","text":`...)
		b = jsonscan.AppendString(b, text)
		b = append(b, '}')
	}
	for i, tc := range c.Message.ToolCalls {
		input, err := argumentsObject(tc.Function.Arguments)
		if err != nil {
			return nil, badResponse("has tool call %d (%s) whose arguments are %s; Anthropic tool input must be a JSON object", i, tc.Function.Name, err.Error())
		}
		sep()
		b = append(b, `{"type":"tool_use","id":`...)
		b = jsonscan.AppendString(b, tc.ID)
		b = append(b, `,"name":`...)
		b = jsonscan.AppendString(b, tc.Function.Name)
		b = append(b, `,"input":`...)
		b = append(b, input...)
		b = append(b, '}')
	}
	b = append(b, `],"stop_reason":`...)
	b = jsonscan.AppendString(b, stopReason(c.FinishReason, len(c.Message.ToolCalls) > 0))
	b = append(b, `,"stop_sequence":null,"usage":`...)
	b = appendAnthropicUsage(b, r.Usage.usage())
	return append(b, '}'), nil
}

// ResponseUsage extracts the usage from a non-streaming response body of
// dialect d, in OpenAI's sense; zero if absent or unreadable.
func ResponseUsage(d Dialect, body []byte) Usage {
	var r struct {
		Usage json.RawMessage `json:"usage"`
	}
	if unmarshal(body, &r) != nil || isNull(r.Usage) {
		return Usage{}
	}
	if d == Anthropic {
		var u anUsage
		if unmarshal(r.Usage, &u) != nil {
			return Usage{}
		}
		return u.usage()
	}
	var u oaUsage
	if unmarshal(r.Usage, &u) != nil {
		return Usage{}
	}
	return u.usage()
}
