package llmsdk_test

import (
	"slices"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/straitgw/strait/internal/llm/gateway"
	"github.com/straitgw/strait/internal/llm/translate"
)

const (
	parallelQuestion = "What are the weather and the local time in Paris?"
	parallelPreface  = "Let me look both up."
	parallelFinal    = "It is 21 degrees and clear in Paris, and 10:00 there."
	timeResult       = `{"time":"10:00","timezone":"Europe/Paris"}`
)

// TestParallelToolCalls has the provider call two tools in one answer,
// after a line of text, and checks the whole round trip through each SDK:
// the SDK sees both calls (ids, names, arguments) and the text, sends both
// results back, and gets the final text; the provider gets the assistant's
// turn and both results in its own dialect's shape (OpenAI: one tool
// message per result; Anthropic: one user message holding every
// tool_result block, right after the assistant's turn).
func TestParallelToolCalls(t *testing.T) {
	t.Parallel()
	for _, pr := range pairs {
		for _, stream := range []bool{false, true} {
			t.Run(subtestName(pr, mode(stream)), func(t *testing.T) {
				t.Parallel()
				ctx := testContext(t)
				sp := startScripted(t)
				up := upstream(pr.provider, sp.url, h2c)
				gw := startGateway(t, []gateway.Provider{up}, routeAll(up))
				hc, rec := newClient(t, h1)
				client := newSDK(gw, gatewayKey, hc)

				calls := []toolCall{
					{id: callID(pr.provider, "weather7"), name: "get_weather", args: `{"location":"Paris","unit":"celsius"}`},
					{id: callID(pr.provider, "time3"), name: "get_time", args: `{"timezone":"Europe/Paris"}`},
				}
				results := []toolResult{{id: calls[0].id, content: weatherResult}, {id: calls[1].id, content: timeResult}}
				first := usage{input: 57, output: 31}
				second := usage{input: 112, output: 17}
				sp.push(
					answer{text: parallelPreface, calls: calls, stop: "tool_use", usage: first},
					answer{text: parallelFinal, stop: "end_turn", usage: second},
				)

				if pr.client == translate.OpenAI {
					params := openai.ChatCompletionNewParams{
						Model:    "sdk-tools-model",
						Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(parallelQuestion)},
						Tools:    []openai.ChatCompletionToolUnionParam{openAITool(t, "get_weather", weatherSchema), openAITool(t, "get_time", timeSchema)},
					}
					resp := openAITurn(t, ctx, client.openai, params, stream)
					ch := resp.Choices[0]
					var got []toolCall
					for _, tc := range ch.Message.ToolCalls {
						if tc.Type != "function" {
							t.Errorf("tool call %s has type %q, want function", tc.ID, tc.Type)
						}
						got = append(got, toolCall{id: tc.ID, name: tc.Function.Name, args: compactJSON(t, tc.Function.Arguments)})
					}
					if !slices.Equal(got, calls) || ch.Message.Content != parallelPreface || ch.FinishReason != "tool_calls" {
						t.Fatalf("the SDK got calls %+v, text %q, finish %q; want %+v, %q, tool_calls", got, ch.Message.Content, ch.FinishReason, calls, parallelPreface)
					}
					checkOpenAIUsage(t, resp.Usage, first)

					params.Messages = append(params.Messages, ch.Message.ToParam())
					for _, r := range results {
						params.Messages = append(params.Messages, openai.ToolMessage(r.content, r.id))
					}
					resp = openAITurn(t, ctx, client.openai, params, stream)
					if ch := resp.Choices[0]; ch.Message.Content != parallelFinal || ch.FinishReason != "stop" || len(ch.Message.ToolCalls) != 0 {
						t.Errorf("after the results the SDK got %q, finish %q, %d calls; want %q, stop, none", ch.Message.Content, ch.FinishReason, len(ch.Message.ToolCalls), parallelFinal)
					}
					checkOpenAIUsage(t, resp.Usage, second)
				} else {
					params := anthropic.MessageNewParams{
						Model:     "sdk-tools-model",
						MaxTokens: 512,
						Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(parallelQuestion))},
						Tools:     []anthropic.ToolUnionParam{anthropicTool(t, "get_weather", weatherSchema), anthropicTool(t, "get_time", timeSchema)},
					}
					msg := anthropicTurn(t, ctx, client.anthropic, params, stream)
					var kinds []string
					var got []toolCall
					text := ""
					for _, b := range msg.Content {
						kinds = append(kinds, b.Type)
						switch b.Type {
						case "text":
							text += b.Text
						case "tool_use":
							got = append(got, toolCall{id: b.ID, name: b.Name, args: compactJSON(t, string(b.Input))})
						}
					}
					if !slices.Equal(kinds, []string{"text", "tool_use", "tool_use"}) || !slices.Equal(got, calls) ||
						text != parallelPreface || msg.StopReason != anthropic.StopReasonToolUse {
						t.Fatalf("the SDK got blocks %v with calls %+v, text %q, stop %q; want text, tool_use, tool_use with %+v, %q, tool_use",
							kinds, got, text, msg.StopReason, calls, parallelPreface)
					}
					checkAnthropicUsage(t, msg.Usage, first)

					var blocks []anthropic.ContentBlockParamUnion
					for _, r := range results {
						blocks = append(blocks, anthropic.NewToolResultBlock(r.id, r.content, false))
					}
					params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(blocks...))
					msg = anthropicTurn(t, ctx, client.anthropic, params, stream)
					if len(msg.Content) != 1 || msg.Content[0].Text != parallelFinal || msg.StopReason != anthropic.StopReasonEndTurn {
						t.Errorf("after the results the SDK got %+v, stop %q; want %q, end_turn", msg.Content, msg.StopReason, parallelFinal)
					}
					checkAnthropicUsage(t, msg.Usage, second)
				}
				rec.check(t, h1)

				// What the provider was sent with the results.
				if n := sp.count(); n != 2 {
					t.Fatalf("the provider got %d requests, want 2", n)
				}
				last := sp.last(t)
				if last.proto != h2c.wire() {
					t.Errorf("the gateway spoke %s to the provider, want %s", last.proto, h2c.wire())
				}
				r := parseReceived(t, pr.provider, last.body)
				wantRoles := []string{"user", "assistant", "tool", "tool"}
				if pr.provider == translate.Anthropic {
					wantRoles = []string{"user", "assistant", "user"}
				}
				if got := r.roles(); !slices.Equal(got, wantRoles) {
					t.Fatalf("the provider got roles %v, want %v: %s", got, wantRoles, last.describe())
				}
				if r.messages[0].text != parallelQuestion {
					t.Errorf("the question reached the provider as %q", r.messages[0].text)
				}
				asst := r.messages[1]
				if !slices.Equal(asst.calls, calls) || asst.text != parallelPreface {
					t.Errorf("the provider got the assistant's turn as calls %+v, text %q; want %+v, %q", asst.calls, asst.text, calls, parallelPreface)
				}
				var gotResults []toolResult
				for _, res := range r.results() {
					gotResults = append(gotResults, toolResult{id: res.id, content: compactJSON(t, res.content)})
				}
				if !slices.Equal(gotResults, results) {
					t.Errorf("the provider got the results %+v, want %+v", gotResults, results)
				}
				if pr.provider == translate.Anthropic {
					if k := r.messages[2].kinds; !slices.Equal(k, []string{"tool_result", "tool_result"}) {
						t.Errorf("the user message after the tool calls holds %v, want both tool_result blocks and nothing else", k)
					}
				}
			})
		}
	}
}

