package mockllm_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/mockllm"
	"github.com/straitgw/strait/internal/testkit"
)

// These tests read the wire as raw HTTP: event names and order, what
// comes after the last event, status codes and error shapes.

const (
	oaText        = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello there"}]}`
	oaStream      = `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Hello there"}]}`
	oaStreamUsage = `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hello there"}]}`
	anText        = `{"model":"claude-sonnet-4-5","max_tokens":1000,"messages":[{"role":"user","content":"Hello there"}]}`
	anStream      = `{"model":"claude-sonnet-4-5","max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"Hello there"}]}`
	anToolStream  = `{"model":"claude-sonnet-4-5","max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"Weather?"}],"tools":[{"name":"get_weather","input_schema":` + weatherSchema + `}]}`
	oaToolStream  = `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":` + weatherSchema + `}}]}`
)

var helloTokens = tokens(len("Hello there"))

func TestAnthropicStreamEvents(t *testing.T) {
	s, url := start(t, mockllm.Options{Deltas: 6})
	for _, tc := range []struct {
		name, body, block, delta, stop string
	}{
		{"text", anStream, "text", "text_delta", "end_turn"},
		{"tool", anToolStream, "tool_use", "input_json_delta", "tool_use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, url, "/v1/messages", tc.body)
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			evs, err := readEvents(resp.Body)
			if err != nil {
				t.Fatalf("reading the stream: %v", err)
			}
			want := []string{"message_start", "content_block_start", "ping"}
			for range 6 {
				want = append(want, "content_block_delta")
			}
			want = append(want, "content_block_stop", "message_delta", "message_stop")
			if !slices.Equal(names(evs), want) {
				t.Fatalf("events %v,\nwant   %v (and nothing after message_stop)", names(evs), want)
			}
			var joined strings.Builder
			for _, e := range evs {
				m := obj(t, e.data)
				if m["type"] != e.name {
					t.Errorf("event %s carries type %v", e.name, m["type"])
				}
				switch e.name {
				case "message_start":
					if path(m, "message", "usage", "input_tokens") != float64(helloTokens) && tc.name == "text" {
						t.Errorf("message_start usage %v, want input_tokens %d", path(m, "message", "usage"), helloTokens)
					}
					if path(m, "message", "stop_reason") != nil || path(m, "message", "role") != "assistant" {
						t.Errorf("message_start message %v", m["message"])
					}
				case "content_block_start":
					if path(m, "content_block", "type") != tc.block || path(m, "index") != 0.0 {
						t.Errorf("content_block_start %v", m)
					}
				case "content_block_delta":
					if path(m, "delta", "type") != tc.delta {
						t.Errorf("delta %v, want %s", m["delta"], tc.delta)
					}
					if s, ok := path(m, "delta", "text").(string); ok {
						joined.WriteString(s)
					}
					if s, ok := path(m, "delta", "partial_json").(string); ok {
						joined.WriteString(s)
					}
				case "message_delta":
					if path(m, "delta", "stop_reason") != tc.stop {
						t.Errorf("message_delta stop_reason %v, want %s", path(m, "delta", "stop_reason"), tc.stop)
					}
					if _, ok := path(m, "usage", "output_tokens").(float64); !ok {
						t.Errorf("message_delta has no usage.output_tokens: %v", m)
					}
				}
			}
			if tc.name == "text" && joined.String() != s.Text() {
				t.Errorf("deltas join to %q, want %q", joined.String(), s.Text())
			}
			if tc.name == "tool" && !json.Valid([]byte(joined.String())) {
				t.Errorf("partial_json joins to %q, not JSON", joined.String())
			}
		})
	}
}

