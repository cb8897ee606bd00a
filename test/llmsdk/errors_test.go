package llmsdk_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/straitgw/strait/internal/llm/gateway"
	"github.com/straitgw/strait/internal/llm/translate"
	"github.com/straitgw/strait/internal/mockllm"
)

// providerError is an error as a provider sent it.
type providerError struct {
	status        int
	typ, message  string
	code          string // OpenAI's error.code
	retryAfter    string
	streamStarted bool // the error came as an event in a 200 stream
}

// probe calls the mock provider directly, as the gateway would, and
// returns the error it answers with, so that a test compares what an SDK
// got through the gateway with what the provider actually said. For a
// stream that starts well and then fails, it returns the error event.
func probe(t *testing.T, url string, d translate.Dialect, stream bool) providerError {
	t.Helper()
	path, body := "/v1/chat/completions", `{"model":"probe","messages":[{"role":"user","content":"hi"}]`
	if d == translate.Anthropic {
		path, body = "/v1/messages", `{"model":"probe","max_tokens":100,"messages":[{"role":"user","content":"hi"}]`
	}
	if stream {
		body += `,"stream":true}`
	} else {
		body += `}`
	}
	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	tr := &http.Transport{} // no proxy from the environment
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("probing the provider: %v", err)
	}
	defer resp.Body.Close()
	pe := providerError{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	var errJSON []byte
	if resp.StatusCode == http.StatusOK {
		pe.streamStarted = true
		sc := bufio.NewScanner(resp.Body)
		for i := 0; i < maxEvents && sc.Scan(); i++ {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, `"error"`) {
				errJSON = []byte(data)
			}
		}
	} else {
		var b strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for i := 0; i < maxEvents && sc.Scan(); i++ {
			b.WriteString(sc.Text())
		}
		errJSON = []byte(b.String())
	}
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(errJSON, &e); err != nil || e.Error.Message == "" {
		t.Fatalf("the provider's answer holds no error (status %d): %s", resp.StatusCode, errJSON)
	}
	pe.typ, pe.message, pe.code = e.Error.Type, e.Error.Message, e.Error.Code
	return pe
}

// anthropicType is the Anthropic error type for an HTTP status, as the
// gateway must name a translated error.
var anthropicType = map[int]string{
	400: "invalid_request_error",
	429: "rate_limit_error",
	500: "api_error",
	503: "overloaded_error",
	529: "overloaded_error",
}

// TestProviderErrors has the provider answer each error an LLM API sends
// (429, 500, 529, its dialect's overload error, 400) and checks that each
// SDK gets it as its typed API error, for JSON and streaming requests: the
// status (an Anthropic 529 becomes 503 for OpenAI clients, who do not
// know 529), the provider's own message, the error type in the client's
// dialect, and for 429 the rate-limit code and Retry-After.
func TestProviderErrors(t *testing.T) {
	t.Parallel()
	kinds := []mockllm.ErrorKind{"429", "500", "529", mockllm.KindOverloaded, "400"}
	for _, pr := range pairs {
		for _, kind := range kinds {
			t.Run(subtestName(pr, kind), func(t *testing.T) {
				t.Parallel()
				ctx := testContext(t)
				mock, url := startMock(t, mockllm.Options{ErrorRate: 1, ErrorKinds: []mockllm.ErrorKind{kind}})
				sent := probe(t, url, pr.provider, false)
				up := upstream(pr.provider, url, h2c)
				gw := startGateway(t, []gateway.Provider{up}, routeAll(up))
				hc, rec := newClient(t, h2c)
				client := newSDK(gw, gatewayKey, hc)

				wantStatus := sent.status
				if pr.client == translate.OpenAI && pr.provider == translate.Anthropic && sent.status == 529 {
					wantStatus = http.StatusServiceUnavailable
				}
				wantType := anthropicType[wantStatus]
				if !pr.translated() {
					wantType = sent.typ // forwarded as the provider sent it
				}
				for _, stream := range []bool{false, true} {
					var err error
					if pr.client == translate.OpenAI {
						err = openAIError(ctx, client.openai, stream)
					} else {
						err = anthropicError(ctx, client.anthropic, stream)
					}
					what := mode(stream)
					if pr.client == translate.OpenAI {
						oerr, ok := errors.AsType[*openai.Error](err)
						if !ok {
							t.Fatalf("%s: the OpenAI SDK returned %v (%T), want its *openai.Error", what, err, err)
						}
						if oerr.StatusCode != wantStatus || oerr.Message != sent.message {
							t.Errorf("%s: the SDK got %d %q, want %d with the provider's message %q", what, oerr.StatusCode, oerr.Message, wantStatus, sent.message)
						}
						if wantStatus == http.StatusTooManyRequests && oerr.Code != "rate_limit_exceeded" {
							t.Errorf("%s: a 429 with code %q, want rate_limit_exceeded", what, oerr.Code)
						}
						checkRetryAfter(t, what, oerr.Response, sent)
					} else {
						aerr, ok := errors.AsType[*anthropic.Error](err)
						if !ok {
							t.Fatalf("%s: the Anthropic SDK returned %v (%T), want its *anthropic.Error", what, err, err)
						}
						if aerr.StatusCode != wantStatus || aerr.Message != sent.message || string(aerr.Type()) != wantType {
							t.Errorf("%s: the SDK got %d %s %q, want %d %s with the provider's message %q",
								what, aerr.StatusCode, aerr.Type(), aerr.Message, wantStatus, wantType, sent.message)
						}
						checkRetryAfter(t, what, aerr.Response, sent)
					}
				}
				rec.check(t, h2c)
				if got := mock.Requests(); got != 3 {
					t.Errorf("the provider got %d requests (the probe and one per SDK call), want 3: does the gateway retry?", got)
				}
			})
		}
	}
}

