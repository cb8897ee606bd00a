package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/llm/translate"
)

// TestBodyReadTimeout: a client that sends part of its body and then
// stalls gets 408, in its dialect, after body_read_timeout, over HTTP/1.1
// (and its connection is closed) and over h2c; the provider hears nothing.
// A client that sends its body in time is not cut off however long the
// provider then takes.
func TestBodyReadTimeout(t *testing.T) {
	const limit = 300 * time.Millisecond
	h := newHarness(t, harnessConfig{edit: func(o *Options) { o.BodyReadTimeout = limit }})
	partial := `{"model":"gpt-4o","messages":[`
	check := func(t *testing.T, d translate.Dialect, rp reply) {
		t.Helper()
		if rp.status != http.StatusRequestTimeout || rp.errType != "timeout_error" || !strings.Contains(rp.errMsg, "body_read_timeout") {
			t.Errorf("status %d error %q %q; want 408 timeout_error naming body_read_timeout", rp.status, rp.errType, rp.errMsg)
		}
	}
	for _, d := range dialects {
		t.Run("h1/"+string(d), func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			auth := "Authorization: Bearer " + testKey
			if d == translate.Anthropic {
				auth = "X-Api-Key: " + testKey + "\r\nAnthropic-Version: 2023-06-01"
			}
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n%s\r\nContent-Length: 500\r\n\r\n%s", endpoint(d), auth, partial)
			conn.SetDeadline(time.Now().Add(waitLimit))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to a stalled body: %v", err)
			}
			check(t, d, read(t, d, resp))
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("after the 408 the connection stayed open (%v)", err)
			}
		})
		t.Run("h2c/"+string(d), func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pw.Close()
			go pw.Write([]byte(partial))
			req, _ := http.NewRequest(http.MethodPost, h.url+endpoint(d), pr)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+testKey)
			if d == translate.Anthropic {
				req.Header.Set("Anthropic-Version", "2023-06-01")
			}
			check(t, d, read(t, d, must(client(true).Do(req))))
		})
	}
	if n := h.openai.count() + h.anthropic.count(); n != 0 {
		t.Errorf("the provider got %d requests from stalled clients", n)
	}
	if n, _ := h.metric(t, "strait_llm_errors_total", "kind", "body_timeout"); n != 4 {
		t.Errorf("body_timeout errors: %v, want 4", n)
	}
	if !strings.Contains(h.logs.String(), "did not send its request body in time") {
		t.Errorf("no warning about the slow client:\n%s", h.logs.String())
	}

	// The limit is on the body only: a provider that takes longer than it
	// to answer is waited for.
	h.openai.setHandler(func(w http.ResponseWriter, r *http.Request, body []byte) {
		time.Sleep(2 * limit)
		h.openai.script(w, r, body)
	})
	for _, h2c := range []bool{false, true} {
		for _, stream := range []bool{false, true} {
			rp := read(t, translate.OpenAI, h.post(t, client(h2c), translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", stream)))
			if rp.status != 200 || !rp.done || rp.text != "Paris." {
				t.Errorf("h2c %v stream %v: a slow provider after a prompt body: status %d done %v text %q error %q", h2c, stream, rp.status, rp.done, rp.text, rp.errMsg)
			}
		}
	}
}

// TestStreamIdleTimeout: a provider that goes quiet mid-stream is given up
// after stream_idle_timeout, not request_timeout (10 minutes here), and the
// client's stream ends with its dialect's timeout error, on the fast and
// the translated path.
func TestStreamIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	h := newHarness(t, harnessConfig{edit: func(o *Options) {
		for i := range o.Providers {
			o.Providers[i].StreamIdleTimeout = idle
		}
	}})
	c := client(false)
	for _, pd := range dialects {
		fp, events := h.openai, openAIEvents("gpt-4o")[:3]
		if pd == translate.Anthropic {
			fp, events = h.anthropic, anthropicEvents("claude-x")[:5]
		}
		cancelled := make(chan struct{}, 1)
		fp.setHandler(blockUntilCancelled(cancelled, events))
		for _, cd := range dialects {
			t.Run(string(pd)+"-to-"+string(cd), func(t *testing.T) {
				start := time.Now()
				rp := read(t, cd, h.post(t, c, cd, endpoint(cd), requestBody(cd, modelFor(pd), true)))
				if rp.status != 200 || rp.done || rp.text != "Paris." || rp.errType != "timeout_error" || !strings.Contains(rp.errMsg, "stream_idle_timeout") {
					t.Errorf("status %d done %v text %q error %s %q; want the text so far, then a timeout_error event naming stream_idle_timeout\n%s", rp.status, rp.done, rp.text, rp.errType, rp.errMsg, rp.raw)
				}
				if cd == translate.OpenAI && strings.Contains(string(rp.raw), "[DONE]") {
					t.Error("the stream that went quiet ended with [DONE]")
				}
				if took := time.Since(start); took < idle {
					t.Errorf("the stream was cut after %v, before stream_idle_timeout (%v)", took, idle)
				}
				select {
				case <-cancelled:
				case <-time.After(waitLimit):
					t.Fatal("the provider request was not cancelled")
				}
			})
		}
		fp.setHandler(nil)
	}
	if n, _ := h.metric(t, "strait_llm_errors_total", "kind", "upstream_timeout"); n != 4 {
		t.Errorf("upstream_timeout errors: %v, want 4", n)
	}

	t.Run("JSON answers are not streams", func(t *testing.T) {
		// A JSON body that pauses longer than the idle limit is waited
		// for: only request_timeout bounds it.
		h.openai.setHandler(func(w http.ResponseWriter, r *http.Request, _ []byte) {
			body := openAIJSON("gpt-4o")
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body[:20])
			w.(http.Flusher).Flush()
			time.Sleep(3 * idle)
			io.WriteString(w, body[20:])
		})
		defer h.openai.setHandler(nil)
		rp := read(t, translate.OpenAI, h.post(t, c, translate.OpenAI, "/v1/chat/completions", requestBody(translate.OpenAI, "gpt-4o", false)))
		if rp.status != 200 || rp.text != "Paris." {
			t.Errorf("status %d text %q error %q", rp.status, rp.text, rp.errMsg)
		}
	})
}