func TestOpenAIStreamFraming(t *testing.T) {
	s, url := start(t, mockllm.Options{Deltas: 3})
	for _, tc := range []struct {
		name, body string
		chunks     int // before [DONE]
		usage      bool
	}{
		{"text", oaStream, 1 + 3 + 1, false},
		{"text with usage", oaStreamUsage, 1 + 3 + 1 + 1, true},
		{"tool", oaToolStream, 1 + 3 + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, url, "/v1/chat/completions", tc.body)
			evs, err := readEvents(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != tc.chunks+1 || evs[len(evs)-1].data != "[DONE]" {
				t.Fatalf("%d events, last %q; want %d chunks then [DONE], nothing after", len(evs), evs[len(evs)-1].data, tc.chunks)
			}
			var text strings.Builder
			finishes := 0
			for i, e := range evs[:tc.chunks] {
				if e.name != "" {
					t.Errorf("chunk %d has event name %q; OpenAI streams have none", i, e.name)
				}
				m := obj(t, e.data)
				if m["object"] != "chat.completion.chunk" {
					t.Errorf("chunk %d object %v", i, m["object"])
				}
				_, hasUsage := m["usage"]
				if hasUsage != tc.usage {
					t.Errorf("chunk %d: usage present %v, want %v", i, hasUsage, tc.usage)
				}
				if i == 0 && path(m, "choices", 0, "delta", "role") != "assistant" {
					t.Errorf("first chunk's delta %v lacks role assistant", path(m, "choices", 0, "delta"))
				}
				if s, ok := path(m, "choices", 0, "delta", "content").(string); ok {
					text.WriteString(s)
				}
				if f := path(m, "choices", 0, "finish_reason"); f != nil {
					finishes++
					want := "stop"
					if tc.name == "tool" {
						want = "tool_calls"
					}
					if f != want || i != 3+1 {
						t.Errorf("finish_reason %v in chunk %d, want %s in chunk 4", f, i, want)
					}
				}
			}
			if finishes != 1 {
				t.Errorf("%d chunks with a finish_reason, want 1", finishes)
			}
			if tc.usage {
				last := obj(t, evs[tc.chunks-1].data)
				if ch, _ := last["choices"].([]any); ch == nil || len(ch) != 0 || path(last, "usage", "prompt_tokens") != float64(helloTokens) {
					t.Errorf("usage chunk %v, want empty choices and prompt_tokens %d", last, helloTokens)
				}
			}
			if tc.name != "tool" && text.String() != s.Text() {
				t.Errorf("content joins to %q, want %q", text.String(), s.Text())
			}
			if tc.name == "tool" {
				first := obj(t, evs[0].data)
				call := path(first, "choices", 0, "delta", "tool_calls", 0)
				if path(call, "index") != 0.0 || path(call, "type") != "function" || path(call, "function", "name") != "get_weather" ||
					path(call, "function", "arguments") != "" || !strings.HasPrefix(fmt.Sprint(path(call, "id")), "call_") {
					t.Errorf("first tool-call delta %v", call)
				}
			}
		})
	}
}

