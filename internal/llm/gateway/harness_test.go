package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/straitgw/strait/internal/llm/sse"
	"github.com/straitgw/strait/internal/llm/translate"
	"github.com/straitgw/strait/internal/testkit"
)

// The gateway key the tests' clients present, and the provider keys the
// gateway must send instead.
const (
	testKey         = "strait-test-key"
	openAIKey       = "sk-provider-openai-Xq7vT2mLk9"
	anthropicKey    = "sk-provider-anthropic-Jw4rB8nZc3"
	waitLimit       = 10 * time.Second
	providerTimeout = 5 * time.Second
)

// seen is one request a fake provider received.
type seen struct {
	path   string
	proto  int
	header http.Header
	body   []byte
}

// fakeProvider is a scripted provider of one dialect. By default it
// answers like the real API (see script*); handle overrides that.
type fakeProvider struct {
	dialect translate.Dialect
	srv     *httptest.Server

	mu     sync.Mutex
	reqs   []seen
	handle func(w http.ResponseWriter, r *http.Request, body []byte)
}

// newFakeProvider starts a provider speaking HTTP/1.1, or h2c when h2c is
// set.
func newFakeProvider(t *testing.T, d translate.Dialect, h2c bool) *fakeProvider {
	t.Helper()
	fp := &fakeProvider{dialect: d}
	fp.srv = httptest.NewUnstartedServer(http.HandlerFunc(fp.serve))
	fp.srv.Config.Protocols = new(http.Protocols)
	fp.srv.Config.Protocols.SetHTTP1(true)
	fp.srv.Config.Protocols.SetUnencryptedHTTP2(h2c)
	fp.srv.Start()
	t.Cleanup(fp.srv.Close)
	return fp
}

func (fp *fakeProvider) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	fp.mu.Lock()
	fp.reqs = append(fp.reqs, seen{path: r.URL.Path, proto: r.ProtoMajor, header: r.Header.Clone(), body: body})
	h := fp.handle
	fp.mu.Unlock()
	if h != nil {
		h(w, r, body)
		return
	}
	fp.script(w, r, body)
}

func (fp *fakeProvider) setHandler(h func(w http.ResponseWriter, r *http.Request, body []byte)) {
	fp.mu.Lock()
	fp.handle = h
	fp.mu.Unlock()
}

func (fp *fakeProvider) last(t *testing.T) seen {
	t.Helper()
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if len(fp.reqs) == 0 {
		t.Fatal("the provider received no request")
	}
	return fp.reqs[len(fp.reqs)-1]
}

func (fp *fakeProvider) count() int {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return len(fp.reqs)
}

// The scripted answers: the text "Paris." in two pieces, 12 tokens in and
// 3 out.
func openAIJSON(model string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"` + model + `",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Paris."},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`
}

func anthropicJSON(model string) string {
	return `{"id":"msg_1","type":"message","role":"assistant","model":"` + model + `",` +
		`"content":[{"type":"text","text":"Paris."}],"stop_reason":"end_turn","stop_sequence":null,` +
		`"usage":{"input_tokens":12,"output_tokens":3}}`
}

func openAIEvents(model string) []string {
	chunk := func(rest string) string {
		return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"` + model + `",` + rest + "\n\n"
	}
	return []string{
		chunk(`"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`),
		chunk(`"choices":[{"index":0,"delta":{"content":"Par"},"finish_reason":null}]}`),
		chunk(`"choices":[{"index":0,"delta":{"content":"is."},"finish_reason":null}]}`),
		chunk(`"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`),
		chunk(`"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`),
		"data: [DONE]\n\n",
	}
}

func anthropicEvents(model string) []string {
	ev := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	return []string{
		ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"`+model+`","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`),
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		ev("ping", `{"type":"ping"}`),
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Par"}}`),
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"is."}}`),
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`),
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`),
		ev("message_stop", `{"type":"message_stop"}`),
	}
}

// script answers as the real API would.
func (fp *fakeProvider) script(w http.ResponseWriter, r *http.Request, body []byte) {
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, 400)
		return
	}
	if r.URL.Path == "/v1/messages/count_tokens" {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":42}`)
		return
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req-from-provider")
		if fp.dialect == translate.OpenAI {
			io.WriteString(w, openAIJSON(req.Model))
		} else {
			io.WriteString(w, anthropicJSON(req.Model))
		}
		return
	}
	events := openAIEvents(req.Model)
	if fp.dialect == translate.Anthropic {
		events = anthropicEvents(req.Model)
	}
	writeEvents(w, events)
}

