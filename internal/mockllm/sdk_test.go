package mockllm_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/straitgw/strait/internal/mockllm"
	"github.com/straitgw/strait/internal/testkit"
)

// The official SDKs are the judges of each dialect: if they parse an
// answer and accumulate a stream into the expected message, tool call and
// usage, the mock speaks the dialect. Each test runs over HTTP/1.1,
// cleartext HTTP/2 (prior knowledge) and HTTP/2 over TLS.

type target struct {
	name   string
	s      *mockllm.Server
	url    string
	client *http.Client
	proto  string
}

func targets(t *testing.T, opt mockllm.Options) []target {
	t.Helper()
	s, url := start(t, opt)

	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)

	ca := testkit.NewCA(t)
	ts := mockllm.New(opt)
	turl, err := ts.StartTLS("127.0.0.1:0", ca.ServerTLS(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	h2 := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}, ForceAttemptHTTP2: true}
	h1 := &http.Transport{}
	t.Cleanup(func() {
		for _, tr := range []*http.Transport{h1, h2c, h2} {
			tr.CloseIdleConnections()
		}
	})
	return []target{
		{"http1", s, url, &http.Client{Transport: h1, Timeout: 30 * time.Second}, "HTTP/1.1"},
		{"h2c", s, url, &http.Client{Transport: h2c, Timeout: 30 * time.Second}, "HTTP/2.0"},
		{"h2-tls", ts, turl, &http.Client{Transport: h2, Timeout: 30 * time.Second}, "HTTP/2.0"},
	}
}

// checkProto fails if the last request did not use tg's protocol.
func (tg target) checkProto(t *testing.T) {
	t.Helper()
	last, ok := tg.s.LastRequest()
	if !ok || last.Proto != tg.proto {
		t.Errorf("last request used %q, want %q", last.Proto, tg.proto)
	}
}

func (tg target) openai() openai.Client {
	return openai.NewClient(openaioption.WithBaseURL(tg.url+"/v1/"), openaioption.WithAPIKey("test-key"),
		openaioption.WithHTTPClient(tg.client), openaioption.WithMaxRetries(0))
}

func (tg target) anthropic() anthropic.Client {
	return anthropic.NewClient(anthropicoption.WithBaseURL(tg.url+"/"), anthropicoption.WithAPIKey("test-key"),
		anthropicoption.WithHTTPClient(tg.client), anthropicoption.WithMaxRetries(0))
}

const (
	systemPrompt = "You are terse."
	userPrompt   = "Hello there, how are you today?"
)

