package mockllm

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The lean engine (lean.go) against x/net's HTTP/2 client and a client
// written frame by frame.

// startLean serves a mock for the test; lean says whether its cleartext
// HTTP/2 goes through the lean engine or net/http. Both kinds started by
// one test share their request IDs' random part and their clock, so that
// their answers to the same requests are the same bytes.
func startLean(t *testing.T, opt Options, lean bool) (*Server, string) {
	t.Helper()
	s := New(opt)
	s.noLean = !lean
	s.idBase = "0badc0de"
	fixed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.clock = func() time.Time { return fixed }
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if lean && s.lean == nil {
		t.Fatal("the lean engine did not start")
	}
	return s, url
}

// h2cClient is x/net's HTTP/2 client with prior knowledge; dials, if set,
// counts its connections.
func h2cClient(t *testing.T, dials *atomic.Int64) *http.Client {
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		if dials != nil {
			dials.Add(1)
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

type answer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func do(c *http.Client, method, url, body string, header ...string) answer {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b, err: err}
}

const (
	oaBody       = `{"model":"gpt-4o","messages":[{"role":"user","content":"Hello there"}]}`
	oaStreamBody = `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hello there"}]}`
	anBody       = `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"Hello there"}]}`
	anStreamBody = `{"model":"claude-sonnet-4-5","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"Hello there"}]}`
	anToolBody   = `{"model":"claude-sonnet-4-5","max_tokens":100,"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],"messages":[{"role":"user","content":"Weather in Paris?"}]}`
)

// The lean engine's answers are the bytes and headers net/http's are,
// whether it gives them itself or through the handler.
func TestLeanAnswersAsNetHTTP(t *testing.T) {
	opt := Options{Deltas: 4, APIKey: "k"}
	lean, leanURL := startLean(t, opt, true)
	plain, plainURL := startLean(t, opt, false)
	c := h2cClient(t, nil)
	cases := []struct {
		name, method, path, body string
		header                   []string
	}{
		{"openai json", "POST", "/v1/chat/completions", oaBody, []string{"Authorization", "Bearer k"}},
		{"openai stream", "POST", "/v1/chat/completions", oaStreamBody, []string{"Authorization", "Bearer k"}},
		{"anthropic json", "POST", "/v1/messages", anBody, []string{"X-Api-Key", "k"}},
		{"anthropic stream", "POST", "/v1/messages", anStreamBody, []string{"X-Api-Key", "k"}},
		{"anthropic tool", "POST", "/v1/messages", anToolBody, []string{"X-Api-Key", "k"}},
		{"models", "GET", "/v1/models", "", []string{"Authorization", "Bearer k"}},
		{"count tokens", "POST", "/v1/messages/count_tokens", anBody, []string{"X-Api-Key", "k"}},
		{"not found", "POST", "/v1/nothing", "{}", nil},
		{"wrong method", "GET", "/v1/chat/completions", "", []string{"Authorization", "Bearer k"}},
		{"bad key", "POST", "/v1/chat/completions", oaBody, []string{"Authorization", "Bearer nope"}},
		{"bad json", "POST", "/v1/messages", `{"model":`, []string{"X-Api-Key", "k"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := do(c, tc.method, plainURL+tc.path, tc.body, tc.header...)
			got := do(c, tc.method, leanURL+tc.path, tc.body, tc.header...)
			if want.err != nil || got.err != nil {
				t.Fatalf("net/http: %v; lean: %v", want.err, got.err)
			}
			if got.status != want.status || !bytes.Equal(got.body, want.body) {
				t.Fatalf("lean: %d %s\nnet/http: %d %s", got.status, got.body, want.status, want.body)
			}
			for _, h := range []string{"Content-Type", "Content-Length", "X-Request-Id", "Request-Id", "Cache-Control", "Retry-After"} {
				if g, w := got.header.Values(h), want.header.Values(h); strings.Join(g, ",") != strings.Join(w, ",") {
					t.Errorf("%s: lean %q, net/http %q", h, g, w)
				}
			}
			if got.header.Get("Date") == "" {
				t.Error("no Date header")
			}
		})
	}
	if n := lean.lean.answeredNative.Load(); n != 5 {
		t.Errorf("the loop answered %d requests itself, want the 5 chat completions and messages", n)
	}
	if n := lean.lean.answeredByHandler.Load(); n != 6 {
		t.Errorf("the handler answered %d requests, want 6", n)
	}
	for _, d := range []Dialect{OpenAI, Anthropic} {
		for _, stream := range []bool{false, true} {
			for _, status := range []int{200, 400, 401, 404, 405} {
				if g, w := lean.Count(d, stream, status), plain.Count(d, stream, status); g != w {
					t.Errorf("Count(%v, %v, %d): lean %d, net/http %d", d, stream, status, g, w)
				}
			}
		}
	}
	gi, go_ := lean.Billed()
	wi, wo := plain.Billed()
	if gi != wi || go_ != wo {
		t.Errorf("billed: lean %d/%d, net/http %d/%d", gi, go_, wi, wo)
	}
	if g, w := lean.Requests(), plain.Requests(); g != w {
		t.Errorf("requests: lean %d, net/http %d", g, w)
	}
	last, _ := lean.LastRequest()
	if last.Proto != "HTTP/2.0" || last.Path != "/v1/messages" {
		t.Errorf("last request %s %s", last.Proto, last.Path)
	}
}

// Many streams share one connection, JSON and SSE alike, their latency
// waited out together.
func TestLeanManyStreams(t *testing.T) {
	s, url := startLean(t, Options{Latency: 200 * time.Millisecond, Deltas: 5}, true)
	var dials atomic.Int64
	c := h2cClient(t, &dials)
	if a := do(c, "POST", url+"/v1/chat/completions", oaBody); a.err != nil || a.status != 200 {
		t.Fatalf("first request: %v %d", a.err, a.status)
	}
	const n = 300
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			path, body := "/v1/chat/completions", oaBody
			switch i % 4 {
			case 1:
				body = oaStreamBody
			case 2:
				path, body = "/v1/messages", anBody
			case 3:
				path, body = "/v1/messages", anStreamBody
			}
			a := do(c, "POST", url+path, body)
			if a.err != nil || a.status != 200 || !bytes.Contains(a.body, []byte("This answer")) {
				errs <- a.status2()
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if d := dials.Load(); d != 1 {
		t.Errorf("%d connections, want 1", d)
	}
	if got := s.lean.answeredNative.Load(); got != n+1 {
		t.Errorf("the loop answered %d, want %d", got, n+1)
	}
}

func (a answer) status2() string {
	if a.err != nil {
		return a.err.Error()
	}
	return http.StatusText(a.status) + ": " + string(a.body)
}

// A request body larger than the stream window the engine advertises
// arrives whole: the engine gives the window back as it reads.
func TestLeanLargeBody(t *testing.T) {
	s, url := startLean(t, Options{}, true)
	c := h2cClient(t, nil)
	big := strings.Repeat("word ", 3*streamWindow/5) // 3 MiB
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + big + `"}]}`
	a := do(c, "POST", url+"/v1/chat/completions", body)
	if a.err != nil || a.status != 200 {
		t.Fatalf("%v %d %.200s", a.err, a.status, a.body)
	}
	last, _ := s.LastRequest()
	if last.BodyBytes != len(body) {
		t.Errorf("the mock read %d bytes, want %d", last.BodyBytes, len(body))
	}
	if s.lean.answeredNative.Load() != 1 {
		t.Error("not answered by the loop")
	}
	// Over MaxBodyBytes: a 413, as over net/http.
	s2, url2 := startLean(t, Options{MaxBodyBytes: 1 << 20}, true)
	a = do(c, "POST", url2+"/v1/chat/completions", body)
	if a.err != nil || a.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("over the limit: %v %d %.200s", a.err, a.status, a.body)
	}
	if s2.Count(OpenAI, false, 413) != 1 {
		t.Errorf("413s counted: %d", s2.Count(OpenAI, false, 413))
	}
}

// A client that resets its streams ends them: the JSON answer is counted
// as given up, the stream as answered 200 for what it sent.
func TestLeanClientReset(t *testing.T) {
	s, url := startLean(t, Options{Latency: 2 * time.Second, Deltas: 10}, true)
	c := h2cClient(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/messages", strings.NewReader(anStreamBody))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if _, err := io.ReadAtLeast(resp.Body, buf, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()

	ctx2, cancel2 := context.WithCancel(context.Background())
	req2, _ := http.NewRequestWithContext(ctx2, "POST", url+"/v1/chat/completions", strings.NewReader(oaBody))
	done := make(chan error, 1)
	go func() {
		resp, err := c.Do(req2)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	waitFor(t, func() bool { return s.Requests() == 2 })
	cancel2()
	if err := <-done; err == nil {
		t.Fatal("the cancelled request was answered")
	}
	waitFor(t, func() bool {
		return s.Count(Anthropic, true, 200) == 1 && s.Count(OpenAI, false, 0) == 1
	})
	if in, out := s.Billed(); out != 1 || in == 0 {
		t.Errorf("billed %d/%d, want message_start's input tokens and 1", in, out)
	}
	// The connection still serves.
	if a := do(c, "GET", url+"/v1/models", ""); a.err != nil || a.status != 200 {
		t.Fatalf("after the resets: %v %d", a.err, a.status)
	}
}

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Injected faults behave over the lean engine as over net/http: the
// handler gives them, with the fault the loop drew.
func TestLeanFaults(t *testing.T) {
	c := h2cClient(t, nil)
	t.Run("500", func(t *testing.T) {
		s, url := startLean(t, Options{ErrorRate: 1}, true)
		a := do(c, "POST", url+"/v1/chat/completions", oaBody)
		if a.err != nil || a.status != 500 || !bytes.Contains(a.body, []byte("injected error")) {
			t.Fatalf("%v %d %s", a.err, a.status, a.body)
		}
		if s.Count(OpenAI, false, 500) != 1 || s.Requests() != 1 {
			t.Errorf("counted %d 500s of %d requests", s.Count(OpenAI, false, 500), s.Requests())
		}
	})
	t.Run("reset", func(t *testing.T) {
		_, url := startLean(t, Options{ErrorRate: 1, ErrorKinds: []ErrorKind{KindReset}}, true)
		a := do(c, "POST", url+"/v1/chat/completions", oaBody)
		var se http2.StreamError
		if !errors.As(a.err, &se) || se.Code != http2.ErrCodeInternal {
			t.Fatalf("want the stream reset with INTERNAL_ERROR, got %v (status %d)", a.err, a.status)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		_, url := startLean(t, Options{ErrorRate: 1, ErrorKinds: []ErrorKind{KindTimeout}, Hang: 50 * time.Millisecond}, true)
		if a := do(c, "POST", url+"/v1/messages", anBody); a.err == nil {
			t.Fatalf("answered %d", a.status)
		}
	})
	t.Run("midstream", func(t *testing.T) {
		_, url := startLean(t, Options{ErrorRate: 1, ErrorKinds: []ErrorKind{KindMidstream}, Deltas: 4}, true)
		a := do(c, "POST", url+"/v1/messages", anStreamBody)
		if a.err != nil || a.status != 200 || !bytes.Contains(a.body, []byte("event: error")) || bytes.Contains(a.body, []byte("message_stop")) {
			t.Fatalf("%v %d %s", a.err, a.status, a.body)
		}
	})
	t.Run("half", func(t *testing.T) {
		s, url := startLean(t, Options{ErrorRate: 0.5}, true)
		for range 200 {
			if a := do(c, "POST", url+"/v1/chat/completions", oaBody); a.err != nil {
				t.Fatal(a.err)
			}
		}
		ok, failed := s.Count(OpenAI, false, 200), s.Count(OpenAI, false, 500)
		if ok+failed != 200 || ok < 60 || failed < 60 {
			t.Errorf("%d answered, %d failed: want about half each", ok, failed)
		}
		if s.lean.answeredNative.Load() != ok || s.lean.answeredByHandler.Load() != failed {
			t.Errorf("loop %d, handler %d; want %d and %d", s.lean.answeredNative.Load(), s.lean.answeredByHandler.Load(), ok, failed)
		}
	})
	t.Run("rate limit window", func(t *testing.T) {
		s, url := startLean(t, Options{RateLimitEvery: time.Hour, RateLimitFor: time.Minute}, true)
		s.clock = func() time.Time { return s.start.Add(time.Hour + time.Second) }
		a := do(c, "POST", url+"/v1/chat/completions", oaBody)
		if a.status != 429 || a.header.Get("Retry-After") != "59" {
			t.Fatalf("%v %d retry-after %q", a.err, a.status, a.header.Get("Retry-After"))
		}
	})
}

// Close drops the connections and their streams at once, and leaves no
// goroutine behind; Shutdown lets the answers in flight finish.
func TestLeanCloseAndShutdown(t *testing.T) {
	before := runtime.NumGoroutine()
	s := New(Options{Latency: 10 * time.Second, Deltas: 10})
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	errs := make(chan error, 20)
	for i := range 20 {
		go func() {
			body := oaBody
			if i%2 == 0 {
				body = oaStreamBody
			}
			a := do(c, "POST", url+"/v1/chat/completions", body)
			errs <- a.err
		}()
	}
	waitFor(t, func() bool { return s.Requests() == 20 })
	s.Close()
	for range 20 {
		err := <-errs
		var ne net.Error
		switch {
		case err == nil:
			t.Error("a request in flight was answered in full despite Close")
		case errors.As(err, &ne) && ne.Timeout():
			// The client gave up (its 30 s timeout) before Close ended
			// the request.
			t.Errorf("Close did not end a request in flight: %v", err)
		}
	}
	tr.CloseIdleConnections()
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before })

	// Shutdown: the answers in flight complete, new connections are refused.
	s2 := New(Options{Latency: 300 * time.Millisecond})
	url2, err := s2.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c2 := h2cClient(t, nil)
	got := make(chan answer, 2)
	go func() { got <- do(c2, "POST", url2+"/v1/chat/completions", oaBody) }()
	go func() { got <- do(c2, "POST", url2+"/v1/messages", anStreamBody) }()
	waitFor(t, func() bool { return s2.Requests() == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s2.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if a := <-got; a.err != nil || a.status != 200 {
			t.Errorf("in flight at Shutdown: %v %d", a.err, a.status)
		}
	}
}

// rawClient speaks HTTP/2 frame by frame, for what x/net's client never
// does.
type rawClient struct {
	t   *testing.T
	nc  net.Conn
	fr  *http2.Framer
	hb  bytes.Buffer
	enc *hpack.Encoder
}

func dialRaw(t *testing.T, url string, settings ...http2.Setting) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	rc := &rawClient{t: t, nc: nc, fr: http2.NewFramer(nc, nc)}
	rc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	rc.enc = hpack.NewEncoder(&rc.hb)
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := rc.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	return rc
}

// request opens stream id with a POST of body to path.
func (rc *rawClient) request(id uint32, path, body string) {
	rc.hb.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "mock"}, {":path", path}, {"content-type", "application/json"}} {
		_ = rc.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: rc.hb.Bytes(), EndHeaders: true, EndStream: body == ""}); err != nil {
		rc.t.Fatal(err)
	}
	if body != "" {
		if err := rc.fr.WriteData(id, true, []byte(body)); err != nil {
			rc.t.Fatal(err)
		}
	}
}

