package gateway

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"

	"github.com/straitgw/strait/internal/llm/limits"
	"github.com/straitgw/strait/internal/llm/translate"
	"github.com/straitgw/strait/internal/mockllm"
)

// The official SDKs read the gateway's 429 as their rate-limit error,
// with its retry-after.
func TestSDKSeeRateLimit(t *testing.T) {
	_, url := startMock(t, mockllm.Options{})
	h := keyed(t, url, limits.Limits{RPM: 2}, nil)
	ctx := context.Background()
	oc := openai.NewClient(openaioption.WithBaseURL(h.url+"/v1/"), openaioption.WithAPIKey(testKey), openaioption.WithMaxRetries(0))
	ac := anthropic.NewClient(anthropicoption.WithBaseURL(h.url+"/"), anthropicoption.WithAPIKey(testKey), anthropicoption.WithMaxRetries(0))
	oparams := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	aparams := anthropic.MessageNewParams{Model: "claude-x", MaxTokens: 10, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	if _, err := oc.Chat.Completions.New(ctx, oparams); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Messages.New(ctx, aparams); err != nil {
		t.Fatal(err)
	}
	_, err := oc.Chat.Completions.New(ctx, oparams)
	var oerr *openai.Error
	if !errors.As(err, &oerr) || oerr.StatusCode != 429 || oerr.Code != "rate_limit_exceeded" || oerr.Response.Header.Get("Retry-After") == "" {
		t.Errorf("OpenAI SDK: %v, want a 429 rate_limit_exceeded with retry-after", err)
	}
	_, err = ac.Messages.New(ctx, aparams)
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != 429 || aerr.Type() != "rate_limit_error" || aerr.Response.Header.Get("Retry-After") == "" {
		t.Errorf("Anthropic SDK: %v, want a 429 rate_limit_error with retry-after", err)
	}
}

// The SDKs' own retries work with the gateway's 503: a route whose one
// target is ejected answers 503 with retry-after-ms until the cooldown
// ends; the SDK waits that long, retries, and the probe brings the
// target back.
func TestSDKRetryOnUnavailable(t *testing.T) {
	for _, d := range []translate.Dialect{translate.OpenAI, translate.Anthropic} {
		t.Run(string(d), func(t *testing.T) {
			p := newSwitchable(t, translate.OpenAI)
			h := newGW(t, []Provider{oaProvider("a", p.fp.srv.URL)}, []Route{{
				Match: "gpt-*", Provider: "a",
				Health: Health{Failures: 1, Window: time.Minute, Cooldown: 300 * time.Millisecond},
			}}, nil)
			// Eject the target with one failure, then mend it.
			p.down.Store(true)
			read(t, translate.OpenAI, h.post(t, client(false), translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false)))
			p.down.Store(false)
			ctx := context.Background()
			var err error
			if d == translate.OpenAI {
				oc := openai.NewClient(openaioption.WithBaseURL(h.url+"/v1/"), openaioption.WithAPIKey(testKey), openaioption.WithMaxRetries(3))
				_, err = oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
			} else {
				ac := anthropic.NewClient(anthropicoption.WithBaseURL(h.url+"/"), anthropicoption.WithAPIKey(testKey), anthropicoption.WithMaxRetries(3))
				_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "gpt-4o", MaxTokens: 10, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
			}
			if err != nil {
				t.Fatalf("the SDK's retries did not get through: %v", err)
			}
			if v := h.metricValue(t, "strait_llm_errors_total", "kind", "unavailable"); v < 1 {
				t.Errorf("the gateway answered 503 %v times, want at least once (the SDK retried it)", v)
			}
		})
	}
}