// Deltas are spread over the latency, the first at once. Only orderings
// and lower bounds the server itself enforces are asserted, so a slow
// machine cannot fail the test, plus one generous upper bound: the first
// delta arrives before the last one is due.
func TestDeltasSpreadOverLatency(t *testing.T) {
	const latency = time.Second
	_, url := start(t, mockllm.Options{Latency: latency, Deltas: 4})
	for _, tc := range []struct {
		name, path, body string
		delta            func(e event) bool
		end              string
	}{
		{"anthropic", "/v1/messages", anStream, func(e event) bool { return e.name == "content_block_delta" }, "message_stop"},
		{"openai", "/v1/chat/completions", oaStream, func(e event) bool {
			return strings.Contains(e.data, `"content":"`) && !strings.Contains(e.data, `"role"`)
		}, "[DONE]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sent := time.Now()
			resp := post(t, url, tc.path, tc.body)
			evs, err := readEvents(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			var deltas []time.Time
			var end time.Time
			for _, e := range evs {
				if tc.delta(e) {
					deltas = append(deltas, e.at)
				}
				if e.name == tc.end || e.data == tc.end {
					end = e.at
				}
			}
			if len(deltas) != 4 || end.IsZero() {
				t.Fatalf("%d deltas, end %v; want 4 and an end", len(deltas), end)
			}
			lastDue := sent.Add(latency * 3 / 4)
			if !deltas[0].Before(lastDue) {
				t.Errorf("the first delta arrived %v after the request, not before the last was due (%v)", deltas[0].Sub(sent), latency*3/4)
			}
			for i := 1; i < 4; i++ {
				if due := sent.Add(latency * time.Duration(i) / 4); deltas[i].Before(due) {
					t.Errorf("delta %d arrived %v after the request, before it was due at %v", i, deltas[i].Sub(sent), latency*time.Duration(i)/4)
				}
			}
			if end.Before(sent.Add(latency)) {
				t.Errorf("the stream ended %v after the request, before the latency %v", end.Sub(sent), latency)
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		sent := time.Now()
		resp := post(t, url, "/v1/chat/completions", oaText)
		decode(t, resp, 200)
		if got := time.Since(sent); got < latency {
			t.Errorf("answered after %v, before the latency %v", got, latency)
		}
	})
}

func TestErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		kind         mockllm.ErrorKind
		oaStatus     int
		oaType       string
		anStatus     int
		anType       string
		retryAfter   bool
		oaCode       any
		messageCheck string
	}{
		{"429", 429, "requests", 429, "rate_limit_error", true, "rate_limit_exceeded", ""},
		{"500", 500, "server_error", 500, "api_error", false, nil, ""},
		{"503", 503, "server_error", 503, "api_error", false, nil, ""},
		{"529", 529, "server_error", 529, "overloaded_error", false, nil, ""},
		{"504", 504, "server_error", 504, "timeout_error", false, nil, ""},
		{"403", 403, "invalid_request_error", 403, "permission_error", false, nil, ""},
		{mockllm.KindOverloaded, 503, "server_error", 529, "overloaded_error", false, nil, "Overloaded"},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			s, url := start(t, mockllm.Options{Latency: time.Hour, ErrorRate: 1, ErrorKinds: []mockllm.ErrorKind{tc.kind}})
			// Errors come at once, whatever the latency.
			resp := post(t, url, "/v1/chat/completions", oaStream)
			m := decode(t, resp, tc.oaStatus)
			if path(m, "error", "type") != tc.oaType || path(m, "error", "code") != tc.oaCode || path(m, "error", "message") == "" {
				t.Errorf("OpenAI error %v, want type %s code %v", m, tc.oaType, tc.oaCode)
			}
			if _, ok := path(m, "error").(map[string]any)["param"]; !ok {
				t.Errorf("OpenAI error %v lacks param", m)
			}
			if (resp.Header.Get("Retry-After") != "") != tc.retryAfter {
				t.Errorf("OpenAI retry-after %q", resp.Header.Get("Retry-After"))
			}

			resp = post(t, url, "/v1/messages", anText)
			m = decode(t, resp, tc.anStatus)
			if m["type"] != "error" || path(m, "error", "type") != tc.anType || !strings.HasPrefix(fmt.Sprint(m["request_id"]), "req_") {
				t.Errorf("Anthropic error %v, want type %s and a request_id", m, tc.anType)
			}
			if tc.messageCheck != "" && path(m, "error", "message") != tc.messageCheck {
				t.Errorf("Anthropic message %v, want %q", path(m, "error", "message"), tc.messageCheck)
			}
			if resp.Header.Get("Request-Id") != m["request_id"] {
				t.Errorf("request-id header %q, body %v", resp.Header.Get("Request-Id"), m["request_id"])
			}
			if s.Count(mockllm.OpenAI, true, tc.oaStatus) != 1 || s.Count(mockllm.Anthropic, false, tc.anStatus) != 1 {
				t.Errorf("counts %+v", s.Counts())
			}
		})
	}
}

func TestTimeoutKind(t *testing.T) {
	s, url := start(t, mockllm.Options{Hang: 50 * time.Millisecond, ErrorRate: 1, ErrorKinds: []mockllm.ErrorKind{mockllm.KindTimeout}})
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader(anText))
	resp, err := client.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got an answer (%d), want a dropped connection", resp.StatusCode)
	}
	if n := s.Count(mockllm.Anthropic, false, 0); n != 1 {
		t.Errorf("dropped count %d, want 1: %+v", n, s.Counts())
	}

	// Close ends a hang at once, however long it was to last.
	s2, url2 := start(t, mockllm.Options{Hang: time.Hour, ErrorRate: 1, ErrorKinds: []mockllm.ErrorKind{mockllm.KindTimeout}})
	done := make(chan error, 1)
	go func() {
		resp, err := client.Post(url2+"/v1/chat/completions", "application/json", strings.NewReader(oaText))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	for i := 0; s2.Requests() == 0 && i < 1000; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	s2.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("the held request got an answer")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not end the held request")
	}
}

