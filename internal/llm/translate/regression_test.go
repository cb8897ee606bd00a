package translate

// One test per translation bug other gateways shipped, named after the
// behaviour it keeps. The public issue is mentioned for context.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/straitgw/strait/internal/llm/jsonscan"
	"github.com/straitgw/strait/internal/llm/sse"
)

// anthropicSSE frames Anthropic events (JSON objects with a type).
func anthropicSSE(events ...string) []byte {
	var b bytes.Buffer
	for _, e := range events {
		var probe struct{ Type string }
		if err := json.Unmarshal([]byte(e), &probe); err != nil {
			panic(fmt.Sprintf("bad test event %s: %v", e, err))
		}
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", probe.Type, e)
	}
	return b.Bytes()
}

// openAISSE frames OpenAI chunks; "[DONE]" is sent as is.
func openAISSE(chunks ...string) []byte {
	var b bytes.Buffer
	for _, c := range chunks {
		fmt.Fprintf(&b, "data: %s\n\n", c)
	}
	return b.Bytes()
}

func oaChunkJSON(delta string, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}`
}

const (
	anStart      = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"usage":{"input_tokens":11,"output_tokens":1}}}`
	anStop       = `{"type":"message_stop"}`
	oaUsageChunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`
	oaDone       = `[DONE]`
	textOpen     = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
)

// clientEvents parses a client stream into (name, data) pairs.
func clientEvents(t *testing.T, out []byte) []sse.Event {
	t.Helper()
	return sdkEvents(t, out)
}

// LiteLLM #25321, #29491: tool input arrived in Anthropic clients as {}.
func TestStreamedToolArgumentsReachAnthropicClientsWhole(t *testing.T) {
	input := openAISSE(
		oaChunkJSON(`{"role":"assistant","content":null}`, ""),
		oaChunkJSON(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup","arguments":""}}]}`, ""),
		oaChunkJSON(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":"}}]}`, ""),
		oaChunkJSON(`{"tool_calls":[{"index":0,"function":{"arguments":"\"strait\",\"n\":3}"}}]}`, ""),
		oaChunkJSON(`{}`, "tool_calls"), oaUsageChunk, oaDone)
	out, _, endErr, _ := runStream(t, OpenAI, Anthropic, input, "")
	if endErr != nil {
		t.Fatal(endErr)
	}
	got := readAnthropicStream(t, out)
	if len(got.Tools) != 1 || got.Tools[0].Args != `{"q":"strait","n":3}` {
		t.Fatalf("tool calls as the Anthropic SDK reads them: %+v", got.Tools)
	}
}

// The same bug the other way: tool input reaching OpenAI clients.
func TestStreamedToolArgumentsReachOpenAIClientsWhole(t *testing.T) {
	input := anthropicSSE(anStart,
		`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"lookup","input":{}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"q\": \"strait\""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":", \"n\": 3}"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}`, anStop)
	out, _, endErr, _ := runStream(t, Anthropic, OpenAI, input, "")
	if endErr != nil {
		t.Fatal(endErr)
	}
	got := readOpenAIStream(t, out)
	if len(got.Tools) != 1 || got.Tools[0].Args != `{"q":"strait","n":3}` {
		t.Fatalf("tool calls as the OpenAI SDK reads them: %+v", got.Tools)
	}
}

// LiteLLM #29286: text arrived as empty input_json_delta events.
func TestTextBecomesTextDeltasAndEmptyContentSendsNothing(t *testing.T) {
	input := openAISSE(
		oaChunkJSON(`{"role":"assistant","content":""}`, ""),
		oaChunkJSON(`{"content":""}`, ""),
		oaChunkJSON(`{"content":"Hello"}`, ""),
		oaChunkJSON(`{"content":null}`, ""),
		oaChunkJSON(`{}`, "stop"), oaUsageChunk, oaDone)
	out, _, _, _ := runStream(t, OpenAI, Anthropic, input, "")
	var deltas []string
	for _, ev := range clientEvents(t, out) {
		if ev.Name == "content_block_delta" {
			deltas = append(deltas, string(ev.Data))
		}
	}
	want := `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`
	if len(deltas) != 1 || deltas[0] != want {
		t.Fatalf("content_block_delta events %q, want exactly %q", deltas, want)
	}
}

// LiteLLM #34692: end_turn was reported although the turn called tools.
func TestToolUseStopWinsOverEndTurn(t *testing.T) {
	t.Run("stream OpenAI to Anthropic", func(t *testing.T) {
		input := openAISSE(
			oaChunkJSON(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}`, ""),
			oaChunkJSON(`{}`, "stop"), oaUsageChunk, oaDone)
		out, _, _, _ := runStream(t, OpenAI, Anthropic, input, "")
		if got := readAnthropicStream(t, out).Stop; got != "tool_use" {
			t.Fatalf("stop_reason %q, want tool_use", got)
		}
	})
	t.Run("stream Anthropic to OpenAI", func(t *testing.T) {
		input := anthropicSSE(anStart,
			`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`, anStop)
		out, _, _, _ := runStream(t, Anthropic, OpenAI, input, "")
		if !bytes.Contains(out, []byte(`"finish_reason":"tool_calls"`)) || bytes.Contains(out, []byte(`"finish_reason":"stop"`)) {
			t.Fatalf("finish_reason is not tool_calls:\n%s", out)
		}
	})
	t.Run("response OpenAI to Anthropic", func(t *testing.T) {
		body := `{"id":"chatcmpl-1","choices":[{"message":{"content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}]}`
		out, err := Response(OpenAI, Anthropic, []byte(body), "")
		if err != nil {
			t.Fatal(err)
		}
		var m anthropic.Message
		if err := json.Unmarshal(out, &m); err != nil || m.StopReason != "tool_use" {
			t.Fatalf("stop_reason %q (%v), want tool_use", m.StopReason, err)
		}
	})
	t.Run("unknown reasons never pass through", func(t *testing.T) {
		if got := finishReason("brand_new_reason", false); got != "stop" {
			t.Errorf("finishReason(unknown) = %q", got)
		}
		if got := stopReason("brand_new_reason", false); got != "end_turn" {
			t.Errorf("stopReason(unknown) = %q", got)
		}
	})
}