// next returns the next frame that is not part of the connection's
// housekeeping (SETTINGS, their ACK, connection WINDOW_UPDATE).
func (rc *rawClient) next() http2.Frame {
	rc.t.Helper()
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			rc.t.Fatalf("reading a frame: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = rc.fr.WriteSettingsAck()
			}
			continue
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				continue
			}
		}
		return f
	}
}

// The engine keeps to HTTP/2's rules with a client that tests them: its
// stream limit, the client's send window, PING, bad requests and
// protocol errors, which end that connection only.
func TestLeanProtocol(t *testing.T) {
	s, url := startLean(t, Options{Latency: 300 * time.Millisecond, MaxConcurrentStreams: 2, ResponseBytes: 3000}, true)

	t.Run("stream limit", func(t *testing.T) {
		rc := dialRaw(t, url)
		rc.request(1, "/v1/chat/completions", oaBody)
		rc.request(3, "/v1/chat/completions", oaBody)
		rc.request(5, "/v1/chat/completions", oaBody)
		f := rc.next()
		if rst, ok := f.(*http2.RSTStreamFrame); !ok || rst.StreamID != 5 || rst.ErrCode != http2.ErrCodeRefusedStream {
			t.Fatalf("want RST_STREAM(5, REFUSED_STREAM), got %v", f)
		}
	})

	t.Run("send window", func(t *testing.T) {
		rc := dialRaw(t, url, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1000})
		rc.request(1, "/v1/chat/completions", oaBody)
		var got int
		for got < 1000 {
			switch f := rc.next().(type) {
			case *http2.MetaHeadersFrame:
				if f.PseudoValue("status") != "200" {
					t.Fatalf("status %s", f.PseudoValue("status"))
				}
			case *http2.DataFrame:
				got += len(f.Data())
				if f.StreamEnded() {
					t.Fatalf("the answer ended after %d bytes, beyond the 1000-byte window", got)
				}
			default:
				t.Fatalf("unexpected %v", f)
			}
		}
		if got != 1000 {
			t.Fatalf("%d bytes sent into a 1000-byte window", got)
		}
		// Nothing more comes until the window opens.
		if err := rc.fr.WritePing(false, [8]byte{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		if p, ok := rc.next().(*http2.PingFrame); !ok || !p.IsAck() || p.Data != [8]byte{1, 2, 3} {
			t.Fatalf("want the PING answered first, got %v", p)
		}
		_ = rc.fr.WriteWindowUpdate(1, 1<<20)
		for {
			f, ok := rc.next().(*http2.DataFrame)
			if !ok {
				t.Fatal("want the rest of the answer")
			}
			got += len(f.Data())
			if f.StreamEnded() {
				break
			}
		}
		if got < 2500 {
			t.Errorf("answer of %d bytes, want about ResponseBytes", got)
		}
	})

	t.Run("bad request headers", func(t *testing.T) {
		rc := dialRaw(t, url)
		rc.hb.Reset()
		_ = rc.enc.WriteField(hpack.HeaderField{Name: ":method", Value: "POST"})
		_ = rc.enc.WriteField(hpack.HeaderField{Name: ":scheme", Value: "http"})
		_ = rc.enc.WriteField(hpack.HeaderField{Name: "connection", Value: "keep-alive"})
		_ = rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: rc.hb.Bytes(), EndHeaders: true, EndStream: true})
		if rst, ok := rc.next().(*http2.RSTStreamFrame); !ok || rst.StreamID != 1 || rst.ErrCode != http2.ErrCodeProtocol {
			t.Fatalf("want RST_STREAM(1, PROTOCOL_ERROR), got %v", rst)
		}
		// The connection lives on.
		rc.request(3, "/v1/models", "")
		if h, ok := rc.next().(*http2.MetaHeadersFrame); !ok || h.StreamID != 3 {
			t.Fatalf("want the answer on stream 3, got %v", h)
		}
	})

	t.Run("protocol error", func(t *testing.T) {
		other := dialRaw(t, url)
		other.request(1, "/v1/chat/completions", oaBody)

		rc := dialRaw(t, url)
		// DATA on stream 0 is a connection error.
		_ = rc.fr.WriteRawFrame(http2.FrameData, 0, 0, []byte("x"))
		f := rc.next()
		if ga, ok := f.(*http2.GoAwayFrame); !ok || ga.ErrCode != http2.ErrCodeProtocol {
			t.Fatalf("want GOAWAY(PROTOCOL_ERROR), got %v", f)
		}
		if _, err := rc.fr.ReadFrame(); err == nil {
			t.Fatal("the connection stayed open after GOAWAY")
		}
		// The other connection is untouched.
		if h, ok := other.next().(*http2.MetaHeadersFrame); !ok || h.PseudoValue("status") != "200" {
			t.Fatalf("the other connection: got %v", h)
		}
	})

	t.Run("header list too large", func(t *testing.T) {
		rc := dialRaw(t, url)
		rc.hb.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "mock"}, {":path", "/v1/chat/completions"}} {
			_ = rc.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		for i := range 3 {
			_ = rc.enc.WriteField(hpack.HeaderField{Name: "x-big-" + string(rune('a'+i)), Value: strings.Repeat("v", 400<<10), Sensitive: true})
		}
		block := rc.hb.Bytes()
		first := block[:16384]
		_ = rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndStream: true})
		for block = block[len(first):]; len(block) > 0; {
			n := min(len(block), 16384)
			_ = rc.fr.WriteContinuation(1, n == len(block), block[:n])
			block = block[n:]
		}
		h, ok := rc.next().(*http2.MetaHeadersFrame)
		if !ok || h.PseudoValue("status") != "431" || !h.StreamEnded() {
			t.Fatalf("want a bare 431, got %v", h)
		}
		rc.request(3, "/v1/models", "")
		if h, ok := rc.next().(*http2.MetaHeadersFrame); !ok || h.StreamID != 3 || h.PseudoValue("status") != "405" {
			t.Fatalf("want the next request answered (405: models takes GET), got %v", h)
		}
	})

	t.Run("garbage", func(t *testing.T) {
		rc := dialRaw(t, url)
		_, _ = rc.nc.Write(bytes.Repeat([]byte{0xff}, 64))
		f := rc.next()
		if ga, ok := f.(*http2.GoAwayFrame); !ok || ga.ErrCode != http2.ErrCodeFrameSize {
			t.Fatalf("want GOAWAY(FRAME_SIZE_ERROR), got %v", f)
		}
	})

	t.Run("no settings first", func(t *testing.T) {
		nc, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		fr := http2.NewFramer(nc, nc)
		_, _ = io.WriteString(nc, http2.ClientPreface)
		_ = fr.WritePing(false, [8]byte{})
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			if ga, ok := f.(*http2.GoAwayFrame); ok {
				if ga.ErrCode != http2.ErrCodeProtocol {
					t.Fatalf("GOAWAY %v", ga.ErrCode)
				}
				break
			}
		}
	})
	if s.lean.answeredNative.Load() == 0 {
		t.Error("nothing went through the lean engine")
	}
}

