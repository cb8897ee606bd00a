package llmsdk_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/straitgw/strait/internal/llm/gateway"
	"github.com/straitgw/strait/internal/llm/translate"
	"github.com/straitgw/strait/internal/mockllm"
)

// TestToolChoice sets each SDK's tool_choice to name the second of two
// tools, then to none. The mock provider calls the first tool offered
// unless its dialect's tool_choice says otherwise, so it only calls the
// named tool, or answers in text, if the choice reached it in its own
// dialect's form.
func TestToolChoice(t *testing.T) {
	t.Parallel()
	for _, pr := range pairs {
		t.Run(pr.String(), func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			mock, url := startMock(t, mockllm.Options{Deltas: 3})
			up := upstream(pr.provider, url, h2c)
			gw := startGateway(t, []gateway.Provider{up}, routeAll(up))
			hc, rec := newClient(t, h2c)
			client := newSDK(gw, gatewayKey, hc)

			for _, stream := range []bool{false, true} {
				var named []string // the tools called with the named choice
				var noneText string
				var noneStop string
				if pr.client == translate.OpenAI {
					params := openai.ChatCompletionNewParams{
						Model:    "sdk-choice-model",
						Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(weatherQuestion)},
						Tools:    []openai.ChatCompletionToolUnionParam{openAITool(t, "get_weather", weatherSchema), openAITool(t, "get_time", timeSchema)},
						ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfFunctionToolChoice: &openai.ChatCompletionNamedToolChoiceParam{
							Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_time"},
						}},
					}
					resp := openAITurn(t, ctx, client.openai, params, stream)
					for _, tc := range resp.Choices[0].Message.ToolCalls {
						named = append(named, tc.Function.Name)
						checkTimeArgs(t, tc.Function.Arguments)
					}
					params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
					resp = openAITurn(t, ctx, client.openai, params, stream)
					noneText, noneStop = resp.Choices[0].Message.Content, resp.Choices[0].FinishReason
				} else {
					params := anthropic.MessageNewParams{
						Model:      "sdk-choice-model",
						MaxTokens:  1024,
						Messages:   []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(weatherQuestion))},
						Tools:      []anthropic.ToolUnionParam{anthropicTool(t, "get_weather", weatherSchema), anthropicTool(t, "get_time", timeSchema)},
						ToolChoice: anthropic.ToolChoiceUnionParam{OfTool: &anthropic.ToolChoiceToolParam{Name: "get_time"}},
					}
					msg := anthropicTurn(t, ctx, client.anthropic, params, stream)
					for _, b := range msg.Content {
						if b.Type == "tool_use" {
							named = append(named, b.Name)
							checkTimeArgs(t, string(b.Input))
						}
					}
					params.ToolChoice = anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}}
					msg = anthropicTurn(t, ctx, client.anthropic, params, stream)
					for _, b := range msg.Content {
						noneText += b.Text
					}
					noneStop = string(msg.StopReason)
				}
				if !slices.Equal(named, []string{"get_time"}) {
					t.Errorf("%s: with tool_choice naming get_time the provider called %v", mode(stream), named)
				}
				if noneText != mock.Text() || (noneStop != "stop" && noneStop != "end_turn") {
					t.Errorf("%s: with tool_choice none the SDK got %q, stop %q; want the text", mode(stream), noneText, noneStop)
				}
			}
			rec.check(t, h2c)
		})
	}
}

func checkTimeArgs(t *testing.T, args string) {
	t.Helper()
	var a struct {
		Timezone *string `json:"timezone"`
	}
	if err := json.Unmarshal([]byte(args), &a); err != nil || a.Timezone == nil {
		t.Errorf("get_time arguments %q do not fit its schema (err %v)", args, err)
	}
}