func TestOpenAISDKText(t *testing.T) {
	for _, tg := range targets(t, mockllm.Options{Latency: 20 * time.Millisecond, Deltas: 5}) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := context.Background()
			c := tg.openai()
			text := tg.s.Text()
			params := openai.ChatCompletionNewParams{
				Model:    "gpt-4o-mini",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(systemPrompt), openai.UserMessage(userPrompt)},
			}
			in := tokens(len(systemPrompt) + len(userPrompt))
			out := tokens(len(text))

			resp, err := c.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			tg.checkProto(t)
			if !strings.HasPrefix(resp.ID, "chatcmpl-") || resp.Object != "chat.completion" || resp.Model != "gpt-4o-mini" || resp.Created == 0 {
				t.Errorf("envelope: id %q object %q model %q created %d", resp.ID, resp.Object, resp.Model, resp.Created)
			}
			if len(resp.Choices) != 1 {
				t.Fatalf("%d choices, want 1", len(resp.Choices))
			}
			ch := resp.Choices[0]
			if ch.Message.Content != text || ch.Message.Role != "assistant" || ch.FinishReason != "stop" {
				t.Errorf("choice: content %q role %q finish %q; want %q, assistant, stop", ch.Message.Content, ch.Message.Role, ch.FinishReason, text)
			}
			u := resp.Usage
			if u.PromptTokens != int64(in) || u.CompletionTokens != int64(out) || u.TotalTokens != int64(in+out) {
				t.Errorf("usage %d+%d=%d, want %d+%d=%d", u.PromptTokens, u.CompletionTokens, u.TotalTokens, in, out, in+out)
			}

			// Streaming, with the usage chunk.
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			stream := c.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			var chunks []openai.ChatCompletionChunk
			for stream.Next() {
				chunk := stream.Current()
				chunks = append(chunks, chunk)
				if !acc.AddChunk(chunk) {
					t.Fatalf("the accumulator rejected chunk %d: %s", len(chunks), chunk.RawJSON())
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			tg.checkProto(t)
			// role chunk, 5 deltas, finish chunk, usage chunk
			if len(chunks) != 8 {
				t.Fatalf("%d chunks, want 8", len(chunks))
			}
			if chunks[0].Choices[0].Delta.Role != "assistant" {
				t.Errorf("first chunk's delta has role %q, want assistant", chunks[0].Choices[0].Delta.Role)
			}
			for i, ch := range chunks[:7] {
				if ch.Object != "chat.completion.chunk" || ch.ID != chunks[0].ID {
					t.Errorf("chunk %d: object %q id %q", i, ch.Object, ch.ID)
				}
				if !ch.JSON.Usage.Valid() && !strings.Contains(ch.RawJSON(), `"usage":null`) {
					t.Errorf("chunk %d lacks usage:null with include_usage on: %s", i, ch.RawJSON())
				}
			}
			last := chunks[7]
			if len(last.Choices) != 0 || last.Usage.TotalTokens != int64(in+out) {
				t.Errorf("last chunk: %d choices, usage %+v; want none and the usage", len(last.Choices), last.Usage)
			}
			got := acc.ChatCompletion
			if got.Choices[0].Message.Content != text || got.Choices[0].FinishReason != "stop" {
				t.Errorf("accumulated %q (%q), want %q (stop)", got.Choices[0].Message.Content, got.Choices[0].FinishReason, text)
			}
			if got.Usage.PromptTokens != u.PromptTokens || got.Usage.CompletionTokens != u.CompletionTokens || got.Usage.TotalTokens != u.TotalTokens {
				t.Errorf("stream usage %+v differs from the JSON answer's %+v", got.Usage, u)
			}

			// Without include_usage no chunk mentions usage.
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
			stream = c.Chat.Completions.NewStreaming(ctx, params)
			n := 0
			for stream.Next() {
				n++
				if raw := stream.Current().RawJSON(); strings.Contains(raw, "usage") {
					t.Errorf("chunk without include_usage mentions usage: %s", raw)
				}
			}
			if err := stream.Err(); err != nil || n != 7 {
				t.Errorf("%d chunks (err %v), want 7", n, err)
			}
		})
	}
}

func weatherTool() openai.ChatCompletionToolUnionParam {
	var params shared.FunctionParameters
	if err := json.Unmarshal([]byte(weatherSchema), &params); err != nil {
		panic(err)
	}
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Parameters: params})
}

func timeTool() openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:       "get_time",
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"zone": map[string]any{"type": "string"}}},
	})
}

// checkWeatherArgs checks arguments against weatherSchema.
func checkWeatherArgs(t *testing.T, args string) {
	t.Helper()
	var a struct {
		Location *string  `json:"location"`
		Unit     *string  `json:"unit"`
		Days     *float64 `json:"days"`
	}
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		t.Fatalf("arguments %q are not JSON: %v", args, err)
	}
	if a.Location == nil || len(*a.Location) < 3 {
		t.Errorf("arguments %s: location missing or shorter than 3", args)
	}
	if a.Unit == nil || (*a.Unit != "celsius" && *a.Unit != "fahrenheit") {
		t.Errorf("arguments %s: unit missing or not in the enum", args)
	}
	if a.Days != nil && (*a.Days < 1 || *a.Days > 7 || *a.Days != float64(int(*a.Days))) {
		t.Errorf("arguments %s: days not an integer from 1 to 7", args)
	}
}