// checkOpenAIUsage checks the usage an OpenAI SDK reports against the usage
// the provider sent (in either dialect): prompt tokens count the cached
// ones, which are also reported apart.
func checkOpenAIUsage(t *testing.T, got openai.CompletionUsage, want usage) {
	t.Helper()
	in := want.input + want.cached
	if got.PromptTokens != in || got.CompletionTokens != want.output || got.TotalTokens != in+want.output ||
		got.PromptTokensDetails.CachedTokens != want.cached {
		t.Errorf("the OpenAI SDK reports usage %d prompt (%d cached) + %d completion = %d; want %d (%d) + %d = %d",
			got.PromptTokens, got.PromptTokensDetails.CachedTokens, got.CompletionTokens, got.TotalTokens,
			in, want.cached, want.output, in+want.output)
	}
}

// checkAnthropicUsage is checkOpenAIUsage for the Anthropic SDK, whose
// input tokens leave the cached ones out.
func checkAnthropicUsage(t *testing.T, got anthropic.Usage, want usage) {
	t.Helper()
	if got.InputTokens != want.input || got.CacheReadInputTokens != want.cached || got.OutputTokens != want.output {
		t.Errorf("the Anthropic SDK reports usage %d in, %d cache read, %d out; want %d, %d, %d",
			got.InputTokens, got.CacheReadInputTokens, got.OutputTokens, want.input, want.cached, want.output)
	}
}