func checkRetryAfter(t *testing.T, what string, resp *http.Response, sent providerError) {
	t.Helper()
	if sent.retryAfter == "" {
		return
	}
	if resp == nil || resp.Header.Get("Retry-After") != sent.retryAfter {
		t.Errorf("%s: the provider's Retry-After %q did not reach the SDK", what, sent.retryAfter)
	}
}

// openAIError makes one request that must fail and returns the error.
func openAIError(ctx context.Context, c openai.Client, stream bool) error {
	params := openai.ChatCompletionNewParams{Model: "sdk-error-model", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	if !stream {
		_, err := c.Chat.Completions.New(ctx, params)
		return err
	}
	s := c.Chat.Completions.NewStreaming(ctx, params)
	defer s.Close()
	for i := 0; i < maxEvents && s.Next(); i++ {
	}
	return s.Err()
}

func anthropicError(ctx context.Context, c anthropic.Client, stream bool) error {
	params := anthropic.MessageNewParams{Model: "sdk-error-model", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	if !stream {
		_, err := c.Messages.New(ctx, params)
		return err
	}
	s := c.Messages.NewStreaming(ctx, params)
	defer s.Close()
	for i := 0; i < maxEvents && s.Next(); i++ {
	}
	return s.Err()
}

// partialStream is what an SDK made of a stream that failed.
type partialStream struct {
	text string // the text accumulated before the failure
	err  error
}

func openAIPartial(t *testing.T, ctx context.Context, c openai.Client) partialStream {
	t.Helper()
	s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         "sdk-cut-model",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story.")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	defer s.Close()
	var acc openai.ChatCompletionAccumulator
	for i := 0; i < maxEvents && s.Next(); i++ {
		if !acc.AddChunk(s.Current()) {
			t.Fatalf("the OpenAI SDK's accumulator rejected %s", s.Current().RawJSON())
		}
	}
	var p partialStream
	if len(acc.Choices) > 0 {
		p.text = acc.Choices[0].Message.Content
	}
	p.err = s.Err()
	return p
}

func anthropicPartial(t *testing.T, ctx context.Context, c anthropic.Client) partialStream {
	t.Helper()
	s := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: "sdk-cut-model", MaxTokens: 1000,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me a story."))},
	})
	defer s.Close()
	var acc anthropic.Message
	for i := 0; i < maxEvents && s.Next(); i++ {
		if err := acc.Accumulate(s.Current()); err != nil {
			t.Fatalf("the Anthropic SDK cannot accumulate %s: %v", s.Current().Type, err)
		}
	}
	var p partialStream
	for _, b := range acc.Content {
		p.text += b.Text
	}
	p.err = s.Err()
	return p
}