// TestStreamIdleTimeoutSteadyStream: a stream whose events keep coming
// within stream_idle_timeout runs on well past it.
func TestStreamIdleTimeoutSteadyStream(t *testing.T) {
	const idle = time.Second
	h := newHarness(t, harnessConfig{edit: func(o *Options) {
		for i := range o.Providers {
			o.Providers[i].StreamIdleTimeout = idle
		}
	}})
	const n = 30 // 30 events 50 ms apart: 1.5 s, longer than idle
	h.anthropic.setHandler(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		events := anthropicEvents("claude-x")
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for _, e := range events[:3] {
			io.WriteString(w, e)
		}
		for range n {
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
			io.WriteString(w, `event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`+"\n\n")
		}
		for _, e := range events[5:] {
			io.WriteString(w, e)
		}
	})
	for _, cd := range dialects {
		rp := read(t, cd, h.post(t, client(false), cd, endpoint(cd), requestBody(cd, "claude-x", true)))
		if rp.status != 200 || !rp.done || rp.text != strings.Repeat("x", n) {
			t.Errorf("%s: status %d done %v text %q error %q; want the whole stream", cd, rp.status, rp.done, rp.text, rp.errMsg)
		}
	}
}

// TestContentType: a body declared as anything but JSON gets 415 in the
// client's dialect and goes no further; JSON, with parameters, in any case,
// as a +json type, or undeclared, is accepted.
func TestContentType(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	c := client(false)
	do := func(d translate.Dialect, path, ctype string) reply {
		body := requestBody(d, "claude-x", false)
		req, _ := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		req.Header.Set("Authorization", "Bearer "+testKey)
		if d == translate.Anthropic {
			req.Header.Set("Anthropic-Version", "2023-06-01")
		}
		return read(t, d, must(c.Do(req)))
	}
	for _, d := range dialects {
		for _, ct := range []string{"text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml", "application/jsonl", "json"} {
			before := h.openai.count() + h.anthropic.count()
			rp := do(d, endpoint(d), ct)
			if rp.status != http.StatusUnsupportedMediaType || rp.errType != "invalid_request_error" || !strings.Contains(rp.errMsg, "application/json") || !strings.Contains(rp.errMsg, ct) {
				t.Errorf("%s, Content-Type %q: status %d error %q %q; want 415 naming the type and asking for application/json", d, ct, rp.status, rp.errType, rp.errMsg)
			}
			if h.openai.count()+h.anthropic.count() != before {
				t.Errorf("%s, Content-Type %q: the request reached a provider", d, ct)
			}
		}
		for _, ct := range []string{"", "application/json", "application/json; charset=utf-8", "Application/JSON", "application/vnd.example+json"} {
			if rp := do(d, endpoint(d), ct); rp.status != 200 || rp.text != "Paris." {
				t.Errorf("%s, Content-Type %q: status %d error %q; want it served", d, ct, rp.status, rp.errMsg)
			}
		}
	}
	if rp := do(translate.Anthropic, "/v1/messages/count_tokens", "text/plain"); rp.status != http.StatusUnsupportedMediaType {
		t.Errorf("count_tokens with text/plain: status %d, want 415", rp.status)
	}
}