func TestMidstreamAndCut(t *testing.T) {
	for _, kind := range []mockllm.ErrorKind{mockllm.KindMidstream, mockllm.KindCut} {
		t.Run(string(kind), func(t *testing.T) {
			s, url := start(t, mockllm.Options{Deltas: 4, ErrorRate: 1, ErrorKinds: []mockllm.ErrorKind{kind}})

			evs, err := readEvents(post(t, url, "/v1/messages", anStream).Body)
			want := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta"}
			if kind == mockllm.KindMidstream {
				want = append(want, "error")
				if err != nil {
					t.Errorf("a midstream error ends the stream cleanly, got %v", err)
				}
				if m := obj(t, evs[len(evs)-1].data); m["type"] != "error" || path(m, "error", "type") != "overloaded_error" {
					t.Errorf("error event %v", m)
				}
			} else if err == nil {
				t.Error("a cut stream ended cleanly")
			}
			if !slices.Equal(names(evs), want) {
				t.Errorf("Anthropic events %v, want %v", names(evs), want)
			}

			evs, err = readEvents(post(t, url, "/v1/chat/completions", oaStream).Body)
			n := len(evs)
			if kind == mockllm.KindMidstream {
				if err != nil || n != 4 || path(obj(t, evs[3].data), "error", "type") != "server_error" {
					t.Errorf("OpenAI: %d events (%v), want role, 2 deltas, then an error object", n, err)
				}
			} else if err == nil || n != 3 {
				t.Errorf("OpenAI: %d events, end %v; want role, 2 deltas, then a broken stream", n, err)
			}
			for _, e := range evs {
				if e.data == "[DONE]" {
					t.Error("a failed stream sent [DONE]")
				}
			}

			// A JSON answer is cut in the middle.
			resp := post(t, url, "/v1/messages", anText)
			if b, err := io.ReadAll(resp.Body); err == nil || json.Valid(b) {
				t.Errorf("JSON answer read fully (%v): %s", err, b)
			}
			if s.Count(mockllm.Anthropic, true, 200) != 1 || s.Count(mockllm.OpenAI, true, 200) != 1 || s.Count(mockllm.Anthropic, false, 200) != 1 {
				t.Errorf("counts %+v", s.Counts())
			}
		})
	}
}

func TestAPIKeyHeaders(t *testing.T) {
	_, url := start(t, mockllm.Options{APIKey: "k1"})
	for _, tc := range []struct {
		name, path, body string
		headers          []string
		want             int
	}{
		{"openai bearer", "/v1/chat/completions", oaText, []string{"Authorization", "Bearer k1"}, 200},
		{"openai wrong bearer", "/v1/chat/completions", oaText, []string{"Authorization", "Bearer k2"}, 401},
		{"openai x-api-key only", "/v1/chat/completions", oaText, []string{"x-api-key", "k1"}, 401},
		{"openai no key", "/v1/chat/completions", oaText, nil, 401},
		{"anthropic x-api-key", "/v1/messages", anText, []string{"x-api-key", "k1"}, 200},
		{"anthropic bearer", "/v1/messages", anText, []string{"Authorization", "Bearer k1"}, 200},
		{"anthropic wrong x-api-key", "/v1/messages", anText, []string{"x-api-key", "k2", "Authorization", "Bearer k1"}, 401},
		{"anthropic no key", "/v1/messages", anText, nil, 401},
		{"count_tokens no key", "/v1/messages/count_tokens", anText, nil, 401},
		{"models openai", "/v1/models", "", []string{"Authorization", "Bearer k2"}, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resp *http.Response
			if tc.path == "/v1/models" {
				req, _ := http.NewRequest(http.MethodGet, url+tc.path, nil)
				req.Header.Set(tc.headers[0], tc.headers[1])
				var err error
				if resp, err = client.Do(req); err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
			} else {
				resp = post(t, url, tc.path, tc.body, tc.headers...)
			}
			m := decode(t, resp, tc.want)
			if tc.want != 401 {
				return
			}
			if strings.HasPrefix(tc.name, "openai") || strings.HasPrefix(tc.name, "models") {
				if path(m, "error", "code") != "invalid_api_key" {
					t.Errorf("OpenAI 401 %v", m)
				}
			} else if path(m, "error", "type") != "authentication_error" {
				t.Errorf("Anthropic 401 %v", m)
			}
		})
	}
}