// TestModelsAndCountTokens lists and looks up models with each SDK's own
// models API, which the gateway answers from its routes in the client's
// format, and counts tokens with the Anthropic SDK: answered by an
// Anthropic provider, refused (400, typed) for a model whose provider
// speaks OpenAI, which has no such endpoint.
func TestModelsAndCountTokens(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, aURL := startMock(t, mockllm.Options{})
	_, oURL := startMock(t, mockllm.Options{})
	ap, op := upstream(translate.Anthropic, aURL, h1), upstream(translate.OpenAI, oURL, h1)
	gw := startGateway(t, []gateway.Provider{ap, op}, []gateway.Route{
		{Match: "gpt-sdk-exact", Provider: op.Name},
		{Match: "claude-sdk-*", Provider: ap.Name, Models: []string{"claude-sdk-a", "claude-sdk-b"}},
	})
	hc, rec := newClient(t, h1)
	client := newSDK(gw, gatewayKey, hc)
	want := []string{"gpt-sdk-exact", "claude-sdk-a", "claude-sdk-b"}

	opage, err := client.openai.Models.List(ctx)
	if err != nil {
		t.Fatalf("OpenAI SDK, list models: %s", describeErr(err))
	}
	var ids []string
	for _, m := range opage.Data {
		ids = append(ids, m.ID)
		wantOwner := ap.Name
		if m.ID == "gpt-sdk-exact" {
			wantOwner = op.Name
		}
		if m.OwnedBy != wantOwner {
			t.Errorf("OpenAI SDK: model %s owned by %q, want its provider %q", m.ID, m.OwnedBy, wantOwner)
		}
	}
	if !slices.Equal(ids, want) {
		t.Errorf("OpenAI SDK lists models %v, want %v", ids, want)
	}
	if m, err := client.openai.Models.Get(ctx, "claude-sdk-a"); err != nil || m.ID != "claude-sdk-a" {
		t.Errorf("OpenAI SDK, get a routed model: %+v, %v", m, err)
	}
	if _, err := client.openai.Models.Get(ctx, "no-such-model"); !isStatus(err, http.StatusNotFound) {
		t.Errorf("OpenAI SDK, get an unrouted model: %v, want a typed 404", err)
	}

	apage, err := client.anthropic.Models.List(ctx, anthropic.ModelListParams{})
	if err != nil {
		t.Fatalf("Anthropic SDK, list models: %v", err)
	}
	ids = ids[:0]
	for _, m := range apage.Data {
		ids = append(ids, m.ID)
	}
	if !slices.Equal(ids, want) {
		t.Errorf("Anthropic SDK lists models %v, want %v", ids, want)
	}
	if m, err := client.anthropic.Models.Get(ctx, "gpt-sdk-exact", anthropic.ModelGetParams{}); err != nil || m.ID != "gpt-sdk-exact" {
		t.Errorf("Anthropic SDK, get a routed model: %+v, %v", m, err)
	}
	if _, err := client.anthropic.Models.Get(ctx, "no-such-model", anthropic.ModelGetParams{}); !isStatus(err, http.StatusNotFound) {
		t.Errorf("Anthropic SDK, get an unrouted model: %v, want a typed 404", err)
	}

	const text = "Count the tokens of this sentence, please."
	count := func(model string) (*anthropic.MessageTokensCount, error) {
		return client.anthropic.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
			Model:    anthropic.Model(model),
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
		})
	}
	if n, err := count("claude-sdk-a"); err != nil || n.InputTokens != mockTokens(len(text)) {
		t.Errorf("count_tokens on an Anthropic provider: %+v, %v; want %d tokens", n, err, mockTokens(len(text)))
	}
	_, err = count("gpt-sdk-exact")
	if aerr, ok := errors.AsType[*anthropic.Error](err); !ok || aerr.StatusCode != http.StatusBadRequest || aerr.Type() != "invalid_request_error" {
		t.Errorf("count_tokens on an OpenAI provider: %v, want a typed 400 invalid_request_error", err)
	}
	rec.check(t, h1)
}

// isStatus reports whether err is either SDK's API error with status.
func isStatus(err error, status int) bool {
	if oerr, ok := errors.AsType[*openai.Error](err); ok {
		return oerr.StatusCode == status
	}
	if aerr, ok := errors.AsType[*anthropic.Error](err); ok {
		return aerr.StatusCode == status
	}
	return false
}
