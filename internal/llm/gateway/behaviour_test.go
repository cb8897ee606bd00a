package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/straitgw/strait/internal/llm/translate"
	"github.com/straitgw/strait/internal/testkit"
)

// referenceBody is a realistic ~0.5 KB chat request with odd but valid
// formatting, so that any re-encoding would show.
const referenceBody = `{ "model" : "alias-x", "messages":[{"role":"system","content":"You are a terse assistant. Answer in one sentence."},` +
	`{"role":"user","content":"What is the capital of France, and what river runs through it? Please also mention one bridge \u00e9."}],` +
	"\n\t\"temperature\":0.20,\"max_tokens\":256,\"stream\":false,\"stream_options\":null," +
	`"tools":[{"type":"function","function":{"name":"lookup","description":"Look a city up","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],` +
	`"user":"user-1234","metadata":{"trace":"abc\"def\\u0041"},"seed":7 }`

func TestFastPathForwardsBytes(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	c := client(false)

	t.Run("request body changes only in the model value", func(t *testing.T) {
		rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", referenceBody))
		if rp.status != 200 {
			t.Fatalf("status %d: %s", rp.status, rp.raw)
		}
		want := strings.Replace(referenceBody, `"alias-x"`, `"gpt-upstream"`, 1)
		if got := string(h.openai.last(t).body); got != want {
			t.Errorf("provider got\n%s\nwant\n%s", got, want)
		}
	})

	t.Run("request body unchanged without a rewrite", func(t *testing.T) {
		body := strings.Replace(referenceBody, `"alias-x"`, `"gpt-4o"`, 1)
		read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", body))
		if got := string(h.openai.last(t).body); got != body {
			t.Errorf("provider got\n%s\nwant the client's bytes\n%s", got, body)
		}
	})

	t.Run("large body, read as it arrives", func(t *testing.T) {
		body := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("long text ", 150_000) + `"}]}`
		if len(body) <= preallocMax {
			t.Fatal("the body is not larger than preallocMax")
		}
		rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", body))
		if rp.status != 200 || string(h.openai.last(t).body) != body {
			t.Errorf("status %d; the provider got %d bytes, want the client's %d", rp.status, len(h.openai.last(t).body), len(body))
		}
	})

	t.Run("JSON response bytes unchanged", func(t *testing.T) {
		const odd = "{ \"id\":\"x\",  \"object\":\"chat.completion\",\"model\":\"gpt-upstream\",\n\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Paris.\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,\"total_tokens\":15},\"x_extra\":[1,2]}\n"
		h.openai.setHandler(func(w http.ResponseWriter, r *http.Request, body []byte) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, odd)
		})
		defer h.openai.setHandler(nil)
		rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", referenceBody))
		if string(rp.raw) != odd {
			t.Errorf("client got\n%q\nwant the provider's bytes\n%q", rp.raw, odd)
		}
	})

	t.Run("stream bytes unchanged", func(t *testing.T) {
		// CRLF line ends, a comment and an unknown field: a re-encoding
		// relay would normalise them.
		events := []string{
			": keep-alive\r\n\r\n",
			"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Pa\"}}]}\r\nid: 1\r\n\r\n",
			"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ris.\"},\"finish_reason\":\"stop\"}]}\r\n\r\n",
			"data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3}}\r\n\r\n",
			"data: [DONE]\r\n\r\n",
		}
		h.openai.setHandler(func(w http.ResponseWriter, r *http.Request, body []byte) { writeEvents(w, events) })
		defer h.openai.setHandler(nil)
		body := strings.Replace(referenceBody, `"stream":false`, `"stream":true`, 1)
		tokensBefore, _ := h.metric(t, "strait_llm_tokens_total", "direction", "input", "route", "alias")
		rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", body))
		if want := strings.Join(events, ""); string(rp.raw) != want {
			t.Errorf("client got\n%q\nwant the provider's bytes\n%q", rp.raw, want)
		}
		if !rp.done || rp.text != "Paris." || rp.in != 12 {
			t.Errorf("done %v text %q in %d", rp.done, rp.text, rp.in)
		}
		if n, _ := h.metric(t, "strait_llm_tokens_total", "direction", "input", "route", "alias"); n-tokensBefore != 12 {
			t.Errorf("input tokens counted from the passthrough stream: %v, want 12", n-tokensBefore)
		}
	})
}

func TestAuth(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	c := client(false)
	for _, d := range dialects {
		for _, tt := range []struct {
			name   string
			header []string
			status int
			msg    string
		}{
			{"no key", nil, 401, "no API key"},
			{"wrong bearer", []string{"Authorization", "Bearer nope"}, 401, "invalid API key"},
			{"wrong x-api-key", []string{"X-Api-Key", "nope"}, 401, "invalid API key"},
			{"provider key is not a gateway key", []string{"Authorization", "Bearer " + openAIKey}, 401, "invalid API key"},
			{"bearer", []string{"Authorization", "Bearer " + testKey}, 200, ""},
			{"bearer lower case scheme", []string{"Authorization", "bearer " + testKey}, 200, ""},
			{"x-api-key", []string{"X-Api-Key", testKey}, 200, ""},
			{"second key", []string{"X-Api-Key", "another-key"}, 200, ""},
		} {
			t.Run(string(d)+"/"+tt.name, func(t *testing.T) {
				req, _ := http.NewRequest("POST", h.url+endpoint(d), strings.NewReader(requestBody(d, modelFor(d), false)))
				for i := 0; i+1 < len(tt.header); i += 2 {
					req.Header.Set(tt.header[i], tt.header[i+1])
				}
				before := h.openai.count() + h.anthropic.count()
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				rp := read(t, d, resp)
				if rp.status != tt.status {
					t.Fatalf("status %d, want %d: %s", rp.status, tt.status, rp.raw)
				}
				if tt.status == 200 {
					return
				}
				if rp.errType != "authentication_error" || !strings.Contains(rp.errMsg, tt.msg) {
					t.Errorf("error %q %q, want authentication_error mentioning %q", rp.errType, rp.errMsg, tt.msg)
				}
				if after := h.openai.count() + h.anthropic.count(); after != before {
					t.Error("an unauthenticated request reached a provider")
				}
			})
		}
	}
	if n, _ := h.metric(t, "strait_llm_errors_total", "kind", "auth"); n != 8 {
		t.Errorf("auth errors counted: %v, want 8", n)
	}
}

