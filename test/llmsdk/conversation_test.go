package llmsdk_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/straitgw/strait/internal/llm/gateway"
	"github.com/straitgw/strait/internal/llm/translate"
	"github.com/straitgw/strait/internal/mockllm"
)

const (
	systemPrompt    = "You answer in one short paragraph."
	userPrompt      = "Tell me about the strait between the two seas."
	weatherQuestion = "What is the weather in Paris?"
	weatherResult   = `{"temperature":21,"unit":"celsius","sky":"clear"}`
	// clientModel is what the SDKs ask for; the route renames it to
	// upstreamModel, the name the provider must be asked for.
	clientModel   = "sdk-client-model"
	upstreamModel = "sdk-upstream-model"
)

// TestConversation drives a whole conversation through the gateway with
// each SDK, against the mock provider of each dialect, over HTTP/1.1 and
// h2c on each hop: a text answer as JSON and streamed, then a tool call
// whose result the SDK sends back for the final text, both ways. It checks
// what the SDK made of each answer (text, stop reason, model, usage) and
// what the provider was sent (model, system prompt in its dialect's place,
// the tool call and result, the protocol).
func TestConversation(t *testing.T) {
	t.Parallel()
	for _, pr := range pairs {
		for _, cp := range protos {
			for _, pp := range protos {
				t.Run(subtestName(pr, "client_"+string(cp), "provider_"+string(pp)), func(t *testing.T) {
					t.Parallel()
					mock, url := startMock(t, mockllm.Options{Deltas: 4})
					up := upstream(pr.provider, url, pp)
					gw := startGateway(t, []gateway.Provider{up},
						[]gateway.Route{{Match: clientModel, Provider: up.Name, Model: upstreamModel}})
					hc, rec := newClient(t, cp)
					c := &conversation{t: t, ctx: testContext(t), pair: pr, pp: pp, mock: mock, sdk: newSDK(gw, gatewayKey, hc)}
					if pr.client == translate.OpenAI {
						c.openAI()
					} else {
						c.anthropic()
					}
					rec.check(t, cp)
				})
			}
		}
	}
}

// conversation is one subtest of TestConversation.
type conversation struct {
	t    *testing.T
	ctx  context.Context
	pair pair
	pp   proto // gateway to provider
	mock *mockllm.Server
	sdk  sdk
}

// wantModel is the model the SDK must see in an answer: the name it asked
// for when the gateway translates, the provider's (upstream) name on the
// fast path, which forwards the provider's answer as it is.
func (c *conversation) wantModel() string {
	if c.pair.translated() {
		return clientModel
	}
	return upstreamModel
}

// received returns the provider's view of the last request, after
// checking how it came: the protocol, the renamed model, the stream flag.
func (c *conversation) received(stream bool) received {
	t := c.t
	t.Helper()
	last, ok := c.mock.LastRequest()
	if !ok {
		t.Fatal("the provider received no request")
	}
	if last.Proto != c.pp.wire() {
		t.Errorf("the gateway spoke %s to the provider, want %s", last.Proto, c.pp.wire())
	}
	r := parseReceived(t, c.pair.provider, last.Body)
	if r.model != upstreamModel {
		t.Errorf("the provider was asked for model %q, want the route's %q", r.model, upstreamModel)
	}
	if r.stream != stream {
		t.Errorf("the provider got stream %v, want %v", r.stream, stream)
	}
	if stream && c.pair.provider == translate.OpenAI && !r.includeUsage {
		t.Errorf("a stream to an OpenAI provider without stream_options.include_usage: no usage would come back")
	}
	return r
}

// checkSystem checks that the provider found the system prompt where its
// dialect keeps it, once, and nowhere in the conversation.
func (c *conversation) checkSystem(r received) {
	t := c.t
	t.Helper()
	if !slices.Equal(r.system, []string{systemPrompt}) || r.misplacedSystem {
		t.Errorf("the %s provider got the system prompt %q (misplaced: %v), want [%q] in its dialect's place",
			c.pair.provider, r.system, r.misplacedSystem, systemPrompt)
	}
	for i, m := range r.messages {
		if strings.Contains(m.text, systemPrompt) {
			t.Errorf("the system prompt reached the provider inside message %d (%s) too", i, m.role)
		}
	}
	if len(r.messages) != 1 || r.messages[0].role != "user" || r.messages[0].text != userPrompt {
		t.Errorf("the provider got the conversation %+v, want one user message %q", r.messages, userPrompt)
	}
}