// LiteLLM #32357, #33224: message_start repeated, thinking deltas inside a
// text block.
func TestOneMessageStartAndThinkingNeverInText(t *testing.T) {
	input := openAISSE(
		oaChunkJSON(`{"role":"assistant","content":""}`, ""),
		oaChunkJSON(`{"reasoning_content":"plan"}`, ""),
		oaChunkJSON(`{"content":"Hi"}`, ""),
		oaChunkJSON(`{"role":"assistant","reasoning_content":" more"}`, ""),
		oaChunkJSON(`{"content":" there"}`, ""),
		oaChunkJSON(`{}`, "stop"), oaUsageChunk, oaDone)
	out, _, _, _ := runStream(t, OpenAI, Anthropic, input, "")
	starts := 0
	kind := map[int]string{}
	for _, ev := range clientEvents(t, out) {
		var e struct {
			Type         string
			Index        int
			ContentBlock struct{ Type string } `json:"content_block"`
			Delta        struct{ Type string }
		}
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			t.Fatal(err)
		}
		switch e.Type {
		case "message_start":
			starts++
		case "content_block_start":
			kind[e.Index] = e.ContentBlock.Type
		case "content_block_delta":
			want := map[string]string{"text": "text_delta", "thinking": "thinking_delta"}[kind[e.Index]]
			if e.Delta.Type != want {
				t.Errorf("%s in a %q block: %s", e.Delta.Type, kind[e.Index], ev.Data)
			}
		}
	}
	if starts != 1 {
		t.Errorf("%d message_start events, want 1", starts)
	}
	got := readAnthropicStream(t, out)
	if got.Text != "Hi there" || got.Reasoning != "plan more" {
		t.Errorf("text %q reasoning %q", got.Text, got.Reasoning)
	}

	// And the other way: a repeated message_start does not repeat the role
	// chunk, and thinking never reaches content.
	input = anthropicSSE(anStart, anStart,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"plan"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`, anStop)
	out, _, _, _ = runStream(t, Anthropic, OpenAI, input, "")
	if n := bytes.Count(out, []byte(`"role":"assistant"`)); n != 1 {
		t.Errorf("%d role chunks, want 1", n)
	}
	if oa := readOpenAIStream(t, out); oa.Text != "" || oa.Reasoning != "plan" {
		t.Errorf("content %q reasoning %q; thinking must not be content", oa.Text, oa.Reasoning)
	}
}

// Bifrost #3511, #3512: every request with tools was rejected after
// OpenAI-to-Anthropic translation. The translated request must have the
// Anthropic shape the API requires.
func TestToolRequestsTranslateToValidAnthropicShape(t *testing.T) {
	body := `{"model":"gpt-4o","messages":[
		{"role":"user","content":"hi"},
		{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"a","arguments":"{\"x\":1}"}},{"id":"call_2","type":"function","function":{"name":"b","arguments":""}}]},
		{"role":"tool","tool_call_id":"call_1","content":"one"},
		{"role":"tool","tool_call_id":"call_2","content":""},
		{"role":"user","content":"thanks"}],
		"tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object","properties":{"x":{"type":"integer"}}},"strict":true}},
		         {"type":"function","function":{"name":"b"}}],
		"tool_choice":"auto","parallel_tool_calls":false}`
	tr, err := Request(OpenAI, Anthropic, []byte(body), "claude", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Tools    []map[string]json.RawMessage
		Messages []struct {
			Role    string
			Content json.RawMessage
		}
		ToolChoice map[string]any `json:"tool_choice"`
	}
	if err := json.Unmarshal(tr.Body, &req); err != nil {
		t.Fatal(err)
	}
	for i, tool := range req.Tools {
		for _, k := range []string{"type", "function", "parameters", "strict"} {
			if _, ok := tool[k]; ok {
				t.Errorf("tool %d keeps OpenAI field %q", i, k)
			}
		}
		var schema struct{ Type string }
		if json.Unmarshal(tool["input_schema"], &schema) != nil || schema.Type != "object" {
			t.Errorf("tool %d input_schema %s, want an object schema", i, tool["input_schema"])
		}
	}
	if req.ToolChoice["type"] != "auto" || req.ToolChoice["disable_parallel_tool_use"] != true {
		t.Errorf("tool_choice %v", req.ToolChoice)
	}
	roles := ""
	for _, m := range req.Messages {
		roles += m.Role[:1]
	}
	if roles != "uau" {
		t.Fatalf("roles %q, want user/assistant alternating (uau)", roles)
	}
	var last []struct{ Type string }
	if err := json.Unmarshal(req.Messages[2].Content, &last); err != nil {
		t.Fatal(err)
	}
	if len(last) != 3 || last[0].Type != "tool_result" || last[1].Type != "tool_result" || last[2].Type != "text" {
		t.Errorf("tool results must come first in their user message: %s", req.Messages[2].Content)
	}
	// The Anthropic SDK's own request type reads it.
	var params anthropic.MessageNewParams
	if err := json.Unmarshal(tr.Body, &params); err != nil {
		t.Errorf("anthropic.MessageNewParams cannot read the translated request: %v", err)
	}
}

// Bifrost PR #3441: only the first of several streamed tool calls kept, and
// blocks overlapped.
func TestParallelStreamedToolCallsEachGetTheirOwnBlock(t *testing.T) {
	input := openAISSE(
		oaChunkJSON(`{"role":"assistant","content":"Checking."}`, ""),
		oaChunkJSON(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"a","arguments":"{\"n\":1}"}}]}`, ""),
		oaChunkJSON(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"b","arguments":""}}]}`, ""),
		oaChunkJSON(`{"tool_calls":[{"index":1,"function":{"arguments":"{\"n\":2}"}}]}`, ""),
		oaChunkJSON(`{"tool_calls":[{"index":2,"id":"call_3","type":"function","function":{"name":"c","arguments":"{\"n\":3}"}}]}`, ""),
		oaChunkJSON(`{}`, "tool_calls"), oaUsageChunk, oaDone)
	out, _, _, _ := runStream(t, OpenAI, Anthropic, input, "")
	open := -1
	for _, ev := range clientEvents(t, out) {
		var e struct {
			Type  string
			Index int
		}
		_ = json.Unmarshal(ev.Data, &e)
		switch e.Type {
		case "content_block_start":
			if open >= 0 {
				t.Fatalf("block %d starts while block %d is open", e.Index, open)
			}
			open = e.Index
		case "content_block_delta":
			if e.Index != open {
				t.Fatalf("delta for block %d while block %d is open", e.Index, open)
			}
		case "content_block_stop":
			if e.Index != open {
				t.Fatalf("stop for block %d while block %d is open", e.Index, open)
			}
			open = -1
		}
	}
	got := readAnthropicStream(t, out)
	want := []toolCall{{"call_1", "a", `{"n":1}`}, {"call_2", "b", `{"n":2}`}, {"call_3", "c", `{"n":3}`}}
	if fmt.Sprint(got.Tools) != fmt.Sprint(want) || got.Text != "Checking." {
		t.Fatalf("got text %q tools %+v, want %+v", got.Text, got.Tools, want)
	}
}

// Portkey #1399: the first OpenAI chunk had no role.
func TestFirstOpenAIChunkCarriesTheRole(t *testing.T) {
	for name, input := range map[string][]byte{
		"with message_start": anthropicSSE(anStart, textOpen,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`),
		"message_start missing": anthropicSSE(textOpen,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`),
	} {
		t.Run(name, func(t *testing.T) {
			out, _, _, _ := runStream(t, Anthropic, OpenAI, input, "m")
			evs := clientEvents(t, out)
			var first openai.ChatCompletionChunk
			if len(evs) == 0 || first.UnmarshalJSON(evs[0].Data) != nil {
				t.Fatalf("no first chunk in %s", out)
			}
			if len(first.Choices) != 1 || first.Choices[0].Delta.Role != "assistant" {
				t.Fatalf("first chunk %s has no assistant role", evs[0].Data)
			}
		})
	}
}

// Portkey #1259: usage missing from translated streams.
func TestStreamsCarryUsage(t *testing.T) {
	t.Run("Anthropic provider, OpenAI client", func(t *testing.T) {
		input := anthropicSSE(
			`{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":7,"output_tokens":1}}}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":42}}`, anStop)
		out, s, _, _ := runStream(t, Anthropic, OpenAI, input, "")
		u := readOpenAIStream(t, out).Usage
		if u != (Usage{Input: 112, Output: 42, CacheRead: 100}) {
			t.Errorf("client usage %+v, want prompt 112 (5 + 100 cached + 7 written), completion 42, cached 100", u)
		}
		if s.Usage() != (Usage{Input: 112, Output: 42, CacheRead: 100, CacheWrite: 7}) {
			t.Errorf("Stream.Usage %+v", s.Usage())
		}
	})
	t.Run("OpenAI provider, Anthropic client", func(t *testing.T) {
		input := openAISSE(oaChunkJSON(`{"content":"x"}`, ""), oaChunkJSON(`{}`, "stop"),
			`{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":100}}}`, oaDone)
		out, s, _, _ := runStream(t, OpenAI, Anthropic, input, "")
		var delta struct {
			Usage struct {
				InputTokens          int `json:"input_tokens"`
				CacheReadInputTokens int `json:"cache_read_input_tokens"`
				OutputTokens         int `json:"output_tokens"`
			}
		}
		for _, ev := range clientEvents(t, out) {
			if ev.Name == "message_delta" {
				_ = json.Unmarshal(ev.Data, &delta)
			}
		}
		if delta.Usage.InputTokens != 20 || delta.Usage.CacheReadInputTokens != 100 || delta.Usage.OutputTokens != 8 {
			t.Errorf("message_delta usage %+v, want input 20 (120 - 100 cached), cache read 100, output 8", delta.Usage)
		}
		if s.Usage() != (Usage{Input: 120, Output: 8, CacheRead: 100}) {
			t.Errorf("Stream.Usage %+v", s.Usage())
		}
	})
	t.Run("the OpenAI provider is asked for usage", func(t *testing.T) {
		tr, err := Request(Anthropic, OpenAI, []byte(`{"model":"c","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"x"}]}`), "gpt", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(tr.Body, []byte(`"stream_options":{"include_usage":true}`)) {
			t.Errorf("no include_usage in %s", tr.Body)
		}
	})
}