func writeEvents(w http.ResponseWriter, events []string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	for _, e := range events {
		io.WriteString(w, e)
		w.(http.Flusher).Flush()
	}
}

// harness is a gateway serving on a loopback listener, in front of one
// fake provider of each dialect.
type harness struct {
	g         *Gateway
	url       string
	reg       *prometheus.Registry
	logs      *testkit.SyncBuffer
	openai    *fakeProvider
	anthropic *fakeProvider
}

type harnessConfig struct {
	providerH2C bool
	listener    Listener
	edit        func(*Options)
}

func newHarness(t *testing.T, hc harnessConfig) *harness {
	t.Helper()
	h := &harness{
		reg:       prometheus.NewRegistry(),
		logs:      &testkit.SyncBuffer{},
		openai:    newFakeProvider(t, translate.OpenAI, hc.providerH2C),
		anthropic: newFakeProvider(t, translate.Anthropic, hc.providerH2C),
	}
	mode := HTTP1
	if hc.providerH2C {
		mode = H2C
	}
	opts := Options{
		Providers: []Provider{
			{Name: "oa", Dialect: translate.OpenAI, BaseURL: h.openai.srv.URL, APIKey: openAIKey, HTTP: mode, ResponseTimeout: providerTimeout},
			{Name: "an", Dialect: translate.Anthropic, BaseURL: h.anthropic.srv.URL, APIKey: anthropicKey, HTTP: mode, ResponseTimeout: providerTimeout},
		},
		Routes: []Route{
			{Match: "gpt-*", Provider: "oa"},
			{Match: "claude-*", Provider: "an"},
			{Name: "alias", Match: "alias-?", Provider: "oa", Model: "gpt-upstream"},
			{Match: "exact-model", Provider: "an", Model: "claude-upstream"},
			{Match: "listed-*", Provider: "oa", Models: []string{"listed-a", "listed-b"}},
		},
		Keys:    []Key{{Name: "tester", SHA256: HashKey(testKey)}, {Name: "other", SHA256: HashKey("another-key")}},
		Log:     slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics: NewMetrics(h.reg),
	}
	if hc.edit != nil {
		hc.edit(&opts)
	}
	g, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.g = g
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- g.Serve(ln, hc.listener) }()
	scheme := "http://"
	if hc.listener.TLS != nil {
		scheme = "https://"
	}
	h.url = scheme + ln.Addr().String()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(waitLimit):
			t.Error("Serve did not return after Shutdown")
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", h.logs.String())
		}
	})
	waitReady(t, g)
	return h
}

func waitReady(t *testing.T, g *Gateway) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for g.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("gateway not ready: %v", g.Ready())
		}
		time.Sleep(time.Millisecond)
	}
}

// client returns an HTTP client speaking HTTP/1.1, or h2c with prior
// knowledge.
func client(h2c bool) *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols), DisableCompression: true}
	if h2c {
		tr.Protocols.SetUnencryptedHTTP2(true)
	} else {
		tr.Protocols.SetHTTP1(true)
	}
	return &http.Client{Transport: tr, Timeout: waitLimit}
}

// endpoint is the path a client of dialect d posts to.
func endpoint(d translate.Dialect) string {
	if d == translate.OpenAI {
		return "/v1/chat/completions"
	}
	return "/v1/messages"
}