// checkPartial fails unless the stream failed with the SDK's own stream
// error, after part of the answer and not all of it: a cut stream must
// never look like a short but complete answer. It returns the error's
// text.
func checkPartial(t *testing.T, client translate.Dialect, p partialStream, full string) string {
	t.Helper()
	if p.err == nil {
		t.Fatalf("the stream ended without an error after %q: a cut answer looked complete to the SDK", p.text)
	}
	if !strings.HasPrefix(full, p.text) || len(p.text) >= len(full) {
		t.Errorf("the SDK accumulated %q before the error, want a strict prefix of %q", p.text, full)
	}
	if client == translate.OpenAI {
		se, ok := errors.AsType[*ssestream.StreamError](p.err)
		if !ok {
			t.Fatalf("the OpenAI SDK failed with %v (%T), want its *ssestream.StreamError for an error chunk", p.err, p.err)
		}
		return se.Message
	}
	aerr, ok := errors.AsType[*anthropic.Error](p.err)
	if !ok {
		t.Fatalf("the Anthropic SDK failed with %v (%T), want its *anthropic.Error for an error event", p.err, p.err)
	}
	return string(aerr.Type()) + ": " + aerr.Message
}

// TestStreamBreaksOff has the provider break its stream half-way, with
// HTTP/1.1 or h2c on both hops, either with an error event of its dialect
// (midstream) or by dropping the connection (cut), and checks that each
// SDK's stream fails with the SDK's error after the part that arrived:
// never a silently truncated success. The same faults on JSON requests
// give a 502.
func TestStreamBreaksOff(t *testing.T) {
	t.Parallel()
	for _, pr := range pairs {
		for _, kind := range []mockllm.ErrorKind{mockllm.KindMidstream, mockllm.KindCut} {
			for _, pp := range protos {
				t.Run(subtestName(pr, kind, string(pp)), func(t *testing.T) {
					t.Parallel()
					ctx := testContext(t)
					mock, url := startMock(t, mockllm.Options{Deltas: 6, ErrorRate: 1, ErrorKinds: []mockllm.ErrorKind{kind}})
					up := upstream(pr.provider, url, pp)
					gw := startGateway(t, []gateway.Provider{up}, routeAll(up))
					hc, rec := newClient(t, pp)
					client := newSDK(gw, gatewayKey, hc)

					var p partialStream
					if pr.client == translate.OpenAI {
						p = openAIPartial(t, ctx, client.openai)
					} else {
						p = anthropicPartial(t, ctx, client.anthropic)
					}
					msg := checkPartial(t, pr.client, p, mock.Text())
					if p.text == "" {
						t.Errorf("the SDK got none of the text the provider sent before the break")
					}
					if kind == mockllm.KindMidstream {
						// The provider's own error event: its message must
						// come through.
						if sent := probe(t, url, pr.provider, true); !strings.Contains(msg, sent.message) {
							t.Errorf("the SDK's error %q does not carry the provider's message %q", msg, sent.message)
						}
					} else if !strings.Contains(msg, up.Name) {
						t.Errorf("the SDK's error %q does not say which provider broke off (%s)", msg, up.Name)
					}

					var err error
					if pr.client == translate.OpenAI {
						err = openAIError(ctx, client.openai, false)
						if oerr, ok := errors.AsType[*openai.Error](err); !ok || oerr.StatusCode != http.StatusBadGateway {
							t.Errorf("JSON: the OpenAI SDK got %s, want a 502 *openai.Error", describeErr(err))
						}
					} else {
						err = anthropicError(ctx, client.anthropic, false)
						if aerr, ok := errors.AsType[*anthropic.Error](err); !ok || aerr.StatusCode != http.StatusBadGateway {
							t.Errorf("JSON: the Anthropic SDK got %v, want a 502 *anthropic.Error", err)
						}
					}
					rec.check(t, pp)
				})
			}
		}
	}
}

// TestStreamEndsEarly has the provider end its stream half-way but
// cleanly: the body ends as it should, only the dialect's terminator
// ([DONE], message_stop) is missing. The SDKs would take that for a
// complete answer (neither checks for the terminator), so the gateway must
// turn it into an error event.
func TestStreamEndsEarly(t *testing.T) {
	t.Parallel()
	const full = "The first half of this answer arrives, the second never does."
	for _, pr := range pairs {
		t.Run(pr.String(), func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			sp := startScripted(t)
			up := upstream(pr.provider, sp.url, h1)
			gw := startGateway(t, []gateway.Provider{up}, routeAll(up))
			hc, rec := newClient(t, h2c)
			client := newSDK(gw, gatewayKey, hc)
			sp.push(answer{text: full, stop: "end_turn", usage: usage{input: 10, output: 14}, endEarly: true})

			var p partialStream
			if pr.client == translate.OpenAI {
				p = openAIPartial(t, ctx, client.openai)
			} else {
				p = anthropicPartial(t, ctx, client.anthropic)
			}
			checkPartial(t, pr.client, p, full)
			rec.check(t, h2c)
		})
	}
}
