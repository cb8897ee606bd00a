package llmsdk_test

import (
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/straitgw/strait/internal/llm/gateway"
	"github.com/straitgw/strait/internal/llm/translate"
)

// TestStopReasonsAndUsage has the provider end its answer for each reason
// (end of turn, max_tokens, a tool call, a stop sequence), as JSON and
// streamed, with usage that includes cached prompt tokens, and checks what
// each SDK reports: the stop reason in its own dialect's terms and the
// token counts the provider sent, cached tokens where the dialect puts
// them. The max_tokens the client set must reach the provider under its
// dialect's name.
func TestStopReasonsAndUsage(t *testing.T) {
	t.Parallel()
	for _, pr := range pairs {
		t.Run(pr.String(), func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			sp := startScripted(t)
			up := upstream(pr.provider, sp.url, h1)
			gw := startGateway(t, []gateway.Provider{up}, routeAll(up))
			hc, rec := newClient(t, h1)
			client := newSDK(gw, gatewayKey, hc)

			cases := []struct {
				stop      string // the provider's, in Anthropic's terms
				text      string
				calls     []toolCall
				usage     usage
				maxTokens int64
				// What the SDKs must report.
				finish          string // OpenAI
				anthropicStop   anthropic.StopReason
				anthropicSeqSet bool // the Anthropic SDK sees the stop sequence
			}{
				{stop: "end_turn", text: "All done.", usage: usage{input: 21, cached: 0, output: 3}, maxTokens: 300,
					finish: "stop", anthropicStop: anthropic.StopReasonEndTurn},
				{stop: "max_tokens", text: "This answer was cut at", usage: usage{input: 22, cached: 8, output: 5}, maxTokens: 5,
					finish: "length", anthropicStop: anthropic.StopReasonMaxTokens},
				{stop: "tool_use", calls: []toolCall{{id: callID(pr.provider, "clock1"), name: "get_time", args: `{"timezone":"UTC"}`}},
					usage: usage{input: 23, cached: 16, output: 9}, maxTokens: 300,
					finish: "tool_calls", anthropicStop: anthropic.StopReasonToolUse},
				// OpenAI cannot say which stop sequence matched: from an
				// OpenAI provider, Anthropic clients get end_turn.
				{stop: "stop_sequence", text: "Up to the marker", usage: usage{input: 24, cached: 2, output: 4}, maxTokens: 300,
					finish: "stop", anthropicStop: anthropic.StopReasonStopSequence, anthropicSeqSet: true},
			}
			for _, tc := range cases {
				if pr.provider == translate.OpenAI && tc.stop == "stop_sequence" {
					tc.anthropicStop, tc.anthropicSeqSet = anthropic.StopReasonEndTurn, false
				}
				for _, stream := range []bool{false, true} {
					sp.push(answer{text: tc.text, calls: tc.calls, stop: tc.stop, usage: tc.usage})
					what := tc.stop + ", " + mode(stream)
					if pr.client == translate.OpenAI {
						params := openai.ChatCompletionNewParams{
							Model:               "sdk-stop-model",
							Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What time is it?")},
							Tools:               []openai.ChatCompletionToolUnionParam{openAITool(t, "get_time", timeSchema)},
							MaxCompletionTokens: openai.Int(tc.maxTokens),
						}
						resp := openAITurn(t, ctx, client.openai, params, stream)
						ch := resp.Choices[0]
						if ch.FinishReason != tc.finish || ch.Message.Content != tc.text || len(ch.Message.ToolCalls) != len(tc.calls) {
							t.Errorf("%s: the SDK got finish %q, text %q, %d calls; want %q, %q, %d",
								what, ch.FinishReason, ch.Message.Content, len(ch.Message.ToolCalls), tc.finish, tc.text, len(tc.calls))
						}
						checkOpenAIUsage(t, resp.Usage, tc.usage)
					} else {
						params := anthropic.MessageNewParams{
							Model:     "sdk-stop-model",
							MaxTokens: tc.maxTokens,
							Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What time is it?"))},
							Tools:     []anthropic.ToolUnionParam{anthropicTool(t, "get_time", timeSchema)},
						}
						if tc.stop == "stop_sequence" {
							params.StopSequences = []string{scriptedStopSequence}
						}
						msg := anthropicTurn(t, ctx, client.anthropic, params, stream)
						wantSeq := ""
						if tc.anthropicSeqSet {
							wantSeq = scriptedStopSequence
						}
						blocks := len(tc.calls)
						if tc.text != "" {
							blocks++
						}
						if msg.StopReason != tc.anthropicStop || msg.StopSequence != wantSeq || len(msg.Content) != blocks {
							t.Errorf("%s: the SDK got stop %q, stop sequence %q, %d blocks; want %q, %q, %d",
								what, msg.StopReason, msg.StopSequence, len(msg.Content), tc.anthropicStop, wantSeq, blocks)
						}
						checkAnthropicUsage(t, msg.Usage, tc.usage)
					}
					if got := parseReceived(t, pr.provider, sp.last(t).body).maxTokens; got != tc.maxTokens {
						t.Errorf("%s: the provider got max tokens %d, want the client's %d", what, got, tc.maxTokens)
					}
				}
			}
			rec.check(t, h1)
		})
	}
}