func TestOpenAISDKTools(t *testing.T) {
	for _, tg := range targets(t, mockllm.Options{Deltas: 4}) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := context.Background()
			c := tg.openai()
			params := openai.ChatCompletionNewParams{
				Model:    "gpt-4o-mini",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")},
				Tools:    []openai.ChatCompletionToolUnionParam{weatherTool(), timeTool()},
			}
			resp, err := c.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			msg := resp.Choices[0].Message
			if resp.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 {
				t.Fatalf("finish %q with %d tool calls, want tool_calls with 1", resp.Choices[0].FinishReason, len(msg.ToolCalls))
			}
			call := msg.ToolCalls[0]
			if call.Function.Name != "get_weather" || call.Type != "function" || !strings.HasPrefix(call.ID, "call_") {
				t.Errorf("call %+v, want function get_weather with a call_ ID", call)
			}
			checkWeatherArgs(t, call.Function.Arguments)
			if want := tokens(len("get_weather") + len(call.Function.Arguments)); resp.Usage.CompletionTokens != int64(want) {
				t.Errorf("completion tokens %d, want %d", resp.Usage.CompletionTokens, want)
			}

			// The same call, streamed: the accumulator rebuilds it.
			stream := c.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			finished := 0
			argChunks := 0
			for stream.Next() {
				chunk := stream.Current()
				if !acc.AddChunk(chunk) {
					t.Fatalf("the accumulator rejected %s", chunk.RawJSON())
				}
				if len(chunk.Choices) > 0 && len(chunk.Choices[0].Delta.ToolCalls) > 0 && chunk.Choices[0].Delta.ToolCalls[0].ID == "" {
					argChunks++
				}
				if tc, ok := acc.JustFinishedToolCall(); ok {
					finished++
					if tc.Name != "get_weather" || tc.Arguments != call.Function.Arguments {
						t.Errorf("finished tool call %+v, want get_weather(%s)", tc, call.Function.Arguments)
					}
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if finished != 1 || argChunks != 4 {
				t.Errorf("%d finished tool calls from %d argument chunks, want 1 from 4", finished, argChunks)
			}
			got := acc.Choices[0]
			if got.FinishReason != "tool_calls" || len(got.Message.ToolCalls) != 1 || got.Message.ToolCalls[0].Function.Arguments != call.Function.Arguments {
				t.Errorf("accumulated %+v, want the JSON answer's call", got)
			}

			// After the tool's result the answer is text.
			params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage(`{"temp":21}`, call.ID))
			resp, err = c.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Choices[0].FinishReason != "stop" || resp.Choices[0].Message.Content != tg.s.Text() || len(resp.Choices[0].Message.ToolCalls) != 0 {
				t.Errorf("after the tool result: %+v, want the text", resp.Choices[0])
			}
			in := tokens(len("What is the weather in Paris?") + len("get_weather") + len(call.Function.Arguments) + len(`{"temp":21}`))
			if resp.Usage.PromptTokens != int64(in) {
				t.Errorf("prompt tokens %d, want %d", resp.Usage.PromptTokens, in)
			}

			// tool_choice names the second tool.
			params.Messages = params.Messages[:1]
			params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{
				OfFunctionToolChoice: &openai.ChatCompletionNamedToolChoiceParam{Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_time"}},
			}
			resp, err = c.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if tc := resp.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Name != "get_time" {
				t.Errorf("tool_choice get_time: calls %+v", tc)
			}
			// tool_choice none: text.
			params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
			resp, err = c.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Choices[0].FinishReason != "stop" || len(resp.Choices[0].Message.ToolCalls) != 0 {
				t.Errorf("tool_choice none: %+v", resp.Choices[0])
			}
		})
	}
}