func TestBadRequests(t *testing.T) {
	_, url := start(t, mockllm.Options{MaxBodyBytes: 4096})
	for _, tc := range []struct {
		name, path, body string
		status           int
		param            string // OpenAI param, or a substring of the Anthropic message
	}{
		{"openai malformed", "/v1/chat/completions", `{"model":`, 400, ""},
		{"anthropic malformed", "/v1/messages", `{"model":`, 400, "not valid JSON at byte 9: expected a value, found the end of the body"},
		{"openai wrong type", "/v1/chat/completions", `{"model":"m","messages":"hi"}`, 400, "messages"},
		{"openai content a number", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"user","content":5}]}`, 400, "messages.[1].content"},
		{"openai part not an object", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[5]}]}`, 400, "messages.[0].content.[0]"},
		{"openai max_tokens a string", "/v1/chat/completions", `{"model":"m","max_tokens":"5","messages":[{"role":"user","content":"x"}]}`, 400, "max_tokens"},
		{"anthropic wrong type", "/v1/messages", `{"model":"m","max_tokens":5,"messages":"hi"}`, 400, "messages: expected an array, got a string"},
		{"anthropic content a number", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":5}]}`, 400, "messages.1.content: expected a string or an array of content blocks, got a number"},
		{"anthropic tool_result content an object", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":{}}]}]}`, 400, "messages.0.content.0.content: expected a string or an array of content blocks, got an object"},
		{"anthropic system a number", "/v1/messages", `{"model":"m","max_tokens":5,"system":5,"messages":[{"role":"user","content":"x"}]}`, 400, "system: expected a string or an array of content blocks, got a number"},
		{"anthropic max_tokens a fraction", "/v1/messages", `{"model":"m","max_tokens":2.5,"messages":[{"role":"user","content":"x"}]}`, 400, "max_tokens: expected an integer, got 2.5"},
		{"openai no model", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, 400, "model"},
		{"openai no messages", "/v1/chat/completions", `{"model":"m","messages":[]}`, 400, "messages"},
		{"openai stream_options without stream", "/v1/chat/completions", `{"model":"m","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`, 400, "stream_options"},
		{"openai orphan tool message", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"call_1","content":"r"}]}`, 400, "messages.[1].tool_call_id"},
		{"openai unknown named tool", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a","parameters":{}}}],"tool_choice":{"type":"function","function":{"name":"b"}}}`, 400, "tool_choice"},
		{"openai max_tokens 0", "/v1/chat/completions", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, 400, "max_completion_tokens"},
		{"anthropic no max_tokens", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, 400, "max_tokens"},
		{"anthropic system role", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"x"}]}`, 400, "role"},
		{"anthropic unmatched tool_result", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"r"}]}]}`, 400, "toolu_x"},
		{"anthropic tool_result after text", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"a","input":{}}]},{"role":"user","content":[{"type":"text","text":"see"},{"type":"tool_result","tool_use_id":"t1","content":"r"}]}]}`, 400, "must come before"},
		{"anthropic too large", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413, "larger than 4096"},
		{"unknown path", "/v1/completions", oaText, 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := decode(t, post(t, url, tc.path, tc.body), tc.status)
			msg, _ := path(m, "error", "message").(string)
			for _, leak := range []string{"mockllm.", "[]", "json:", "cannot unmarshal", "Go "} {
				if strings.Contains(msg, leak) {
					t.Errorf("message %q names the mock's Go internals (%q)", msg, leak)
				}
			}
			if strings.Contains(tc.path, "messages") {
				msg, _ := path(m, "error", "message").(string)
				if m["type"] != "error" || !strings.Contains(msg, tc.param) {
					t.Errorf("Anthropic error %v, want a message mentioning %q", m, tc.param)
				}
				return
			}
			if path(m, "error", "type") != "invalid_request_error" {
				t.Errorf("OpenAI error %v, want invalid_request_error", m)
			}
			if tc.param != "" && path(m, "error", "param") != tc.param {
				t.Errorf("OpenAI error param %v, want %q", path(m, "error", "param"), tc.param)
			}
		})
	}
	t.Run("too large, chunked", func(t *testing.T) {
		big := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`
		// A reader of unknown length makes the client send the body chunked.
		resp, err := client.Post(url+"/v1/chat/completions", "application/json", io.MultiReader(strings.NewReader(big)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		m := decode(t, resp, 413)
		if path(m, "error", "type") != "invalid_request_error" {
			t.Errorf("OpenAI 413 %v", m)
		}
	})
	t.Run("wrong method", func(t *testing.T) {
		resp, err := client.Get(url + "/v1/chat/completions")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		decode(t, resp, 405)
	})
}