// requestBody is a minimal request of dialect d.
func requestBody(d translate.Dialect, model string, stream bool) string {
	s := ""
	if stream {
		s = `,"stream":true`
		if d == translate.OpenAI {
			s += `,"stream_options":{"include_usage":true}`
		}
	}
	if d == translate.OpenAI {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"Capital of France?"}]` + s + `}`
	}
	return `{"model":"` + model + `","max_tokens":100,"messages":[{"role":"user","content":"Capital of France?"}]` + s + `}`
}

// post sends body to path with the test key in the dialect's usual header.
func (h *harness) post(t *testing.T, c *http.Client, d translate.Dialect, path, body string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if d == translate.Anthropic {
		req.Header.Set("X-Api-Key", testKey)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer "+testKey)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// reply is what a client made of a response.
type reply struct {
	status    int
	text      string // the assistant's text
	done      bool   // JSON: parsed; stream: the dialect's terminator came
	errType   string // the error's type, from a JSON error or an error event
	errMsg    string
	in, out   int // usage
	raw       []byte
	events    []sse.Event // streams, as read
	header    http.Header
	trailer   http.Header
	protoMaj  int
	eventName []string
}

// read reads a whole response as a client of dialect d would.
func read(t *testing.T, d translate.Dialect, resp *http.Response) reply {
	t.Helper()
	defer resp.Body.Close()
	rp := reply{status: resp.StatusCode, header: resp.Header, protoMaj: resp.ProtoMajor}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		rd := sse.NewReader(resp.Body)
		for {
			ev, err := rd.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					rp.errMsg = "read: " + err.Error()
				}
				break
			}
			rp.raw = append(rp.raw, ev.Raw...)
			ev.Raw = bytes.Clone(ev.Raw)
			ev.Data = bytes.Clone(ev.Data)
			rp.events = append(rp.events, ev)
			rp.eventName = append(rp.eventName, ev.Name)
			readEvent(t, d, ev, &rp)
		}
		rp.trailer = resp.Trailer
		return rp
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	rp.raw = body
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("response is not JSON (%v): %s", err, body)
	}
	if e, ok := m["error"].(map[string]any); ok {
		rp.errType, _ = e["type"].(string)
		rp.errMsg, _ = e["message"].(string)
		if d == translate.Anthropic && m["type"] != "error" {
			t.Errorf("Anthropic error without type:error: %s", body)
		}
		return rp
	}
	rp.done = true
	if d == translate.OpenAI {
		var r struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
			Usage struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
		}
		json.Unmarshal(body, &r)
		if len(r.Choices) > 0 {
			rp.text = r.Choices[0].Message.Content
		}
		rp.in, rp.out = r.Usage.Prompt, r.Usage.Completion
	} else {
		var r struct {
			Content []struct{ Type, Text string } `json:"content"`
			Usage   struct {
				In  int `json:"input_tokens"`
				Out int `json:"output_tokens"`
			} `json:"usage"`
		}
		json.Unmarshal(body, &r)
		for _, c := range r.Content {
			rp.text += c.Text
		}
		rp.in, rp.out = r.Usage.In, r.Usage.Out
	}
	return rp
}

func readEvent(t *testing.T, d translate.Dialect, ev sse.Event, rp *reply) {
	if ev.Comment {
		return
	}
	if d == translate.OpenAI {
		if string(ev.Data) == "[DONE]" {
			rp.done = true
			return
		}
		var c struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
			Error *struct{ Type, Message string } `json:"error"`
		}
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Errorf("OpenAI stream chunk is not JSON: %q", ev.Data)
			return
		}
		for _, ch := range c.Choices {
			rp.text += ch.Delta.Content
		}
		if c.Usage != nil {
			rp.in, rp.out = c.Usage.Prompt, c.Usage.Completion
		}
		if c.Error != nil {
			rp.errType, rp.errMsg = c.Error.Type, c.Error.Message
		}
		return
	}
	var e struct {
		Type  string `json:"type"`
		Delta struct {
			Type, Text string
		} `json:"delta"`
		Message struct {
			Usage struct {
				In int `json:"input_tokens"`
			} `json:"usage"`
		} `json:"message"`
		Usage struct {
			In  int `json:"input_tokens"`
			Out int `json:"output_tokens"`
		} `json:"usage"`
		Error struct{ Type, Message string } `json:"error"`
	}
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		t.Errorf("Anthropic event %q is not JSON: %q", ev.Name, ev.Data)
		return
	}
	switch ev.Name {
	case "message_start":
		rp.in = e.Message.Usage.In
	case "content_block_delta":
		if e.Delta.Type == "text_delta" {
			rp.text += e.Delta.Text
		}
	case "message_delta":
		// A provider that reports input tokens only at the end (OpenAI)
		// gives them here.
		rp.out = e.Usage.Out
		if e.Usage.In > 0 {
			rp.in = e.Usage.In
		}
	case "message_stop":
		rp.done = true
	case "error":
		rp.errType, rp.errMsg = e.Error.Type, e.Error.Message
	}
}

// metric returns the value of the series of name whose labels include
// labels (name=value pairs): a counter's value, a histogram's count.
func (h *harness) metric(t *testing.T, name string, labels ...string) (float64, bool) {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	found := false
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			found = true
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			}
		}
	}
	return sum, found
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		ok := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// eventually polls cond until it holds or the wait limit passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// tlsClient trusts ca and offers h2 and http/1.1 by ALPN (or only
// http/1.1).
func tlsClient(ca *testkit.CA, h1Only bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}, Protocols: new(http.Protocols)}
	tr.Protocols.SetHTTP1(true)
	tr.Protocols.SetHTTP2(!h1Only)
	return &http.Client{Transport: tr, Timeout: waitLimit}
}
