package llmsdk_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/llm/translate"
)

// received is a request as a provider got it, read in the provider's
// dialect and put in neutral terms, so that one assertion covers both
// dialects: whatever the client's dialect, each part of its request must
// be where the provider's dialect wants it.
type received struct {
	model        string
	stream       bool
	includeUsage bool  // OpenAI stream_options.include_usage
	maxTokens    int64 // OpenAI max_completion_tokens (or max_tokens), Anthropic max_tokens; 0 if absent
	// system holds the system prompt's texts from where the dialect keeps
	// them: OpenAI system and developer messages ahead of the conversation,
	// the top-level system of Anthropic.
	system []string
	// misplacedSystem is set when a system prompt was found elsewhere: an
	// OpenAI system message after the conversation started, or an Anthropic
	// message with the role system.
	misplacedSystem bool
	// messages is the conversation without the system prompt.
	messages []message
}

// message is one message of the conversation.
type message struct {
	role string // user, assistant, or tool (an OpenAI tool result)
	// kinds are the types of the message's parts (OpenAI) or blocks
	// (Anthropic) in order, in neutral names: text, image, tool_use,
	// tool_result; a plain string content counts as one text.
	kinds   []string
	text    string // the text parts, joined
	images  []inlineImage
	calls   []toolCall
	results []toolResult
}

// inlineImage is an image sent in the request body.
type inlineImage struct{ mediaType, data string }

// toolCall is a tool call; args is compact JSON.
type toolCall struct{ id, name, args string }

type toolResult struct{ id, content string }

// calls returns the tool calls of the conversation, in order.
func (r received) calls() []toolCall {
	var out []toolCall
	for _, m := range r.messages {
		out = append(out, m.calls...)
	}
	return out
}

// results returns the tool results of the conversation, in order.
func (r received) results() []toolResult {
	var out []toolResult
	for _, m := range r.messages {
		out = append(out, m.results...)
	}
	return out
}

// roles returns the role of each message.
func (r received) roles() []string {
	out := make([]string, len(r.messages))
	for i, m := range r.messages {
		out[i] = m.role
	}
	return out
}

// parseReceived reads a provider request body of dialect d.
func parseReceived(t *testing.T, d translate.Dialect, body []byte) received {
	t.Helper()
	if d == translate.Anthropic {
		return parseAnthropicRequest(t, body)
	}
	return parseOpenAIRequest(t, body)
}

func parseOpenAIRequest(t *testing.T, body []byte) received {
	t.Helper()
	var in struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		MaxTokens           *int64 `json:"max_tokens"`
		MaxCompletionTokens *int64 `json:"max_completion_tokens"`
		Messages            []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		t.Fatalf("the OpenAI provider got a body that is not a chat completion request: %v\n%s", err, body)
	}
	r := received{model: in.Model, stream: in.Stream}
	if in.StreamOptions != nil {
		r.includeUsage = in.StreamOptions.IncludeUsage
	}
	switch {
	case in.MaxCompletionTokens != nil:
		r.maxTokens = *in.MaxCompletionTokens
	case in.MaxTokens != nil:
		r.maxTokens = *in.MaxTokens
	}
	for _, m := range in.Messages {
		msg := message{role: m.Role}
		readOpenAIContent(t, m.Content, &msg)
		switch m.Role {
		case "system", "developer":
			if len(r.messages) > 0 {
				r.misplacedSystem = true
			}
			r.system = append(r.system, msg.text)
			continue
		case "tool":
			msg.results = []toolResult{{id: m.ToolCallID, content: msg.text}}
			msg.kinds, msg.text = []string{"tool_result"}, ""
		}
		for _, tc := range m.ToolCalls {
			if tc.Type != "function" {
				t.Errorf("the OpenAI provider got a tool call of type %q, want function", tc.Type)
			}
			msg.calls = append(msg.calls, toolCall{id: tc.ID, name: tc.Function.Name, args: compactJSON(t, tc.Function.Arguments)})
			msg.kinds = append(msg.kinds, "tool_use")
		}
		r.messages = append(r.messages, msg)
	}
	return r
}