func TestAnthropicSDKText(t *testing.T) {
	for _, tg := range targets(t, mockllm.Options{Latency: 20 * time.Millisecond, Deltas: 5}) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := context.Background()
			c := tg.anthropic()
			text := tg.s.Text()
			params := anthropic.MessageNewParams{
				Model:     "claude-sonnet-4-5",
				MaxTokens: 1024,
				System:    []anthropic.TextBlockParam{{Text: systemPrompt}},
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(userPrompt))},
			}
			in := tokens(len(systemPrompt) + len(userPrompt))
			out := tokens(len(text))

			msg, err := c.Messages.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			tg.checkProto(t)
			if !strings.HasPrefix(msg.ID, "msg_") || msg.Type != "message" || msg.Role != "assistant" || msg.Model != "claude-sonnet-4-5" {
				t.Errorf("envelope: id %q type %q role %q model %q", msg.ID, msg.Type, msg.Role, msg.Model)
			}
			if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != text {
				t.Fatalf("content %+v, want one text block %q", msg.Content, text)
			}
			if msg.StopReason != anthropic.StopReasonEndTurn || msg.StopSequence != "" {
				t.Errorf("stop %q %q, want end_turn", msg.StopReason, msg.StopSequence)
			}
			if msg.Usage.InputTokens != int64(in) || msg.Usage.OutputTokens != int64(out) {
				t.Errorf("usage %d/%d, want %d/%d", msg.Usage.InputTokens, msg.Usage.OutputTokens, in, out)
			}

			count, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
				Model:    params.Model,
				System:   anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: params.System},
				Messages: params.Messages,
			})
			if err != nil {
				t.Fatal(err)
			}
			if count.InputTokens != int64(in) {
				t.Errorf("count_tokens %d, want %d", count.InputTokens, in)
			}

			stream := c.Messages.NewStreaming(ctx, params)
			var acc anthropic.Message
			var types []string
			for stream.Next() {
				ev := stream.Current()
				types = append(types, ev.Type)
				if err := acc.Accumulate(ev); err != nil {
					t.Fatalf("accumulating %s: %v", ev.Type, err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			tg.checkProto(t)
			want := "message_start content_block_start " + strings.Repeat("content_block_delta ", 5) + "content_block_stop message_delta message_stop"
			if strings.Join(types, " ") != want {
				t.Errorf("events %v, want %s (the SDK skips ping)", types, want)
			}
			if len(acc.Content) != 1 || acc.Content[0].Text != text || acc.StopReason != anthropic.StopReasonEndTurn {
				t.Errorf("accumulated %+v (%q), want %q (end_turn)", acc.Content, acc.StopReason, text)
			}
			if acc.Usage.InputTokens != msg.Usage.InputTokens || acc.Usage.OutputTokens != msg.Usage.OutputTokens {
				t.Errorf("stream usage %d/%d differs from the JSON answer's %d/%d", acc.Usage.InputTokens, acc.Usage.OutputTokens, msg.Usage.InputTokens, msg.Usage.OutputTokens)
			}
		})
	}
}

func anthropicWeatherTool(t *testing.T) anthropic.ToolUnionParam {
	var schema struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	if err := json.Unmarshal([]byte(weatherSchema), &schema); err != nil {
		t.Fatal(err)
	}
	return anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{Properties: schema.Properties, Required: schema.Required}, "get_weather")
}