func TestRouting(t *testing.T) {
	h := newHarness(t, harnessConfig{edit: func(o *Options) {
		o.Routes = append([]Route{{Match: "gpt-4o*", Provider: "an", Model: "claude-via-gpt"}}, o.Routes...)
	}})
	c := client(false)

	t.Run("first match wins", func(t *testing.T) {
		rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o-mini", false)))
		if rp.status != 200 {
			t.Fatalf("status %d: %s", rp.status, rp.raw)
		}
		if got := h.anthropic.last(t); !strings.Contains(string(got.body), `"model":"claude-via-gpt"`) {
			t.Errorf("gpt-4o-mini should go to the first route (anthropic, renamed); provider got %s", got.body)
		}
		var resp struct{ Model string }
		json.Unmarshal(rp.raw, &resp)
		if resp.Model != "gpt-4o-mini" {
			t.Errorf("translated response names model %q, want the client's gpt-4o-mini", resp.Model)
		}
		before := h.anthropic.count()
		read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-3.5", false)))
		if h.anthropic.count() != before || !strings.Contains(string(h.openai.last(t).body), `"gpt-3.5"`) {
			t.Error("gpt-3.5 should fall through to the gpt-* route")
		}
	})

	t.Run("rewrite on the fast path", func(t *testing.T) {
		rp := read(t, translate.Anthropic, h.post(t, c, translate.Anthropic, "/v1/messages", requestBody(translate.Anthropic, "exact-model", true)))
		if rp.status != 200 || !rp.done {
			t.Fatalf("status %d done %v: %s", rp.status, rp.done, rp.raw)
		}
		if got := h.anthropic.last(t); !strings.Contains(string(got.body), `"model":"claude-upstream"`) {
			t.Errorf("provider got %s, want model claude-upstream", got.body)
		}
	})

	t.Run("no route", func(t *testing.T) {
		for _, d := range dialects {
			before := h.openai.count() + h.anthropic.count()
			rp := read(t, d, h.post(t, c, d, endpoint(d), requestBody(d, "mistral-large", false)))
			if rp.status != 404 || rp.errType != "not_found_error" || !strings.Contains(rp.errMsg, `"mistral-large"`) {
				t.Errorf("%s: status %d error %q %q; want 404 not_found_error naming the model", d, rp.status, rp.errType, rp.errMsg)
			}
			if h.openai.count()+h.anthropic.count() != before {
				t.Error("an unrouted request reached a provider")
			}
		}
		if _, found := h.metric(t, "strait_llm_requests_total", "model", "mistral-large"); found {
			t.Error("an unrouted model became a metric label")
		}
		if n, _ := h.metric(t, "strait_llm_errors_total", "kind", "no_route", "model", ""); n != 2 {
			t.Errorf("no_route errors: %v, want 2", n)
		}
	})

	t.Run("models list", func(t *testing.T) {
		req, _ := http.NewRequest("GET", h.url+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Object string
			Data   []struct{ ID, Object, OwnedBy string }
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		json.Unmarshal(body, &list)
		var ids []string
		for _, m := range list.Data {
			ids = append(ids, m.ID)
			if m.Object != "model" {
				t.Errorf("model object %q", m.Object)
			}
		}
		if list.Object != "list" || strings.Join(ids, ",") != "exact-model,listed-a,listed-b" {
			t.Errorf("got %s", body)
		}

		req.Header.Set("Anthropic-Version", "2023-06-01")
		resp, err = c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var an struct {
			Data []struct {
				Type, ID string
			}
			FirstID string `json:"first_id"`
			HasMore *bool  `json:"has_more"`
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		json.Unmarshal(body, &an)
		if len(an.Data) != 3 || an.Data[0].Type != "model" || an.FirstID != "exact-model" || an.HasMore == nil {
			t.Errorf("Anthropic-format list: %s", body)
		}
	})

	t.Run("model by id", func(t *testing.T) {
		for id, want := range map[string]int{"gpt-4o": 200, "listed-b": 200, "exact-model": 200, "mistral": 404} {
			req, _ := http.NewRequest("GET", h.url+"/v1/models/"+id, nil)
			req.Header.Set("Authorization", "Bearer "+testKey)
			rp := read(t, translate.OpenAI, must(c.Do(req)))
			if rp.status != want {
				t.Errorf("%s: status %d, want %d: %s", id, rp.status, want, rp.raw)
			}
		}
	})
}

func must(resp *http.Response, err error) *http.Response {
	if err != nil {
		panic(err)
	}
	return resp
}

func TestBadRequests(t *testing.T) {
	h := newHarness(t, harnessConfig{edit: func(o *Options) { o.MaxBodyBytes = 1024 }})
	c := client(false)
	big := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`
	for _, d := range dialects {
		for _, tt := range []struct {
			name    string
			method  string
			path    string
			body    io.Reader
			status  int
			errType string
			msg     string
		}{
			{"malformed JSON", "POST", endpoint(d), strings.NewReader(`{"model":"gpt-4o",`), 400, "invalid_request_error", "not valid JSON"},
			{"not an object", "POST", endpoint(d), strings.NewReader(`["gpt-4o"]`), 400, "invalid_request_error", "must be a JSON object"},
			{"empty body", "POST", endpoint(d), strings.NewReader(``), 400, "invalid_request_error", "empty"},
			{"missing model", "POST", endpoint(d), strings.NewReader(`{"messages":[]}`), 400, "invalid_request_error", "model is required"},
			{"model not a string", "POST", endpoint(d), strings.NewReader(`{"model":7}`), 400, "invalid_request_error", "model must be a string"},
			{"model twice", "POST", endpoint(d), strings.NewReader(`{"model":"gpt-4o","model":"claude-x"}`), 400, "invalid_request_error", "given twice"},
			{"too large, with length", "POST", endpoint(d), strings.NewReader(big), 413, "", "larger than"},
			{"too large, chunked", "POST", endpoint(d), io.MultiReader(strings.NewReader(big)), 413, "", "larger than"},
			{"wrong method", "GET", endpoint(d), nil, 405, "invalid_request_error", "use POST"},
			{"unknown path", "POST", "/v1/completions", strings.NewReader(`{}`), 404, "not_found_error", "no such endpoint"},
		} {
			t.Run(string(d)+"/"+tt.name, func(t *testing.T) {
				req, _ := http.NewRequest(tt.method, h.url+tt.path, tt.body)
				req.Header.Set("Authorization", "Bearer "+testKey)
				if d == translate.Anthropic {
					req.Header.Set("Anthropic-Version", "2023-06-01")
				}
				before := h.openai.count() + h.anthropic.count()
				rp := read(t, d, must(c.Do(req)))
				if rp.status != tt.status || (tt.errType != "" && rp.errType != tt.errType) || !strings.Contains(rp.errMsg, tt.msg) {
					t.Errorf("status %d error %q %q; want %d %q mentioning %q", rp.status, rp.errType, rp.errMsg, tt.status, tt.errType, tt.msg)
				}
				if h.openai.count()+h.anthropic.count() != before {
					t.Error("a bad request reached a provider")
				}
			})
		}
	}
}

func TestProviderErrors(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	c := client(false)
	respond := func(fp *fakeProvider, status int, ctype, body string, hdr ...string) {
		fp.setHandler(func(w http.ResponseWriter, r *http.Request, _ []byte) {
			for i := 0; i+1 < len(hdr); i += 2 {
				w.Header().Set(hdr[i], hdr[i+1])
			}
			w.Header().Set("Content-Type", ctype)
			w.WriteHeader(status)
			io.WriteString(w, body)
		})
	}
	const oaRateLimit = `{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","param":null,"code":"rate_limit_exceeded"}}`

	t.Run("same dialect: forwarded as sent", func(t *testing.T) {
		respond(h.openai, 429, "application/json", oaRateLimit, "Retry-After", "7")
		rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false)))
		if rp.status != 429 || string(rp.raw) != oaRateLimit || rp.header.Get("Retry-After") != "7" {
			t.Errorf("status %d retry-after %q body %s", rp.status, rp.header.Get("Retry-After"), rp.raw)
		}
	})
	t.Run("cross dialect: mapped, message kept", func(t *testing.T) {
		respond(h.openai, 429, "application/json", oaRateLimit)
		rp := read(t, translate.Anthropic, h.post(t, c, translate.Anthropic, "/v1/messages", requestBody(translate.Anthropic, "gpt-4o", false)))
		if rp.status != 429 || rp.errType != "rate_limit_error" || rp.errMsg != "Rate limit reached for gpt-4o" {
			t.Errorf("status %d error %q %q", rp.status, rp.errType, rp.errMsg)
		}
	})
	t.Run("anthropic overloaded to an OpenAI client", func(t *testing.T) {
		respond(h.anthropic, 529, "application/json", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
		rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "claude-x", false)))
		if rp.status != 503 || rp.errMsg != "Overloaded" {
			t.Errorf("status %d error %q %q, want 503 keeping the message", rp.status, rp.errType, rp.errMsg)
		}
	})
	t.Run("not JSON", func(t *testing.T) {
		respond(h.anthropic, 502, "text/html", "<html><body>Bad gateway from a load balancer</body></html>")
		rp := read(t, translate.Anthropic, h.post(t, c, translate.Anthropic, "/v1/messages", requestBody(translate.Anthropic, "claude-x", false)))
		if rp.status != 502 || rp.errType == "" || !strings.Contains(rp.errMsg, "Bad gateway from a load balancer") {
			t.Errorf("status %d error %q %q", rp.status, rp.errType, rp.errMsg)
		}
	})
	t.Run("provider refuses the gateway's key", func(t *testing.T) {
		respond(h.openai, 401, "application/json", `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
		rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false)))
		if rp.status != 502 || !strings.Contains(rp.errMsg, "refused the gateway's credentials") || !strings.Contains(rp.errMsg, "Incorrect API key") {
			t.Errorf("status %d error %q; want 502 blaming the gateway's credentials", rp.status, rp.errMsg)
		}
	})
	t.Run("JSON where a stream was asked for", func(t *testing.T) {
		respond(h.openai, 200, "application/json", openAIJSON("gpt-4o"))
		rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", true)))
		if rp.status != 502 || !strings.Contains(rp.errMsg, "where an event stream was asked for") {
			t.Errorf("status %d error %q", rp.status, rp.errMsg)
		}
	})
	h.openai.setHandler(nil)
	h.anthropic.setHandler(nil)
	if n, _ := h.metric(t, "strait_llm_errors_total", "kind", "upstream_status"); n != 5 {
		t.Errorf("upstream_status errors: %v, want 5", n)
	}
}

func TestProviderUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	h := newHarness(t, harnessConfig{edit: func(o *Options) { o.Providers[0].BaseURL = dead }})
	rp := read(t, translate.OpenAI, h.post(t, client(false), translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false)))
	if rp.status != 502 || !strings.Contains(rp.errMsg, `cannot connect to provider "oa"`) {
		t.Errorf("status %d error %q", rp.status, rp.errMsg)
	}
	if strings.Contains(rp.errMsg, strings.TrimPrefix(dead, "http://")) {
		t.Errorf("the error shows the provider's address to the client: %q", rp.errMsg)
	}
	if n, _ := h.metric(t, "strait_llm_errors_total", "kind", "upstream_connect", "provider", "oa"); n != 1 {
		t.Errorf("upstream_connect errors: %v", n)
	}
}

// blockUntilCancelled is a provider handler that answers nothing until its
// request is cancelled, and reports that on cancelled.
func blockUntilCancelled(cancelled chan<- struct{}, first []string) func(w http.ResponseWriter, r *http.Request, _ []byte) {
	return func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if first != nil {
			writeEvents(w, first)
		}
		select {
		case <-r.Context().Done():
			cancelled <- struct{}{}
		case <-time.After(waitLimit):
		}
	}
}

func TestTimeouts(t *testing.T) {
	h := newHarness(t, harnessConfig{edit: func(o *Options) {
		o.Providers[0].ResponseTimeout = 50 * time.Millisecond
		// The first byte comes at once, so the stream is cut by
		// request_timeout, after the timer moved on from
		// response_timeout.
		o.Providers[1].ResponseTimeout = 500 * time.Millisecond
		o.Providers[1].RequestTimeout = 800 * time.Millisecond
	}})
	c := client(false)

	t.Run("no response headers", func(t *testing.T) {
		cancelled := make(chan struct{}, 1)
		h.openai.setHandler(blockUntilCancelled(cancelled, nil))
		for _, d := range dialects {
			rp := read(t, d, h.post(t, c, d, endpoint(d), requestBody(d, "gpt-4o", false)))
			if rp.status != 504 || rp.errType != "timeout_error" || !strings.Contains(rp.errMsg, "response_timeout") {
				t.Errorf("%s: status %d error %q %q; want 504 timeout naming response_timeout", d, rp.status, rp.errType, rp.errMsg)
			}
			select {
			case <-cancelled:
			case <-time.After(waitLimit):
				t.Fatal("the provider request was not cancelled")
			}
		}
	})

	t.Run("stream outlives request_timeout", func(t *testing.T) {
		cancelled := make(chan struct{}, 1)
		h.anthropic.setHandler(blockUntilCancelled(cancelled, anthropicEvents("claude-x")[:4]))
		for _, d := range dialects {
			rp := read(t, d, h.post(t, c, d, endpoint(d), requestBody(d, "claude-x", true)))
			if rp.status != 200 || rp.done || !strings.Contains(rp.errMsg, "request_timeout") || rp.text != "Par" || rp.errType != "timeout_error" {
				t.Errorf("%s: status %d done %v text %q error %s %q; want the first text, then a timeout_error event naming request_timeout\n%s", d, rp.status, rp.done, rp.text, rp.errType, rp.errMsg, rp.raw)
			}
			if d == translate.OpenAI && strings.Contains(string(rp.raw), "[DONE]") {
				t.Error("an OpenAI stream that failed ended with [DONE]")
			}
			select {
			case <-cancelled:
			case <-time.After(waitLimit):
				t.Fatal("the provider request was not cancelled")
			}
		}
	})
	if n, _ := h.metric(t, "strait_llm_errors_total", "kind", "upstream_timeout"); n != 4 {
		t.Errorf("upstream_timeout errors: %v, want 4", n)
	}
}

func TestClientDisconnectCancelsProvider(t *testing.T) {
	for _, h2c := range []bool{false, true} {
		name := "h1"
		if h2c {
			name = "h2c"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{providerH2C: h2c})
			cancelled := make(chan struct{}, 1)
			h.openai.setHandler(blockUntilCancelled(cancelled, openAIEvents("gpt-4o")[:2]))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", h.url+"/v1/chat/completions", strings.NewReader(requestBody(translate.OpenAI, "gpt-4o", true)))
			req.Header.Set("Authorization", "Bearer "+testKey)
			resp, err := client(h2c).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 1)
			if _, err := resp.Body.Read(buf); err != nil {
				t.Fatalf("reading the first event: %v", err)
			}
			cancel()
			resp.Body.Close()
			clientGone(t, h, cancelled)
		})
	}
}

// clientGone checks that the provider request of a client that left is
// cancelled, and that the request is counted as client_gone, code 499.
func clientGone(t *testing.T, h *harness, cancelled <-chan struct{}) {
	t.Helper()
	select {
	case <-cancelled:
	case <-time.After(waitLimit):
		t.Fatal("the provider request was not cancelled after the client left")
	}
	eventually(t, "the request to be counted", func() bool {
		n, _ := h.metric(t, "strait_llm_errors_total", "kind", "client_gone")
		return n == 1
	})
	if n, _ := h.metric(t, "strait_llm_requests_total", "code", "499"); n != 1 {
		t.Errorf("requests with code 499: %v, want 1", n)
	}
}

func TestStreamCutShort(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	c := client(false)
	for _, tt := range []struct {
		name string
		cut  func(w http.ResponseWriter, events []string)
	}{
		{"connection dropped", func(w http.ResponseWriter, events []string) {
			writeEvents(w, events[:3])
			panic(http.ErrAbortHandler)
		}},
		{"clean end without terminator", func(w http.ResponseWriter, events []string) {
			writeEvents(w, events[:3])
		}},
		{"end inside an event", func(w http.ResponseWriter, events []string) {
			writeEvents(w, append(events[:3:3], strings.TrimSuffix(events[3], "\n\n")))
		}},
	} {
		for _, pd := range dialects {
			fp := h.openai
			events := openAIEvents("m")
			if pd == translate.Anthropic {
				fp, events = h.anthropic, anthropicEvents("m")
			}
			fp.setHandler(func(w http.ResponseWriter, r *http.Request, _ []byte) { tt.cut(w, events) })
			for _, cd := range dialects {
				t.Run(tt.name+"/"+string(pd)+"-to-"+string(cd), func(t *testing.T) {
					rp := read(t, cd, h.post(t, c, cd, endpoint(cd), requestBody(cd, modelFor(pd), true)))
					if rp.status != 200 || rp.done || rp.errMsg == "" {
						t.Errorf("status %d done %v error %q: want a stream ending in the dialect's error event\n%s", rp.status, rp.done, rp.errMsg, rp.raw)
					}
					if cd == translate.OpenAI && strings.Contains(string(rp.raw), "[DONE]") {
						t.Error("the broken stream ended with [DONE]")
					}
					if cd == translate.Anthropic && (len(rp.eventName) == 0 || rp.eventName[len(rp.eventName)-1] != "error") {
						t.Errorf("the last Anthropic event is not an error event: %q", rp.eventName)
					}
				})
			}
		}
	}
	if n, _ := h.metric(t, "strait_llm_errors_total", "kind", "stream"); n != 12 {
		t.Errorf("stream errors: %v, want 12", n)
	}
}

func TestMetricsAndTrace(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	c := client(false)
	stages := func(v string) map[string]bool {
		out := map[string]bool{}
		for _, e := range strings.Split(v, ", ") {
			name, dur, ok := strings.Cut(e, ";dur=")
			if !ok || dur == "" {
				t.Errorf("bad trace entry %q in %q", e, v)
			}
			out[name] = true
		}
		return out
	}

	rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false), TraceHeader, "1"))
	got := stages(rp.header.Get(TraceHeader))
	for _, s := range []string{"receive", "parse", "route", "prepare", "send", "upstream", "response_receive", "response_parse", "translate", "overhead", "total"} {
		if !got[s] {
			t.Errorf("JSON trace %q lacks %s", rp.header.Get(TraceHeader), s)
		}
	}
	if _, err := parseMicros(rp.header.Get(OverheadHeader)); err != nil {
		t.Errorf("overhead header %q: %v", rp.header.Get(OverheadHeader), err)
	}

	rp = read(t, translate.Anthropic, h.post(t, c, translate.Anthropic, "/v1/messages", requestBody(translate.Anthropic, "gpt-4o", true), TraceHeader, "1"))
	if rp.header.Get(TraceHeader) != "" {
		t.Error("a stream's trace came as a header; it belongs in the trailer")
	}
	got = stages(rp.trailer.Get(TraceHeader))
	for _, s := range []string{"receive", "send", "upstream", "response_receive", "response_parse", "translate", "response_send", "total"} {
		if !got[s] {
			t.Errorf("stream trace trailer %q lacks %s", rp.trailer.Get(TraceHeader), s)
		}
	}
	ttfb, err1 := parseMicros(rp.header.Get(OverheadHeader))
	total, err2 := parseMicros(rp.trailer.Get(OverheadTrailer))
	if err1 != nil || err2 != nil || total < ttfb {
		t.Errorf("stream overhead header %q, trailer %q: want numbers, total >= first-byte", rp.header.Get(OverheadHeader), rp.trailer.Get(OverheadTrailer))
	}

	rp = read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false)))
	if rp.header.Get(TraceHeader) != "" {
		t.Error("a trace was sent without being asked for")
	}

	for _, m := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"strait_llm_requests_total", []string{"client", "openai", "route", "gpt-*", "provider", "oa", "model", "gpt-*", "code", "200"}, 2},
		{"strait_llm_requests_total", []string{"client", "anthropic", "route", "gpt-*", "code", "200"}, 1},
		{"strait_llm_tokens_total", []string{"direction", "input", "route", "gpt-*"}, 36},
		{"strait_llm_tokens_total", []string{"direction", "output", "provider", "oa"}, 9},
		{"strait_llm_request_duration_seconds", []string{"stream", "true"}, 1},
		{"strait_llm_time_to_first_event_seconds", []string{"route", "gpt-*"}, 1},
		{"strait_llm_upstream_latency_seconds", []string{"provider", "oa"}, 3},
		{"strait_llm_overhead_seconds", []string{"path", "passthrough"}, 2},
		{"strait_llm_overhead_seconds", []string{"path", "translate"}, 1},
		{"strait_llm_stage_seconds", []string{"stage", "parse"}, 3},
		{"strait_llm_stage_seconds", []string{"stage", "response_send", "path", "translate"}, 1},
		{"strait_llm_requests_in_flight", nil, 0},
	} {
		if got, found := h.metric(t, m.name, m.labels...); !found || got != m.want {
			t.Errorf("%s%v = %v (found %v), want %v", m.name, m.labels, got, found, m.want)
		}
	}

	log := h.logs.String()
	for _, want := range []string{`msg="llm request"`, "client=anthropic", "route=gpt-*", "provider=oa", "status=200", "tokens_in=12", "tokens_out=3", "overhead=", "path_kind=translate", "first_event="} {
		if !strings.Contains(log, want) {
			t.Errorf("access log lacks %q:\n%s", want, log)
		}
	}
}

func parseMicros(s string) (float64, error) {
	var f float64
	err := json.Unmarshal([]byte(s), &f)
	if s == "" {
		err = errors.New("empty")
	}
	return f, err
}

func TestTLSListener(t *testing.T) {
	ca := testkit.NewCA(t)
	h := newHarness(t, harnessConfig{listener: Listener{TLS: ca.ServerTLS(t)}})
	for _, tt := range []struct {
		h1Only bool
		proto  int
	}{{false, 2}, {true, 1}} {
		for _, d := range dialects {
			rp := read(t, d, h.post(t, tlsClient(ca, tt.h1Only), d, endpoint(d), requestBody(d, "claude-x", true)))
			if rp.status != 200 || !rp.done || rp.protoMaj != tt.proto {
				t.Errorf("h1only=%v %s: status %d done %v proto %d, want 200 done HTTP/%d", tt.h1Only, d, rp.status, rp.done, rp.protoMaj, tt.proto)
			}
		}
	}
}

func TestListenerProtocols(t *testing.T) {
	t.Run("h2c only", func(t *testing.T) {
		h := newHarness(t, harnessConfig{listener: Listener{H2C: true}})
		rp := read(t, translate.OpenAI, h.post(t, client(true), translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false)))
		if rp.status != 200 || rp.protoMaj != 2 {
			t.Errorf("h2c: status %d proto %d", rp.status, rp.protoMaj)
		}
		req, _ := http.NewRequest("POST", h.url+"/v1/chat/completions", strings.NewReader(requestBody(translate.OpenAI, "gpt-4o", false)))
		req.Header.Set("Authorization", "Bearer "+testKey)
		if resp, err := client(false).Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				t.Error("an h2c-only listener served HTTP/1.1")
			}
		}
	})
	t.Run("http1 only", func(t *testing.T) {
		h := newHarness(t, harnessConfig{listener: Listener{HTTP1: true}})
		req, _ := http.NewRequest("POST", h.url+"/v1/chat/completions", strings.NewReader(requestBody(translate.OpenAI, "gpt-4o", false)))
		req.Header.Set("Authorization", "Bearer "+testKey)
		if resp, err := client(true).Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("an HTTP/1.1-only listener answered h2c with %d", resp.StatusCode)
		}
	})
	t.Run("upgrade from HTTP/1.1 to h2c", func(t *testing.T) {
		h := newHarness(t, harnessConfig{})
		status, body := upgradeH2C(t, strings.TrimPrefix(h.url, "http://"), requestBody(translate.OpenAI, "gpt-4o", false))
		if status != "200" || !strings.Contains(body, "Paris.") {
			t.Errorf("upgraded request: status %q body %q", status, body)
		}
	})
}

// upgradeH2C sends body as an HTTP/1.1 request asking to upgrade to h2c
// (RFC 7540 section 3.2), then reads the answer to that request over
// HTTP/2: its :status and body.
func upgradeH2C(t *testing.T, addr, body string) (status, respBody string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	// HTTP2-Settings: an empty SETTINGS payload, base64url.
	req := "POST /v1/chat/completions HTTP/1.1\r\nHost: " + addr + "\r\nConnection: Upgrade, HTTP2-Settings\r\n" +
		"Upgrade: h2c\r\nHTTP2-Settings: \r\nAuthorization: Bearer " + testKey + "\r\nContent-Type: application/json\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("answer to the upgrade: %s, want 101 Switching Protocols", resp.Status)
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, br)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	dec := hpack.NewDecoder(4096, nil)
	var data strings.Builder
	for range 100 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading HTTP/2 frames: %v (status %q, body so far %q)", err, status, data.String())
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			if f.StreamID != 1 {
				continue
			}
			fields, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				t.Fatal(err)
			}
			for _, hf := range fields {
				if hf.Name == ":status" {
					status = hf.Value
				}
			}
			if f.StreamEnded() {
				return status, data.String()
			}
		case *http2.DataFrame:
			if f.StreamID == 1 {
				data.Write(f.Data())
				if f.StreamEnded() {
					return status, data.String()
				}
			}
		}
	}
	t.Fatal("no end of stream 1 in 100 frames")
	return "", ""
}

func TestCountTokens(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	c := client(false)
	body := `{"model":"exact-model","messages":[{"role":"user","content":"hi"}]}`
	rp := read(t, translate.Anthropic, h.post(t, c, translate.Anthropic, "/v1/messages/count_tokens", body))
	if rp.status != 200 || string(rp.raw) != `{"input_tokens":42}` {
		t.Errorf("status %d body %s", rp.status, rp.raw)
	}
	got := h.anthropic.last(t)
	if got.path != "/v1/messages/count_tokens" || !strings.Contains(string(got.body), `"claude-upstream"`) {
		t.Errorf("provider got %s %s", got.path, got.body)
	}
	rp = read(t, translate.Anthropic, h.post(t, c, translate.Anthropic, "/v1/messages/count_tokens", `{"model":"gpt-4o","messages":[]}`))
	if rp.status != 400 || rp.errType != "invalid_request_error" || !strings.Contains(rp.errMsg, "token counting is not available") {
		t.Errorf("OpenAI-dialect provider: status %d error %q %q", rp.status, rp.errType, rp.errMsg)
	}
}

func TestHeadersToProvider(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	c := client(false)
	extra := []string{"Anthropic-Version", "2023-01-01", "Anthropic-Beta", "some-beta", "X-Custom-Secret", "s3cret", "Cookie", "a=b"}

	read(t, translate.Anthropic, h.post(t, c, translate.Anthropic, "/v1/messages", requestBody(translate.Anthropic, "claude-x", false), extra...))
	got := h.anthropic.last(t)
	if got.header.Get("Anthropic-Version") != "2023-01-01" || got.header.Get("Anthropic-Beta") != "some-beta" {
		t.Errorf("an Anthropic client's anthropic-version/beta were not passed on: %v", got.header)
	}
	for _, k := range []string{"X-Custom-Secret", "Cookie"} {
		if got.header.Get(k) != "" {
			t.Errorf("client header %s reached the provider", k)
		}
	}
	checkProviderCredentials(t, translate.Anthropic, got)

	read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "claude-x", false), extra...))
	got = h.anthropic.last(t)
	if got.header.Get("Anthropic-Version") != AnthropicVersion || got.header.Get("Anthropic-Beta") != "" {
		t.Errorf("an OpenAI client's request to Anthropic: version %q beta %q; want the default and none", got.header.Get("Anthropic-Version"), got.header.Get("Anthropic-Beta"))
	}
}

func TestProviderTLS(t *testing.T) {
	ca := testkit.NewCA(t)
	var proto int
	var mu sync.Mutex
	srv := newTLSProvider(t, ca, func(r *http.Request) {
		mu.Lock()
		proto = r.ProtoMajor
		mu.Unlock()
	})
	for _, mode := range []HTTPVersion{HTTPAuto, H2, HTTP1} {
		h := newHarness(t, harnessConfig{edit: func(o *Options) {
			o.Providers[0].BaseURL = srv
			o.Providers[0].HTTP = mode
			o.Providers[0].TLS = ca.ServerTLS(t)
			o.Providers[0].TLS.RootCAs = ca.Pool
			o.Providers[0].TLS.Certificates = nil
		}})
		rp := read(t, translate.OpenAI, h.post(t, client(false), translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false)))
		mu.Lock()
		got := proto
		mu.Unlock()
		want := 2
		if mode == HTTP1 {
			want = 1
		}
		if rp.status != 200 || got != want {
			t.Errorf("mode %q: status %d, provider saw HTTP/%d, want HTTP/%d", mode, rp.status, got, want)
		}
	}
}

// newTLSProvider starts an OpenAI-dialect provider on TLS with HTTP/2 by
// ALPN, and returns its base URL.
func newTLSProvider(t *testing.T, ca *testkit.CA, saw func(*http.Request)) string {
	t.Helper()
	fp := &fakeProvider{dialect: translate.OpenAI}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			saw(r)
			fp.serve(w, r)
		}),
		TLSConfig: ca.ServerTLS(t),
		Protocols: new(http.Protocols),
	}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetHTTP2(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return "https://" + ln.Addr().String()
}

// panicky stands in for a provider's transport and panics, before the
// response starts or in the middle of a stream.
type panicky struct{ midStream bool }

func (p panicky) RoundTrip(*http.Request) (*http.Response, error) {
	if !p.midStream {
		panic("test panic before the response")
	}
	return &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(&panicAfter{data: []byte(openAIEvents("m")[0])}),
	}, nil
}

type panicAfter struct{ data []byte }

func (p *panicAfter) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		panic("test panic in the middle of a stream")
	}
	n := copy(b, p.data)
	p.data = p.data[n:]
	return n, nil
}

func TestPanicIsContained(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	c := client(false)
	p := h.g.providers["oa"]
	real := p.rt
	defer func() { p.rt = real }()

	p.rt = panicky{}
	for _, d := range dialects {
		rp := read(t, d, h.post(t, c, d, endpoint(d), requestBody(d, "gpt-4o", false)))
		if rp.status != 500 || !strings.Contains(rp.errMsg, "internal error") {
			t.Errorf("%s: status %d error %q, want a 500 in the dialect", d, rp.status, rp.errMsg)
		}
	}

	p.rt = panicky{midStream: true}
	resp := h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", true))
	rp := read(t, translate.OpenAI, resp)
	if rp.done {
		t.Error("a stream that panicked ended cleanly")
	}

	p.rt = real
	rp = read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false)))
	if rp.status != 200 {
		t.Errorf("after the panics: status %d", rp.status)
	}
	if n, _ := h.metric(t, "strait_llm_errors_total", "kind", "internal"); n != 3 {
		t.Errorf("internal errors: %v, want 3", n)
	}
	if !strings.Contains(h.logs.String(), "llm request panicked") {
		t.Error("the panic was not logged")
	}
}

func TestShutdown(t *testing.T) {
	t.Run("drains a stream in flight", func(t *testing.T) {
		shutdownDrains(t, harnessConfig{}, client(false), 0, nil)
	})
	t.Run("aborts what outlives the deadline", func(t *testing.T) {
		shutdownAborts(t, harnessConfig{}, client(false))
	})
}

// shutdownDrains checks that Shutdown, called with a stream in flight from
// c, fails readiness and closes the listener at once, lets the stream end
// in full (over protocol major version wantProto, if not 0), and then
// returns nil. afterwards, if set, runs once it has.
func shutdownDrains(t *testing.T, hc harnessConfig, c *http.Client, wantProto int, afterwards func(*harness)) {
	h := newHarness(t, hc)
	release := make(chan struct{})
	events := anthropicEvents("claude-x")
	h.anthropic.setHandler(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		writeEvents(w, events[:2])
		select {
		case <-release:
		case <-time.After(waitLimit):
		}
		for _, e := range events[2:] {
			io.WriteString(w, e)
			w.(http.Flusher).Flush()
		}
	})
	resp := h.post(t, c, translate.Anthropic, "/v1/messages", requestBody(translate.Anthropic, "claude-x", true))
	eventually(t, "the stream to start", func() bool { return h.g.InFlight() == 1 })
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		done <- h.g.Shutdown(ctx)
	}()
	eventually(t, "readiness to fail", func() bool { return h.g.Ready() != nil })
	eventually(t, "the listener to close", func() bool {
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(h.url, "http://"), time.Second)
		if err == nil {
			conn.Close()
		}
		return err != nil
	})
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with a stream in flight", err)
	default:
	}
	close(release)
	rp := read(t, translate.Anthropic, resp)
	if !rp.done || rp.text != "Paris." || (wantProto != 0 && rp.protoMaj != wantProto) {
		t.Errorf("the drained stream: done %v text %q proto %d\n%s", rp.done, rp.text, rp.protoMaj, rp.raw)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if afterwards != nil {
		afterwards(h)
	}
}

// shutdownAborts checks that Shutdown aborts a stream from c that outlives
// its deadline, says so in its error, and cancels the provider's request.
func shutdownAborts(t *testing.T, hc harnessConfig, c *http.Client) {
	h := newHarness(t, hc)
	cancelled := make(chan struct{}, 1)
	h.anthropic.setHandler(blockUntilCancelled(cancelled, anthropicEvents("claude-x")[:2]))
	resp := h.post(t, c, translate.Anthropic, "/v1/messages", requestBody(translate.Anthropic, "claude-x", true))
	eventually(t, "the stream to start", func() bool { return h.g.InFlight() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := h.g.Shutdown(ctx)
	if err == nil || !strings.Contains(err.Error(), "1 requests in flight") {
		t.Errorf("Shutdown: %v, want an error counting the aborted request", err)
	}
	rp := read(t, translate.Anthropic, resp)
	if rp.done {
		t.Error("an aborted stream ended cleanly")
	}
	select {
	case <-cancelled:
	case <-time.After(waitLimit):
		t.Fatal("the provider request was not cancelled")
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	good := func() Options {
		return Options{
			Providers: []Provider{{Name: "p", Dialect: translate.OpenAI, BaseURL: "http://127.0.0.1:1"}},
			Routes:    []Route{{Match: "*", Provider: "p"}},
			Keys:      []Key{{Name: "k", SHA256: HashKey("k")}},
		}
	}
	if _, err := New(good()); err != nil {
		t.Fatalf("good options: %v", err)
	}
	for _, tt := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no keys", func(o *Options) { o.Keys = nil }, "no gateway keys"},
		{"unknown provider", func(o *Options) { o.Routes[0].Provider = "q" }, `provider "q" is not defined`},
		{"empty match", func(o *Options) { o.Routes[0].Match = "" }, "match is empty"},
		{"bad dialect", func(o *Options) { o.Providers[0].Dialect = "gemini" }, `dialect "gemini"`},
		{"bad URL", func(o *Options) { o.Providers[0].BaseURL = "127.0.0.1:1" }, "base URL"},
		{"h2c over https", func(o *Options) { o.Providers[0].BaseURL = "https://x"; o.Providers[0].HTTP = H2C }, "h2c is HTTP/2 without TLS"},
		{"h2 over http", func(o *Options) { o.Providers[0].HTTP = H2 }, "h2 is HTTP/2 over TLS"},
		{"duplicate provider", func(o *Options) { o.Providers = append(o.Providers, o.Providers[0]) }, "defined twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := good()
			tt.edit(&o)
			if _, err := New(o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestGlob(t *testing.T) {
	for _, tt := range []struct {
		pattern, name string
		want          bool
	}{
		{"gpt-*", "gpt-4o", true},
		{"gpt-*", "gpt-", true},
		{"gpt-*", "xgpt-4o", false},
		{"*", "", true},
		{"*", "meta-llama/Llama-3-70b", true},
		{"openai/*", "openai/gpt-4o", true},
		{"*-mini", "gpt-4o-mini", true},
		{"*-mini", "gpt-4o-mini-2", false},
		{"claude-?-*", "claude-3-haiku", true},
		{"claude-?-*", "claude-35-haiku", false},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"é?", "éé", true},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"**a", "bbba", true},
	} {
		if got := Glob(tt.pattern, tt.name); got != tt.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func TestIsDialectError(t *testing.T) {
	for _, tt := range []struct {
		d    translate.Dialect
		body string
		want bool
	}{
		{translate.OpenAI, `{"error":{"message":"x"}}`, true},
		{translate.OpenAI, `{"error":"x"}`, false},
		{translate.OpenAI, `<html>`, false},
		{translate.Anthropic, `{"type":"error","error":{"type":"x","message":"y"}}`, true},
		{translate.Anthropic, `{"error":{"type":"x","message":"y"}}`, false},
	} {
		if got := isDialectError(tt.d, []byte(tt.body)); got != tt.want {
			t.Errorf("isDialectError(%s, %s) = %v", tt.d, tt.body, got)
		}
	}
}

// TestUsageMatchesTranslate checks the fast path's usage reader against
// translate.ResponseUsage, whose terms it must keep.
func TestUsageMatchesTranslate(t *testing.T) {
	for _, tt := range []struct {
		d    translate.Dialect
		body string
	}{
		{translate.OpenAI, openAIJSON("m")},
		{translate.OpenAI, `{"usage":{"prompt_tokens":100,"completion_tokens":7,"total_tokens":107,"prompt_tokens_details":{"cached_tokens":60,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":3}}}`},
		{translate.OpenAI, `{"usage":{"prompt_tokens":5,"completion_tokens":null,"prompt_tokens_details":null}}`},
		{translate.OpenAI, `{"usage":{"prompt_tokens":5.0,"completion_tokens":1}}`},
		{translate.OpenAI, `{"usage":null}`},
		{translate.OpenAI, `{"choices":[]}`},
		{translate.Anthropic, anthropicJSON("m")},
		{translate.Anthropic, `{"usage":{"input_tokens":10,"output_tokens":4,"cache_read_input_tokens":200,"cache_creation_input_tokens":30,"service_tier":"standard"}}`},
		{translate.Anthropic, `{"usage":{"input_tokens":10,"output_tokens":4,"cache_creation":{"ephemeral_5m_input_tokens":30}}}`},
		{translate.Anthropic, `{"usage":{"input_tokens":"10"}}`},
	} {
		got := responseUsage(tt.d, []byte(tt.body))
		want := translate.ResponseUsage(tt.d, []byte(tt.body))
		if got != want {
			t.Errorf("%s %s: got %+v, translate says %+v", tt.d, tt.body, got, want)
		}
	}
	if u, _ := translate.UsageOf(translate.Anthropic, []byte(`{"input_tokens":10,"output_tokens":4,"cache_read_input_tokens":200,"cache_creation_input_tokens":30}`)); u.Input != 240 || u.Output != 4 {
		t.Errorf("Anthropic input must include cached tokens: %+v", u)
	}
}