// checkToolRoundTrip checks the provider's view of the request carrying a
// tool result: the question, the assistant's call as the SDK sent it back,
// and the result, answering that call.
func (c *conversation) checkToolRoundTrip(r received, call toolCall) {
	t := c.t
	t.Helper()
	wantRoles := []string{"user", "assistant", "tool"}
	if c.pair.provider == translate.Anthropic {
		wantRoles = []string{"user", "assistant", "user"}
	}
	if got := r.roles(); !slices.Equal(got, wantRoles) {
		t.Fatalf("the provider got messages with roles %v, want %v", got, wantRoles)
	}
	if r.messages[0].text != weatherQuestion {
		t.Errorf("the question reached the provider as %q, want %q", r.messages[0].text, weatherQuestion)
	}
	if got := r.calls(); !slices.Equal(got, []toolCall{call}) {
		t.Errorf("the provider got the assistant's tool calls %+v, want %+v", got, call)
	}
	if got := r.results(); len(got) != 1 || got[0].id != call.id || compactJSON(t, got[0].content) != weatherResult {
		t.Errorf("the provider got the tool results %+v, want one answering %s with %s", got, call.id, weatherResult)
	}
}

func (c *conversation) openAI() {
	t, ctx := c.t, c.ctx
	text := c.mock.Text()
	in, out := mockTokens(len(systemPrompt)+len(userPrompt)), mockTokens(len(text))
	for _, stream := range []bool{false, true} {
		params := openai.ChatCompletionNewParams{
			Model:    clientModel,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(systemPrompt), openai.UserMessage(userPrompt)},
		}
		resp := openAITurn(t, ctx, c.sdk.openai, params, stream)
		c.checkSystem(c.received(stream))
		ch := resp.Choices[0]
		if ch.Message.Content != text || ch.Message.Role != "assistant" || ch.FinishReason != "stop" {
			t.Errorf("%s: the SDK got %q from %q, finish %q; want the provider's text, from assistant, finish stop",
				mode(stream), ch.Message.Content, ch.Message.Role, ch.FinishReason)
		}
		if resp.Model != c.wantModel() {
			t.Errorf("%s: the answer names model %q, want %q", mode(stream), resp.Model, c.wantModel())
		}
		if u := resp.Usage; u.PromptTokens != in || u.CompletionTokens != out || u.TotalTokens != in+out {
			t.Errorf("%s: usage %d+%d=%d, want the provider's %d+%d=%d", mode(stream), u.PromptTokens, u.CompletionTokens, u.TotalTokens, in, out, in+out)
		}
	}

	for _, stream := range []bool{false, true} {
		params := openai.ChatCompletionNewParams{
			Model:    clientModel,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(weatherQuestion)},
			Tools:    []openai.ChatCompletionToolUnionParam{openAITool(t, "get_weather", weatherSchema)},
		}
		resp := openAITurn(t, ctx, c.sdk.openai, params, stream)
		c.received(stream)
		msg := resp.Choices[0].Message
		if resp.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 {
			t.Fatalf("%s: finish %q with %d tool calls, want tool_calls with one", mode(stream), resp.Choices[0].FinishReason, len(msg.ToolCalls))
		}
		tc := msg.ToolCalls[0]
		checkWeatherArgs(t, tc.Function.Arguments)
		if tc.Function.Name != "get_weather" || tc.ID == "" {
			t.Errorf("%s: tool call %q (id %q), want get_weather with an id", mode(stream), tc.Function.Name, tc.ID)
		}
		call := toolCall{id: tc.ID, name: tc.Function.Name, args: compactJSON(t, tc.Function.Arguments)}

		params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage(weatherResult, tc.ID))
		resp = openAITurn(t, ctx, c.sdk.openai, params, stream)
		c.checkToolRoundTrip(c.received(stream), call)
		if ch := resp.Choices[0]; ch.Message.Content != c.mock.Text() || ch.FinishReason != "stop" || len(ch.Message.ToolCalls) != 0 {
			t.Errorf("%s: after the tool result the SDK got %q, finish %q, %d tool calls; want the text, stop, none",
				mode(stream), ch.Message.Content, ch.FinishReason, len(ch.Message.ToolCalls))
		}
	}
}