// max_tokens cuts the text at the end of a word and says so (length,
// max_tokens); stop sequences cut it before them; an answer that fits is
// whole and says so (stop, end_turn). Usage counts what was sent, in JSON
// and in streams.
func TestMaxTokensAndStopSequences(t *testing.T) {
	s, url := start(t, mockllm.Options{Deltas: 3})
	text := s.Text()
	if !strings.HasPrefix(text, "This answer comes from the Strait") {
		t.Fatalf("text %q; the cases below assume it starts with the first sentence", text)
	}
	stop := "Strait"
	cut := strings.Index(text, stop)
	if cut < 1 {
		t.Fatalf("text %q lacks %q", text, stop)
	}
	all := tokens(len(text))
	for _, tc := range []struct {
		name, oaExtra, anExtra string
		want                   string
		oaFinish, anStop       string
		anStopSeq              any
	}{
		// 3 tokens are 12 bytes, "This answer c": the cut is after "answer".
		{"max_tokens", `"max_completion_tokens":3`, `"max_tokens":3`, "This answer", "length", "max_tokens", nil},
		// 5 tokens are 20 bytes, "This answer comes fr".
		{"max_tokens inside a word", `"max_completion_tokens":5`, `"max_tokens":5`, "This answer comes", "length", "max_tokens", nil},
		// 4 tokens are 16 bytes, "This answer come".
		{"max_completion_tokens over max_tokens", `"max_completion_tokens":4,"max_tokens":100`, `"max_tokens":4`, "This answer", "length", "max_tokens", nil},
		{"legacy max_tokens", `"max_tokens":2`, `"max_tokens":2`, "This", "length", "max_tokens", nil},
		{"stop sequence", `"stop":["zzz","` + stop + `"]`, `"max_tokens":100,"stop_sequences":["zzz","` + stop + `"]`, text[:cut], "stop", "stop_sequence", stop},
		{"max_tokens before the stop sequence", `"max_tokens":1,"stop":"` + stop + `"`, `"max_tokens":1,"stop_sequences":["` + stop + `"]`, "This", "length", "max_tokens", nil},
		{"max_tokens that just fits", fmt.Sprintf(`"max_tokens":%d`, all), fmt.Sprintf(`"max_tokens":%d`, all), text, "stop", "end_turn", nil},
		{"max_tokens one short", fmt.Sprintf(`"max_tokens":%d`, all-1), fmt.Sprintf(`"max_tokens":%d`, all-1), wordsWithin(text, 4*(all-1)), "length", "max_tokens", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.oaFinish == "length" && (!strings.HasPrefix(text, tc.want) || text[len(tc.want)] != ' ') {
				t.Fatalf("case wants %q, which is not the text cut at the end of a word", tc.want)
			}
			out := float64(tokens(len(tc.want)))
			oa := `{"model":"m",` + tc.oaExtra + `,"messages":[{"role":"user","content":"x"}]}`
			m := decode(t, post(t, url, "/v1/chat/completions", oa), 200)
			if c := path(m, "choices", 0); path(c, "message", "content") != tc.want || path(c, "finish_reason") != tc.oaFinish || path(m, "usage", "completion_tokens") != out {
				t.Errorf("OpenAI %v, want %q %s with %v tokens", m, tc.want, tc.oaFinish, out)
			}
			evs, err := readEvents(post(t, url, "/v1/chat/completions", strings.Replace(oa, `{"model":"m",`, `{"model":"m","stream":true,"stream_options":{"include_usage":true},`, 1)).Body)
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			var finish, usage any
			for _, e := range evs[:len(evs)-1] {
				m := obj(t, e.data)
				if s, ok := path(m, "choices", 0, "delta", "content").(string); ok {
					text.WriteString(s)
				}
				if f := path(m, "choices", 0, "finish_reason"); f != nil {
					finish = f
				}
				if u := path(m, "usage", "completion_tokens"); u != nil {
					usage = u
				}
			}
			if text.String() != tc.want || finish != tc.oaFinish || usage != out {
				t.Errorf("OpenAI stream %q %v %v, want %q %s %v", text.String(), finish, usage, tc.want, tc.oaFinish, out)
			}

			an := `{"model":"m",` + tc.anExtra + `,"messages":[{"role":"user","content":"x"}]}`
			m = decode(t, post(t, url, "/v1/messages", an), 200)
			if path(m, "content", 0, "text") != tc.want || m["stop_reason"] != tc.anStop || m["stop_sequence"] != tc.anStopSeq || path(m, "usage", "output_tokens") != out {
				t.Errorf("Anthropic %v, want %q %s %v with %v tokens", m, tc.want, tc.anStop, tc.anStopSeq, out)
			}
			evs, err = readEvents(post(t, url, "/v1/messages", strings.Replace(an, `{"model":"m",`, `{"model":"m","stream":true,`, 1)).Body)
			if err != nil {
				t.Fatal(err)
			}
			text.Reset()
			for _, e := range evs {
				m := obj(t, e.data)
				if s, ok := path(m, "delta", "text").(string); ok {
					text.WriteString(s)
				}
				if e.name == "message_delta" && (path(m, "delta", "stop_reason") != tc.anStop || path(m, "delta", "stop_sequence") != tc.anStopSeq || path(m, "usage", "output_tokens") != out) {
					t.Errorf("message_delta %v", m)
				}
			}
			if text.String() != tc.want {
				t.Errorf("Anthropic stream %q, want %q", text.String(), tc.want)
			}
		})
	}
}