// FuzzLeanConn feeds a connection arbitrary bytes after the preface: the
// engine must neither panic nor loop, whatever a client sends.
func FuzzLeanConn(f *testing.F) {
	var seed bytes.Buffer
	fr := http2.NewFramer(&seed, nil)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100})
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "m"}, {":path", "/v1/chat/completions"}, {"content-length", "68"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	_ = fr.WriteData(1, true, []byte(oaBody[:68]))
	f.Add(bytes.Clone(seed.Bytes()))
	_ = fr.WritePing(false, [8]byte{7})
	_ = fr.WriteWindowUpdate(1, 5)
	_ = fr.WriteRSTStream(1, http2.ErrCodeCancel)
	f.Add(bytes.Clone(seed.Bytes()))
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: hb.Bytes()[:5], EndHeaders: false})
	_ = fr.WriteContinuation(3, true, hb.Bytes()[5:])
	_ = fr.WriteData(3, true, []byte(`{"model":"x"`))
	f.Add(bytes.Clone(seed.Bytes()))
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 5, 1, 5, 0, 0, 0, 1})
	s := New(Options{})
	f.Fuzz(func(t *testing.T, data []byte) {
		e := &engine{s: s, conns: map[int]*lconn{}, drained: make(chan struct{}), done: make(chan struct{})}
		now := time.Now()
		c := e.newConn(incoming{fd: -1, remote: "fuzz"}, now)
		// In pieces, as a socket delivers them.
		for len(data) > 0 && !c.dead {
			n := min(len(data), 1+int(data[0])%64)
			c.in = append(c.in, data[:n]...)
			data = data[n:]
			c.process(now)
		}
		e.handlers.Wait()
		e.mu.Lock()
		events := e.events
		e.mu.Unlock()
		for i := range events {
			e.apply(&events[i], now)
		}
		e.fire(now.Add(time.Hour))
		c.fail()
	})
}

