package llmsdk_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/straitgw/strait/internal/llm/gateway"
	"github.com/straitgw/strait/internal/llm/translate"
	"github.com/straitgw/strait/internal/mockllm"
)

// TestGatewayKeyRequired calls the gateway with a key it does not hold:
// each SDK gets a 401 as its typed API error in its own dialect, for JSON
// and streaming requests alike, and nothing reaches the provider.
func TestGatewayKeyRequired(t *testing.T) {
	t.Parallel()
	for _, pr := range pairs {
		t.Run(pr.String(), func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			mock, url := startMock(t, mockllm.Options{})
			up := upstream(pr.provider, url, h1)
			gw := startGateway(t, []gateway.Provider{up}, routeAll(up))
			hc, _ := newClient(t, h1)
			// The provider's own key is no gateway key either.
			for _, key := range []string{"not-a-gateway-key", providerKeys[pr.provider]} {
				client := newSDK(gw, key, hc)
				for _, stream := range []bool{false, true} {
					what := mode(stream) + " with key " + key
					if pr.client == translate.OpenAI {
						err := openAIError(ctx, client.openai, stream)
						oerr, ok := errors.AsType[*openai.Error](err)
						if !ok || oerr.StatusCode != http.StatusUnauthorized || oerr.Code != "invalid_api_key" || oerr.Message == "" {
							t.Errorf("%s: the OpenAI SDK got %s, want a 401 *openai.Error with code invalid_api_key and a message", what, describeErr(err))
						}
					} else {
						err := anthropicError(ctx, client.anthropic, stream)
						aerr, ok := errors.AsType[*anthropic.Error](err)
						if !ok || aerr.StatusCode != http.StatusUnauthorized || aerr.Type() != "authentication_error" || aerr.Message == "" {
							t.Errorf("%s: the Anthropic SDK got %v, want a 401 *anthropic.Error of type authentication_error with a message", what, err)
						}
					}
				}
			}
			if n := mock.Requests(); n != 0 {
				t.Errorf("the provider got %d requests from clients the gateway refused", n)
			}
		})
	}
}

// TestProviderKey checks that the provider is sent the key the gateway
// holds for it, where its dialect wants it (OpenAI: Authorization: Bearer;
// Anthropic: x-api-key), and never the client's gateway key. The mock
// provider refuses any other key, and a gateway holding a wrong provider
// key answers 502: the client's key was fine, the gateway's was not.
func TestProviderKey(t *testing.T) {
	t.Parallel()
	for _, pr := range pairs {
		t.Run(pr.String(), func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			mock, url := startMock(t, mockllm.Options{APIKey: providerKeys[pr.provider]})
			good := upstream(pr.provider, url, h2c)
			bad := upstream(pr.provider, url, h2c)
			bad.Name, bad.APIKey = "misconfigured", "sk-not-the-providers-key"
			gw := startGateway(t, []gateway.Provider{good, bad}, []gateway.Route{
				{Match: "sdk-good-key", Provider: good.Name},
				{Match: "sdk-bad-key", Provider: bad.Name},
			})
			hc, _ := newClient(t, h1)
			client := newSDK(gw, gatewayKey, hc)

			for _, stream := range []bool{false, true} {
				if pr.client == translate.OpenAI {
					openAITurn(t, ctx, client.openai, openai.ChatCompletionNewParams{
						Model: "sdk-good-key", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
					}, stream)
				} else {
					anthropicTurn(t, ctx, client.anthropic, anthropic.MessageNewParams{
						Model: "sdk-good-key", MaxTokens: 100, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
					}, stream)
				}
				last, ok := mock.LastRequest()
				if !ok {
					t.Fatal("the provider received no request")
				}
				h := last.Header
				key := providerKeys[pr.provider]
				if pr.provider == translate.OpenAI {
					if got := h.Values("Authorization"); len(got) != 1 || got[0] != "Bearer "+key || h.Get("X-Api-Key") != "" {
						t.Errorf("%s: the OpenAI provider got Authorization %q and x-api-key %q, want only Authorization: Bearer with its key",
							mode(stream), got, h.Get("X-Api-Key"))
					}
				} else {
					if got := h.Values("X-Api-Key"); len(got) != 1 || got[0] != key || h.Get("Authorization") != "" {
						t.Errorf("%s: the Anthropic provider got x-api-key %q and Authorization %q, want only x-api-key with its key",
							mode(stream), got, h.Get("Authorization"))
					}
					if h.Get("Anthropic-Version") == "" {
						t.Errorf("%s: the Anthropic provider got no anthropic-version header", mode(stream))
					}
				}
				for name, values := range h {
					for _, v := range values {
						if strings.Contains(v, gatewayKey) {
							t.Errorf("%s: the client's gateway key reached the provider in header %s", mode(stream), name)
						}
					}
				}
			}

			// A gateway holding the wrong provider key: the provider
			// refuses it, the client gets a 502 that says so.
			var status int
			var msg string
			if pr.client == translate.OpenAI {
				_, err := client.openai.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
					Model: "sdk-bad-key", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
				})
				oerr, ok := errors.AsType[*openai.Error](err)
				if !ok {
					t.Fatalf("the OpenAI SDK got %v, want an *openai.Error", err)
				}
				status, msg = oerr.StatusCode, oerr.Message
			} else {
				_, err := client.anthropic.Messages.New(ctx, anthropic.MessageNewParams{
					Model: "sdk-bad-key", MaxTokens: 100, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
				})
				aerr, ok := errors.AsType[*anthropic.Error](err)
				if !ok {
					t.Fatalf("the Anthropic SDK got %v, want an *anthropic.Error", err)
				}
				status, msg = aerr.StatusCode, aerr.Message
			}
			if status != http.StatusBadGateway || !strings.Contains(msg, bad.Name) {
				t.Errorf("with a wrong provider key the SDK got %d %q, want 502 naming provider %q", status, msg, bad.Name)
			}
			if last, _ := mock.LastRequest(); !strings.Contains(last.Header.Get("Authorization")+last.Header.Get("X-Api-Key"), bad.APIKey) {
				t.Errorf("the provider did not get the misconfigured key: the 502 is not about it")
			}
		})
	}
}