func TestAnthropicSDKTools(t *testing.T) {
	for _, tg := range targets(t, mockllm.Options{Deltas: 4}) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := context.Background()
			c := tg.anthropic()
			params := anthropic.MessageNewParams{
				Model:     "claude-sonnet-4-5",
				MaxTokens: 1024,
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))},
				Tools:     []anthropic.ToolUnionParam{anthropicWeatherTool(t)},
			}
			msg, err := c.Messages.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" {
				t.Fatalf("stop %q content %+v, want one tool_use block", msg.StopReason, msg.Content)
			}
			use := msg.Content[0]
			if use.Name != "get_weather" || !strings.HasPrefix(use.ID, "toolu_") {
				t.Errorf("tool_use %q %q", use.Name, use.ID)
			}
			checkWeatherArgs(t, string(use.Input))

			stream := c.Messages.NewStreaming(ctx, params)
			var acc anthropic.Message
			deltas := 0
			for stream.Next() {
				ev := stream.Current()
				if ev.Type == "content_block_delta" {
					if ev.Delta.Type != "input_json_delta" {
						t.Errorf("delta type %q in a tool_use block", ev.Delta.Type)
					}
					deltas++
				}
				if err := acc.Accumulate(ev); err != nil {
					t.Fatal(err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if deltas != 4 || len(acc.Content) != 1 || acc.Content[0].Name != "get_weather" || string(acc.Content[0].Input) != string(use.Input) {
				t.Errorf("accumulated %d deltas into %+v, want 4 into get_weather(%s)", deltas, acc.Content, use.Input)
			}
			if acc.StopReason != anthropic.StopReasonToolUse || acc.Usage.OutputTokens != msg.Usage.OutputTokens {
				t.Errorf("stream stop %q output %d, want tool_use %d", acc.StopReason, acc.Usage.OutputTokens, msg.Usage.OutputTokens)
			}

			// After the tool's result the answer is text, even with tool_choice any.
			params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "21 degrees", false)))
			params.ToolChoice = anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}
			msg, err = c.Messages.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if msg.StopReason != anthropic.StopReasonEndTurn || len(msg.Content) != 1 || msg.Content[0].Text != tg.s.Text() {
				t.Errorf("after the tool result: %q %+v, want the text", msg.StopReason, msg.Content)
			}
		})
	}
}

// An error after a stream started reaches each SDK as an error, never as
// a short success.
func TestSDKMidstreamError(t *testing.T) {
	_, url := start(t, mockllm.Options{Deltas: 4, ErrorRate: 1, ErrorKinds: []mockllm.ErrorKind{mockllm.KindMidstream}})
	tg := target{url: url, client: client}
	ctx := context.Background()

	oc, ac := tg.openai(), tg.anthropic()
	ostream := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	n := 0
	for ostream.Next() {
		n++
	}
	if ostream.Err() == nil || n != 3 {
		t.Errorf("OpenAI: %d chunks then error %v; want the role chunk, 2 deltas, then an error", n, ostream.Err())
	}

	astream := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: "claude-sonnet-4-5", MaxTokens: 100, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	n = 0
	for astream.Next() {
		n++
	}
	var aerr *anthropic.Error
	if !errors.As(astream.Err(), &aerr) || aerr.Type() != "overloaded_error" || n != 4 {
		t.Errorf("Anthropic: %d events then %v; want message_start, block start, 2 deltas, then an overloaded_error", n, astream.Err())
	}
}

func TestSDKAPIKey(t *testing.T) {
	_, url := start(t, mockllm.Options{APIKey: "right"})
	ctx := context.Background()
	for _, key := range []string{"right", "wrong"} {
		oc := openai.NewClient(openaioption.WithBaseURL(url+"/v1/"), openaioption.WithAPIKey(key), openaioption.WithMaxRetries(0))
		_, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		var oerr *openai.Error
		if key == "right" && err != nil {
			t.Errorf("OpenAI with the right key: %v", err)
		}
		if key == "wrong" && (!errors.As(err, &oerr) || oerr.StatusCode != 401 || oerr.Code != "invalid_api_key") {
			t.Errorf("OpenAI with a wrong key: %v, want a 401 invalid_api_key", err)
		}

		ac := anthropic.NewClient(anthropicoption.WithBaseURL(url+"/"), anthropicoption.WithAPIKey(key), anthropicoption.WithMaxRetries(0))
		_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "m", MaxTokens: 10, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		var aerr *anthropic.Error
		if key == "right" && err != nil {
			t.Errorf("Anthropic with the right key: %v", err)
		}
		if key == "wrong" && (!errors.As(err, &aerr) || aerr.StatusCode != 401 || aerr.Type() != "authentication_error" || !strings.HasPrefix(aerr.RequestID, "req_")) {
			t.Errorf("Anthropic with a wrong key: %v, want a 401 authentication_error with a request ID", err)
		}
	}
}