// plainPath takes only the paths url.ParseRequestURI parses to a bare
// Path.
func TestPlainPath(t *testing.T) {
	for _, p := range []string{"/v1/messages", "/v1/chat/completions", "/", "/a-b_c.d", "/v1/./x", "/v1/%41", "/x?y=1", "*", "", "v1", "/a b", "/a;b"} {
		if !plainPath(p) {
			continue
		}
		u, err := url.ParseRequestURI(p)
		if err != nil || *u != (url.URL{Path: p}) {
			t.Errorf("%q: ParseRequestURI gives %#v, %v", p, u, err)
		}
	}
	for _, p := range []string{"/v1/messages", "/v1/chat/completions"} {
		if !plainPath(p) {
			t.Errorf("%q is plain", p)
		}
	}
}

// staticOnly tells the header blocks that decode the same whatever the
// dynamic table holds, and only those.
func TestStaticOnly(t *testing.T) {
	literal := appendField(appendField([]byte{0x83, 0x86}, ":path", "/v1/messages"), "x-api-key", "k") // POST, http
	if !staticOnly(literal) {
		t.Error("literals without indexing and static entries: want true")
	}
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	_ = enc.WriteField(hpack.HeaderField{Name: "x-api-key", Value: "k"}) // added to the dynamic table
	if staticOnly(b.Bytes()) {
		t.Error("a literal with incremental indexing: want false")
	}
	for _, bad := range [][]byte{{0xbe}, {0x20}, {0x00, 0x05, 'a'}, {0x0f}, {0x0f, 0x80, 0x80, 0x80, 0x80, 0x80}} {
		if staticOnly(bad) {
			t.Errorf("%x: want false", bad)
		}
	}
}

// wrappedListener hands out connections that are not sockets to the
// engine: they hide their descriptor.
type wrappedListener struct{ net.Listener }

type wrappedConn struct{ net.Conn }

func (l wrappedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return wrappedConn{c}, nil
}

// HTTP/2 on a connection the engine cannot take over is served by
// net/http, not dropped.
func TestLeanFallsBackForOtherConns(t *testing.T) {
	s := New(Options{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(wrappedListener{l}) }()
	t.Cleanup(func() { s.Close() })
	c := h2cClient(t, nil)
	a := do(c, "POST", "http://"+l.Addr().String()+"/v1/chat/completions", oaBody)
	if a.err != nil || a.status != 200 {
		t.Fatalf("%v %d %s", a.err, a.status, a.body)
	}
	last, _ := s.LastRequest()
	if last.Proto != "HTTP/2.0" {
		t.Errorf("served over %s", last.Proto)
	}
	s.mu.Lock()
	e := s.lean
	s.mu.Unlock()
	if e != nil && e.answeredNative.Load() != 0 {
		t.Error("the engine answered a connection it cannot own")
	}
}
