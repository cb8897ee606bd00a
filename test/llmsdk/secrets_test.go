package llmsdk_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/straitgw/strait/internal/llm/gateway"
	"github.com/straitgw/strait/internal/llm/translate"
)

// TestProviderKeyNotEchoed: a provider that quotes the key it was sent in
// its error, as OpenAI does for a wrong key, before a stream (401) or in an
// error event mid-stream. Whatever each SDK makes of the error (its
// message, its raw JSON, its Error() text), the key is not in it.
func TestProviderKeyNotEchoed(t *testing.T) {
	t.Parallel()
	const keyOA = "sk-proj-Hx8Qm2Vt7Lw4Zc9Rb3NfY6KdPsJ1uEa5GoItVyAa"
	const keyAN = "sk-ant-api03-Jw4rB8nZc3Xq7vT2mLk9Pd5Hs1Gf6YtRe0UiAA"
	keys := map[translate.Dialect]string{translate.OpenAI: keyOA, translate.Anthropic: keyAN}
	for _, pr := range pairs {
		t.Run(pr.String(), func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			url := startEchoingProvider(t, pr.provider)
			up := gateway.Provider{Name: "echo", Dialect: pr.provider, BaseURL: url, APIKey: keys[pr.provider],
				ResponseTimeout: clientTimeout, RequestTimeout: clientTimeout}
			gw := startGateway(t, []gateway.Provider{up}, []gateway.Route{{Match: "*", Provider: "echo"}})
			hc, _ := newClient(t, h1)
			client := newSDK(gw, gatewayKey, hc)
			key := keys[pr.provider]
			for _, stream := range []bool{false, true} {
				var err error
				var shown []string
				if pr.client == translate.OpenAI {
					err = openAIError(ctx, client.openai, stream)
					if oerr, ok := errors.AsType[*openai.Error](err); ok {
						shown = append(shown, oerr.Message, oerr.RawJSON(), oerr.Param)
					}
				} else {
					err = anthropicError(ctx, client.anthropic, stream)
					if aerr, ok := errors.AsType[*anthropic.Error](err); ok {
						shown = append(shown, aerr.RawJSON())
					}
				}
				if err == nil {
					t.Fatalf("%s: no error from a provider that refused the key", mode(stream))
				}
				shown = append(shown, err.Error())
				all := strings.Join(shown, "\n")
				if strings.Contains(all, key[len(key)-8:]) || strings.Contains(all, key[:12]) {
					t.Errorf("%s: the SDK's error shows the provider's key:\n%s", mode(stream), all)
				}
				if !strings.Contains(all, gateway.RedactedMark) {
					t.Errorf("%s: the SDK's error lacks the provider's (masked) message:\n%s", mode(stream), all)
				}
			}
		})
	}
}

// startEchoingProvider serves dialect d on 127.0.0.1: a JSON request gets
// 401 quoting the key it came with; a streamed one gets a stream that
// begins and then fails with an error event quoting it.
func startEchoingProvider(t *testing.T, d translate.Dialect) string {
	t.Helper()
	// httptest listens on 127.0.0.1.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct{ Stream bool }
		json.Unmarshal(body, &req)
		key := r.Header.Get("X-Api-Key")
		if d == translate.OpenAI {
			key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		msg := fmt.Sprintf("Incorrect API key provided: %s (that is %s…%s).", key, key[:12], key[len(key)-10:])
		var errJSON []byte
		if d == translate.OpenAI {
			errJSON = mustJSON(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": key, "code": "invalid_api_key"}})
		} else {
			errJSON = mustJSON(map[string]any{"type": "error", "error": map[string]any{"type": "authentication_error", "message": msg}})
		}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write(errJSON)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		if d == translate.OpenAI {
			io.WriteString(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}`+"\n\n")
			fmt.Fprintf(w, "data: %s\n\n", errJSON)
		} else {
			io.WriteString(w, "event: message_start\ndata: "+`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}`+"\n\n")
			fmt.Fprintf(w, "event: error\ndata: %s\n\n", errJSON)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