// readOpenAIContent reads message content: a string, null, or content parts.
func readOpenAIContent(t *testing.T, raw json.RawMessage, msg *message) {
	t.Helper()
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("OpenAI content %s: %v", raw, err)
		}
		msg.text, msg.kinds = s, []string{"text"}
		return
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		t.Fatalf("OpenAI content is neither a string nor content parts: %v\n%s", err, raw)
	}
	var texts []string
	for _, p := range parts {
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
			msg.kinds = append(msg.kinds, "text")
		case "image_url":
			if p.ImageURL == nil {
				t.Fatalf("an OpenAI image_url part without image_url: %s", raw)
			}
			rest, ok := strings.CutPrefix(p.ImageURL.URL, "data:")
			meta, data, ok2 := strings.Cut(rest, ",")
			mediaType, ok3 := strings.CutSuffix(meta, ";base64")
			if !ok || !ok2 || !ok3 {
				t.Fatalf("an OpenAI image URL that is not a base64 data: URI: %.80q", p.ImageURL.URL)
			}
			msg.images = append(msg.images, inlineImage{mediaType: mediaType, data: data})
			msg.kinds = append(msg.kinds, "image")
		default:
			msg.kinds = append(msg.kinds, p.Type)
		}
	}
	msg.text = strings.Join(texts, "")
}

func parseAnthropicRequest(t *testing.T, body []byte) received {
	t.Helper()
	var in struct {
		Model     string          `json:"model"`
		Stream    bool            `json:"stream"`
		MaxTokens *int64          `json:"max_tokens"`
		System    json.RawMessage `json:"system"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		t.Fatalf("the Anthropic provider got a body that is not a messages request: %v\n%s", err, body)
	}
	r := received{model: in.Model, stream: in.Stream}
	if in.MaxTokens != nil {
		r.maxTokens = *in.MaxTokens
	}
	if len(in.System) > 0 && string(in.System) != "null" {
		var sys message
		readAnthropicContent(t, in.System, &sys)
		for i, k := range sys.kinds {
			if k != "text" {
				t.Errorf("the Anthropic provider got a system prompt whose block %d is %q, want text only", i, k)
			}
		}
		r.system = []string{sys.text}
	}
	for _, m := range in.Messages {
		msg := message{role: m.Role}
		readAnthropicContent(t, m.Content, &msg)
		if m.Role == "system" {
			r.misplacedSystem = true
		}
		r.messages = append(r.messages, msg)
	}
	return r
}

// readAnthropicContent reads content: a string or content blocks.
func readAnthropicContent(t *testing.T, raw json.RawMessage, msg *message) {
	t.Helper()
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("Anthropic content %s: %v", raw, err)
		}
		msg.text, msg.kinds = s, []string{"text"}
		return
	}
	var blocks []struct {
		Type   string `json:"type"`
		Text   string `json:"text"`
		Source *struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
		} `json:"source"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		t.Fatalf("Anthropic content is neither a string nor blocks: %v\n%s", err, raw)
	}
	var texts []string
	for _, b := range blocks {
		msg.kinds = append(msg.kinds, b.Type)
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "image":
			if b.Source == nil || b.Source.Type != "base64" {
				t.Fatalf("an Anthropic image block without a base64 source: %s", raw)
			}
			msg.images = append(msg.images, inlineImage{mediaType: b.Source.MediaType, data: b.Source.Data})
		case "tool_use":
			msg.calls = append(msg.calls, toolCall{id: b.ID, name: b.Name, args: compactJSON(t, string(b.Input))})
		case "tool_result":
			var inner message
			if len(b.Content) > 0 {
				readAnthropicContent(t, b.Content, &inner)
			}
			msg.results = append(msg.results, toolResult{id: b.ToolUseID, content: inner.text})
		}
	}
	msg.text = strings.Join(texts, "")
}

// compactJSON returns the JSON text s without insignificant whitespace, so
// that arguments compare equal however a client or a gateway spaced them.
func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("not JSON: %q: %v", s, err)
	}
	return b.String()
}