// Portkey PR #949: Anthropic `event: error` was never parsed, so a failed
// stream looked like a short success.
func TestAnthropicErrorEventsReachTheClient(t *testing.T) {
	input := anthropicSSE(anStart, textOpen,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	for _, to := range []Dialect{OpenAI, Anthropic} {
		t.Run(string(to), func(t *testing.T) {
			out, _, endErr, eventErr := runStream(t, Anthropic, to, input, "")
			var pe ProviderError
			if eventErr != nil || !errors.As(endErr, &pe) || pe.Err.Kind != KindOverloaded {
				t.Fatalf("Event error %v, End error %v; want End to report the overloaded error", eventErr, endErr)
			}
			got := readStream(t, to, out)
			if got.Error != "Overloaded" || got.Complete {
				t.Fatalf("client saw error %q, complete %v; want the error and no terminator", got.Error, got.Complete)
			}
			if n := bytes.Count(out, []byte("Overloaded")); n != 1 {
				t.Errorf("the error was written %d times, want once", n)
			}
		})
	}
}

// A stream must reach the client event by event, not at the end.
func TestEventsAreForwardedAsTheyArrive(t *testing.T) {
	cases := []struct {
		from, to Dialect
		events   []sse.Event
	}{
		// (A text block's start has no OpenAI form, so it is left out.)
		{Anthropic, OpenAI, mustEvents(t, anthropicSSE(anStart,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"b"}}`,
			`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`,
			`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{"}}`))},
		{OpenAI, Anthropic, mustEvents(t, openAISSE(oaChunkJSON(`{"role":"assistant","content":"a"}`, ""),
			oaChunkJSON(`{"content":"b"}`, ""),
			oaChunkJSON(`{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":"{"}}]}`, ""),
			oaChunkJSON(`{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}`, "")))},
	}
	for _, c := range cases {
		var buf bytes.Buffer
		w := sse.NewWriter(&buf)
		s := NewStream(c.from, c.to, "")
		for i, ev := range c.events {
			before := buf.Len()
			if err := s.Event(ev, w); err != nil {
				t.Fatal(err)
			}
			if buf.Len() == before {
				t.Errorf("%s to %s: event %d (%s) produced nothing for the client yet", c.from, c.to, i, ev.Data)
			}
		}
	}
}

func mustEvents(t *testing.T, stream []byte) []sse.Event { return sdkEvents(t, stream) }

// A same-dialect stream is forwarded byte for byte, up to its terminator.
func TestPassThroughForwardsRawBytesAndDropsJunk(t *testing.T) {
	body := "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"the \\\"error\\\": {x}\"}}]}\r\n\r\n" +
		": keep-alive\r\n\r\n" +
		"data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\r\n\r\n" +
		"data: [DONE]\r\n\r\n"
	input := body + "data: late\r\n\r\n"
	out, s, endErr, _ := runStream(t, OpenAI, OpenAI, []byte(input), "ignored")
	if string(out) != body {
		t.Errorf("forwarded %q, want %q", out, body)
	}
	if endErr != nil || !s.Done() || s.Usage() != (Usage{Input: 3, Output: 2}) {
		t.Errorf("End %v, Done %v, Usage %+v", endErr, s.Done(), s.Usage())
	}
}

func TestErrorBodies(t *testing.T) {
	tests := []struct {
		kind            string
		status          int
		anthropicType   string
		openAIType      string
		openAIStatus    int
		anthropicStatus int
	}{
		{KindInvalidRequest, 400, "invalid_request_error", "invalid_request_error", 400, 400},
		{KindAuthentication, 401, "authentication_error", "authentication_error", 401, 401},
		{KindPermission, 403, "permission_error", "permission_error", 403, 403},
		{KindNotFound, 404, "not_found_error", "not_found_error", 404, 404},
		{KindRequestTooLarge, 413, "request_too_large", "invalid_request_error", 413, 413},
		{KindRateLimit, 429, "rate_limit_error", "rate_limit_error", 429, 429},
		{KindAPIError, 500, "api_error", "server_error", 500, 500},
		{KindOverloaded, 529, "overloaded_error", "server_error", 503, 529},
		{KindTimeout, 504, "timeout_error", "timeout_error", 504, 504},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			e := &Error{Status: tt.status, Kind: tt.kind, Message: `bad "thing"`, Param: "messages"}
			status, body := ErrorBody(Anthropic, e)
			var an struct {
				Type  string
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal(body, &an); err != nil || status != tt.anthropicStatus || an.Type != "error" ||
				an.Error.Type != tt.anthropicType || an.Error.Message != `bad "thing"` {
				t.Errorf("Anthropic: %d %s (%v)", status, body, err)
			}
			status, body = ErrorBody(OpenAI, e)
			var oa struct {
				Error struct {
					Message, Type string
					Param         *string
				}
			}
			if err := json.Unmarshal(body, &oa); err != nil || status != tt.openAIStatus ||
				oa.Error.Type != tt.openAIType || oa.Error.Message != `bad "thing"` || oa.Error.Param == nil || *oa.Error.Param != "messages" {
				t.Errorf("OpenAI: %d %s (%v)", status, body, err)
			}
			// A provider's error body reads back as the same kind.
			for _, d := range []Dialect{Anthropic, OpenAI} {
				st, b := ErrorBody(d, e)
				if got := ParseError(d, st, b); got.Kind != tt.kind || got.Message != e.Message {
					t.Errorf("ParseError(%s, %d, %s) = %+v", d, st, b, got)
				}
			}
		})
	}
	t.Run("a kind-less error takes its kind from the status", func(t *testing.T) {
		status, body := ErrorBody(Anthropic, &Error{Status: 429, Message: "slow down"})
		if status != 429 || !bytes.Contains(body, []byte(`"rate_limit_error"`)) {
			t.Errorf("%d %s", status, body)
		}
	})
}

func TestParseErrorOfUnexpectedBodies(t *testing.T) {
	tests := []struct {
		name    string
		d       Dialect
		status  int
		body    string
		kind    string
		status2 int
		message string
	}{
		{"anthropic type wins over status", Anthropic, 400, `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`, KindOverloaded, 400, "busy"},
		{"openai quota", OpenAI, 429, `{"error":{"message":"quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`, KindBilling, 429, "quota"},
		{"html from a proxy", OpenAI, 502, "<html>\n<body>Bad   gateway</body></html>", KindAPIError, 502, "<html> <body>Bad gateway</body></html>"},
		{"empty body", Anthropic, 503, "", KindOverloaded, 503, "Service Unavailable"},
		{"string error", OpenAI, 400, `{"error":"model not found"}`, KindInvalidRequest, 400, "model not found"},
		{"success status", OpenAI, 200, `{}`, KindAPIError, 502, "Bad Gateway"},
		{"gateway timeout", Anthropic, 504, `upstream timed out`, KindTimeout, 504, "upstream timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ParseError(tt.d, tt.status, []byte(tt.body))
			if e.Kind != tt.kind || e.Status != tt.status2 || e.Message != tt.message {
				t.Errorf("got %+v, want kind %s status %d message %q", e, tt.kind, tt.status2, tt.message)
			}
		})
	}
	t.Run("long bodies are bounded", func(t *testing.T) {
		e := ParseError(OpenAI, 500, []byte(strings.Repeat("é", 5000)))
		if len(e.Message) > maxErrorText+len("…") || !strings.HasSuffix(e.Message, "…") || !json.Valid(jsonscan.AppendString(nil, e.Message)) {
			t.Errorf("message of %d bytes", len(e.Message))
		}
	})
}

func TestTruncationErrorsName(t *testing.T) {
	s := NewStream(OpenAI, Anthropic, "")
	var buf bytes.Buffer
	timeout := fmt.Errorf("read: %w", errDeadline{})
	err := s.End(sse.NewWriter(&buf), timeout)
	if !errors.Is(err, ErrStreamTruncated) || !errors.Is(err, timeout) {
		t.Errorf("End = %v; want it to wrap ErrStreamTruncated and the cause", err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"timeout_error"`)) {
		t.Errorf("a timed-out read should reach the client as a timeout: %s", buf.Bytes())
	}
	if err2 := s.End(sse.NewWriter(&buf), nil); err2 == nil {
		t.Error("a second End forgot the failure")
	}
}

type errDeadline struct{}

func (errDeadline) Error() string   { return "i/o timeout" }
func (errDeadline) Timeout() bool   { return true }
func (errDeadline) Temporary() bool { return true }

// Translated non-streamed responses are read correctly by the SDKs.
func TestClientLibrariesReadTranslatedResponses(t *testing.T) {
	deterministic(t)
	anBody := `{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"Hi"},{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":[1,2]}}],"stop_reason":"tool_use","usage":{"input_tokens":3,"cache_read_input_tokens":10,"output_tokens":4}}`
	out, err := Response(Anthropic, OpenAI, []byte(anBody), "mine")
	if err != nil {
		t.Fatal(err)
	}
	var cc openai.ChatCompletion
	if err := json.Unmarshal(out, &cc); err != nil {
		t.Fatal(err)
	}
	m := cc.Choices[0].Message
	if cc.Model != "mine" || m.Content != "Hi" || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Arguments != `{"a":[1,2]}` ||
		cc.Choices[0].FinishReason != "tool_calls" || cc.Usage.PromptTokens != 13 || cc.Usage.PromptTokensDetails.CachedTokens != 10 {
		t.Errorf("OpenAI SDK reads %s", out)
	}
	if u := ResponseUsage(Anthropic, []byte(anBody)); u != (Usage{Input: 13, Output: 4, CacheRead: 10}) {
		t.Errorf("ResponseUsage = %+v", u)
	}

	back, err := Response(OpenAI, Anthropic, out, "")
	if err != nil {
		t.Fatal(err)
	}
	var msg anthropic.Message
	if err := json.Unmarshal(back, &msg); err != nil {
		t.Fatal(err)
	}
	if msg.ID != "msg_1" || len(msg.Content) != 3 || msg.Content[2].ID != "toolu_1" || string(msg.Content[2].Input) != `{"a":[1,2]}` ||
		msg.StopReason != "tool_use" || msg.Usage.InputTokens != 3 || msg.Usage.CacheReadInputTokens != 10 {
		t.Errorf("round trip gives %s", back)
	}
	if u := ResponseUsage(OpenAI, out); u != (Usage{Input: 13, Output: 4, CacheRead: 10}) {
		t.Errorf("ResponseUsage = %+v", u)
	}
}

// Translating a request there and back keeps what both dialects can say.
func TestRequestRoundTrip(t *testing.T) {
	body := `{"model":"gpt-4o","messages":[{"role":"system","content":"S"},{"role":"user","content":"Q"},
		{"role":"assistant","content":"A","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"R"}],
		"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}],
		"tool_choice":{"type":"function","function":{"name":"f"}},"max_completion_tokens":77,"stop":["X"],"user":"u","temperature":0.5,"stream":true}`
	there, err := Request(OpenAI, Anthropic, []byte(body), "claude", Options{})
	if err != nil {
		t.Fatal(err)
	}
	back, err := Request(Anthropic, OpenAI, there.Body, "gpt-4o", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var orig, got map[string]any
	_ = json.Unmarshal([]byte(body), &orig)
	_ = json.Unmarshal(back.Body, &got)
	delete(got, "stream_options") // added for the stream's usage
	for k, v := range orig {
		if fmt.Sprint(got[k]) != fmt.Sprint(v) {
			t.Errorf("%s: %v, want %v", k, got[k], v)
		}
	}
	if len(there.Dropped)+len(back.Dropped) != 0 {
		t.Errorf("dropped %v and %v", there.Dropped, back.Dropped)
	}
}