// wordsWithin is the longest prefix of text, at most n bytes, that ends
// where a word does.
func wordsWithin(text string, n int) string {
	i := strings.LastIndexByte(text[:n+1], ' ')
	return text[:i]
}

func TestModels(t *testing.T) {
	_, url := start(t, mockllm.Options{Models: []string{"a-model", "b-model"}})
	get := func(headers ...string) map[string]any {
		req, _ := http.NewRequest(http.MethodGet, url+"/v1/models", nil)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return decode(t, resp, 200)
	}
	m := get("Authorization", "Bearer x")
	if m["object"] != "list" || path(m, "data", 1, "id") != "b-model" || path(m, "data", 0, "object") != "model" {
		t.Errorf("OpenAI models %v", m)
	}
	m = get("anthropic-version", "2023-06-01")
	if m["has_more"] != false || m["first_id"] != "a-model" || m["last_id"] != "b-model" || path(m, "data", 0, "type") != "model" {
		t.Errorf("Anthropic models %v", m)
	}
}

func TestCountersAndLastRequest(t *testing.T) {
	s, url := start(t, mockllm.Options{})
	for range 3 {
		decode(t, post(t, url, "/v1/chat/completions", oaText, "Authorization", "Bearer abc"), 200)
	}
	evs, _ := readEvents(post(t, url, "/v1/messages", anStream, "x-api-key", "xyz", "anthropic-version", "2023-06-01").Body)
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	decode(t, post(t, url, "/v1/messages", `{"model":"m"}`), 400)
	if s.Count(mockllm.OpenAI, false, 200) != 3 || s.Count(mockllm.Anthropic, true, 200) != 1 || s.Count(mockllm.Anthropic, false, 400) != 1 {
		t.Errorf("counts %+v", s.Counts())
	}
	if len(s.Counts()) != 3 || s.Requests() != 5 {
		t.Errorf("%d counters, %d requests; want 3 and 5", len(s.Counts()), s.Requests())
	}
	last, ok := s.LastRequest()
	if !ok || last.Path != "/v1/messages" || string(last.Body) != `{"model":"m"}` || last.BodyBytes != 13 || last.Method != "POST" {
		t.Errorf("last request %+v", last)
	}
	decode(t, post(t, url, "/v1/messages", anText, "x-api-key", "xyz"), 200)
	if last, _ = s.LastRequest(); last.Header.Get("X-Api-Key") != "xyz" || string(last.Body) != anText {
		t.Errorf("last request headers %v body %s", last.Header, last.Body)
	}
}

func TestTLSHTTP1(t *testing.T) {
	ca := testkit.NewCA(t)
	s := mockllm.New(mockllm.Options{})
	url, err := s.StartTLS("127.0.0.1:0", ca.ServerTLS(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	resp, err := c.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(oaText))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	decode(t, resp, 200)
	if resp.Proto != "HTTP/1.1" || resp.TLS == nil {
		t.Errorf("proto %s, TLS %v", resp.Proto, resp.TLS != nil)
	}
}

// A client that gives up frees its request at once, however long the
// latency: the wait ends with the request's context.
func TestClientGivesUp(t *testing.T) {
	s, url := start(t, mockllm.Options{Latency: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/messages", strings.NewReader(anText))
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	for i := 0; s.Requests() == 0 && i < 2000; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the canceled request got an answer")
	}
	for i := 0; s.Count(mockllm.Anthropic, false, 0) == 0 && i < 2000; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if n := s.Count(mockllm.Anthropic, false, 0); n != 1 {
		t.Errorf("unanswered count %d, want 1: %+v", n, s.Counts())
	}
}