func (c *conversation) anthropic() {
	t, ctx := c.t, c.ctx
	text := c.mock.Text()
	in, out := mockTokens(len(systemPrompt)+len(userPrompt)), mockTokens(len(text))
	for _, stream := range []bool{false, true} {
		params := anthropic.MessageNewParams{
			Model:     clientModel,
			MaxTokens: 1024,
			System:    []anthropic.TextBlockParam{{Text: systemPrompt}},
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(userPrompt))},
		}
		msg := anthropicTurn(t, ctx, c.sdk.anthropic, params, stream)
		c.checkSystem(c.received(stream))
		if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != text || msg.StopReason != anthropic.StopReasonEndTurn {
			t.Errorf("%s: the SDK got %+v, stop %q; want one text block with the provider's text, end_turn", mode(stream), msg.Content, msg.StopReason)
		}
		if string(msg.Model) != c.wantModel() || msg.Role != "assistant" {
			t.Errorf("%s: the answer names model %q, role %q; want %q, assistant", mode(stream), msg.Model, msg.Role, c.wantModel())
		}
		if u := msg.Usage; u.InputTokens != in || u.OutputTokens != out {
			t.Errorf("%s: usage %d in, %d out; want the provider's %d, %d", mode(stream), u.InputTokens, u.OutputTokens, in, out)
		}
	}

	for _, stream := range []bool{false, true} {
		params := anthropic.MessageNewParams{
			Model:     clientModel,
			MaxTokens: 1024,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(weatherQuestion))},
			Tools:     []anthropic.ToolUnionParam{anthropicTool(t, "get_weather", weatherSchema)},
		}
		msg := anthropicTurn(t, ctx, c.sdk.anthropic, params, stream)
		c.received(stream)
		if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" {
			t.Fatalf("%s: stop %q with %+v, want tool_use with one tool_use block", mode(stream), msg.StopReason, msg.Content)
		}
		use := msg.Content[0]
		checkWeatherArgs(t, string(use.Input))
		if use.Name != "get_weather" || use.ID == "" {
			t.Errorf("%s: tool_use %q (id %q), want get_weather with an id", mode(stream), use.Name, use.ID)
		}
		call := toolCall{id: use.ID, name: use.Name, args: compactJSON(t, string(use.Input))}

		params.Messages = append(params.Messages, msg.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, weatherResult, false)))
		msg = anthropicTurn(t, ctx, c.sdk.anthropic, params, stream)
		c.checkToolRoundTrip(c.received(stream), call)
		if len(msg.Content) != 1 || msg.Content[0].Text != c.mock.Text() || msg.StopReason != anthropic.StopReasonEndTurn {
			t.Errorf("%s: after the tool result the SDK got %+v, stop %q; want the text, end_turn", mode(stream), msg.Content, msg.StopReason)
		}
	}
}

// checkWeatherArgs checks tool arguments against weatherSchema: the mock
// provider generates them from it, so they must survive translation as a
// JSON object that still fits it.
func checkWeatherArgs(t *testing.T, args string) {
	t.Helper()
	var a struct {
		Location *string `json:"location"`
		Unit     *string `json:"unit"`
	}
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		t.Fatalf("tool arguments %q are not a JSON object: %v", args, err)
	}
	if a.Location == nil || len(*a.Location) < 3 || a.Unit == nil || (*a.Unit != "celsius" && *a.Unit != "fahrenheit") {
		t.Errorf("tool arguments %s do not fit the tool's schema", args)
	}
}
