package llmload

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/straitgw/strait/internal/mockllm"
)

// h2cRun is shortRun over h2c on two connections.
func h2cRun(url string) Workload {
	w := shortRun(url)
	w.H2C, w.Conns = true, 2
	return w
}

// h2cServer serves h over HTTP/2 with prior knowledge (net/http's server,
// a real peer), with conf for its HTTP/2 settings.
func h2cServer(t *testing.T, h http.Handler, conf *http.HTTP2Config) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			http.Error(w, "want HTTP/2", http.StatusHTTPVersionNotSupported)
			return
		}
		h.ServeHTTP(w, r)
	}))
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = p
	srv.Config.HTTP2 = conf
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestH2CAgainstTheMock runs both dialects, JSON and streams, against
// strait mock llm: every request answered, latency at least the mock's,
// the first event of a stream before its end.
func TestH2CAgainstTheMock(t *testing.T) {
	const latency = 100 * time.Millisecond
	mock := mockllm.New(mockllm.Options{Latency: latency})
	url, err := mock.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	for _, dialect := range []string{OpenAI, Anthropic} {
		for _, stream := range []bool{false, true} {
			w := h2cRun(url)
			w.Dialect, w.Stream, w.APIKey = dialect, stream, "k"
			d := mockllm.OpenAI
			if dialect == Anthropic {
				d = mockllm.Anthropic
			}
			before := mock.Count(d, stream, 200)
			res, err := Run(context.Background(), w, Options{})
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s stream=%v", dialect, stream)
			if !res.Valid || res.Due != 50 || res.Sent != 50 || res.OK != 50 || res.Statuses["200"] != 50 {
				t.Errorf("%s: valid %v %v; due %d sent %d ok %d statuses %v, want 50 answered", name, res.Valid, res.Problems, res.Due, res.Sent, res.OK, res.Statuses)
			}
			// Every request sent reached the mock (the warm-up's and the
			// probe too).
			if got := mock.Count(d, stream, 200) - before; got < 51 {
				t.Errorf("%s: the mock answered %d, want at least 51", name, got)
			}
			if res.Latency.P50 < float64(latency.Milliseconds()) || res.PeakInflight < 3 {
				t.Errorf("%s: p50 %.1f ms, peak in flight %d: want at least the mock's %v, and requests overlapping", name, res.Latency.P50, res.PeakInflight, latency)
			}
			if stream && (res.FirstEvent == nil || res.FirstEvent.Count != 50 || res.FirstEvent.P50 >= res.Latency.P50) {
				t.Errorf("%s: first event %+v, want 50, before the end (p50 %.1f)", name, res.FirstEvent, res.Latency.P50)
			}
			if !stream && res.FirstEvent != nil {
				t.Errorf("%s: a first-event recorder for JSON answers", name)
			}
		}
	}
}

// firstOK answers the first request (the probe) with ok and the others
// with h.
func firstOK(h http.HandlerFunc) http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if n.Add(1) == 1 {
			// Complete as a JSON answer or a stream of either dialect.
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: [DONE]\n\nevent: message_stop\ndata: {}\n\n")
			return
		}
		h(w, r)
	})
}

func TestH2CCountsHTTPErrors(t *testing.T) {
	var n atomic.Int64
	url := h2cServer(t, firstOK(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 {
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		http.Error(w, "boom", http.StatusInternalServerError)
	}), nil)
	res, err := Run(context.Background(), h2cRun(url), Options{})
	if err != nil {
		t.Fatal(err)
	}
	k429, k500 := res.ErrorKinds["http 429"], res.ErrorKinds["http 500"]
	if res.Valid || res.OK != 0 || res.Errors != 50 || k429+k500 != 50 || k429 < 20 || k500 < 20 ||
		res.Statuses["429"] != k429 || res.Statuses["500"] != k500 {
		t.Fatalf("ok %d errors %d kinds %v statuses %v: want 50 errors, half 429 and half 500, each counted as a status", res.OK, res.Errors, res.ErrorKinds, res.Statuses)
	}
}

// TestH2CProbeErrorNamesTheStatusAndBody: a failing first request stops
// the run with the answer's status and body, as over HTTP/1.1.
func TestH2CProbeErrorNamesTheStatusAndBody(t *testing.T) {
	url := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unknown model", http.StatusNotFound)
	}), nil)
	_, err := Run(context.Background(), h2cRun(url), Options{})
	if err == nil || !strings.Contains(err.Error(), "HTTP 404: unknown model") {
		t.Fatalf("error %v, want the status and body of the first answer", err)
	}
}

func TestH2CUnreachableTargetIsOneError(t *testing.T) {
	_, err := Run(context.Background(), h2cRun("http://127.0.0.1:1"), Options{})
	if err == nil || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %v, want one line saying the connection was refused", err)
	}
}

func TestH2CStreamResetsAreCountedByCode(t *testing.T) {
	url := h2cServer(t, firstOK(func(w http.ResponseWriter, r *http.Request) {
		panic(http.ErrAbortHandler) // the server resets the stream
	}), nil)
	res, err := Run(context.Background(), h2cRun(url), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var resets int64
	for k, v := range res.ErrorKinds {
		if strings.HasPrefix(k, "stream reset ") && k != "stream reset " {
			resets += v
		}
	}
	if res.OK != 0 || resets != 50 || res.Errors != 50 {
		t.Fatalf("ok %d errors %d kinds %v: want every request as a stream reset naming its code", res.OK, res.Errors, res.ErrorKinds)
	}
}

// TestH2CKeepsToTheStreamLimit: with two streams per connection allowed,
// requests beyond wait for a stream and are all answered; the server
// never sees more than two at once on a connection (net/http's server
// refuses streams beyond its limit).
func TestH2CKeepsToTheStreamLimit(t *testing.T) {
	var mu sync.Mutex
	open := map[string]int{}
	most := 0
	url := h2cServer(t, firstOK(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		open[r.RemoteAddr]++
		most = max(most, open[r.RemoteAddr])
		mu.Unlock()
		time.Sleep(40 * time.Millisecond)
		mu.Lock()
		open[r.RemoteAddr]--
		mu.Unlock()
		fmt.Fprint(w, `{"choices":[]}`)
	}), &http.HTTP2Config{MaxConcurrentStreams: 2})
	w := h2cRun(url)
	w.Rate = 200 // twice what 2 connections × 2 streams / 40 ms can answer
	res, err := Run(context.Background(), w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !res.Valid || res.OK != res.Due || res.Errors != 0 || most > 2 || most < 2 {
		t.Fatalf("valid %v %v, due %d ok %d errors %v; most streams at once on a connection %d: want all answered, at most 2 at once", res.Valid, res.Problems, res.Due, res.OK, res.ErrorKinds, most)
	}
}

// TestH2CRequestBodiesKeepToTheWindow: the server allows 8 KiB per stream
// and 64 KiB per connection before it opens its window again; 200 KB
// bodies go out whole (net/http's server resets a stream, or the
// connection, that sends beyond its window).
func TestH2CRequestBodiesKeepToTheWindow(t *testing.T) {
	var bad atomic.Int64
	url := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil || int64(len(b)) != r.ContentLength || len(b) < 190_000 || !strings.HasSuffix(string(b), "}") {
			bad.Add(1)
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, `{"choices":[]}`)
	}), &http.HTTP2Config{MaxReceiveBufferPerStream: 8 << 10, MaxReceiveBufferPerConnection: 64 << 10})
	w := h2cRun(url)
	w.RequestBytes = 200_000
	res, err := Run(context.Background(), w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid || res.OK != 50 || bad.Load() != 0 {
		t.Fatalf("valid %v %v ok %d errors %v, bad bodies %d", res.Valid, res.Problems, res.OK, res.ErrorKinds, bad.Load())
	}
}

// TestH2CEventsSplitAcrossFrames: events arrive a few bytes per DATA
// frame, split mid-line and mid-terminator.
func TestH2CEventsSplitAcrossFrames(t *testing.T) {
	streams := map[string]string{
		OpenAI:    "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\r\n\r\n: ping\n\ndata: [DONE]\n\n",
		Anthropic: "event: message_start\ndata: {}\n\nevent: content_block_delta\ndata: {\"delta\":{\"text\":\"Hi\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	}
	for dialect, body := range streams {
		url := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for b := []byte(body); len(b) > 0; {
				n := min(3, len(b))
				w.Write(b[:n])
				w.(http.Flusher).Flush()
				b = b[n:]
			}
		}), nil)
		w := h2cRun(url)
		w.Dialect, w.Stream = dialect, true
		res, err := Run(context.Background(), w, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Valid || res.OK != 50 || res.FirstEvent == nil || res.FirstEvent.Count != 50 {
			t.Errorf("%s: valid %v %v ok %d errors %v first %+v", dialect, res.Valid, res.Problems, res.OK, res.ErrorKinds, res.FirstEvent)
		}
	}
}

// TestH2CStreamWithoutItsFinalEvent: a stream that ends early is
// "stream incomplete"; one with an error event is "stream error".
func TestH2CStreamWithoutItsFinalEvent(t *testing.T) {
	for _, c := range []struct{ dialect, tail, kind string }{
		{OpenAI, "", "stream incomplete"},
		{OpenAI, "data: {\"error\":{\"message\":\"cut\"}}\n\n", "stream error"},
		{Anthropic, "event: error\ndata: {\"type\":\"error\"}\n\n", "stream error"},
	} {
		url := h2cServer(t, firstOK(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: message_start\ndata: {\"choices\":[]}\n\n"+c.tail)
		}), nil)
		w := h2cRun(url)
		w.Dialect, w.Stream = c.dialect, true
		res, err := Run(context.Background(), w, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.OK != 0 || res.ErrorKinds[c.kind] != 50 {
			t.Errorf("%s %q: ok %d errors %v, want 50 %q", c.dialect, c.tail, res.OK, res.ErrorKinds, c.kind)
		}
	}
}

// TestH2CTimeout: requests the server never answers time out after
// --timeout, and the client cancels their streams.
func TestH2CTimeout(t *testing.T) {
	// A stream canceled before the schedule ends was canceled by the
	// client's RST_STREAM: the connections close only after it.
	var canceled atomic.Int64
	var scheduleEnd atomic.Int64
	url := h2cServer(t, firstOK(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			if time.Now().UnixNano() < scheduleEnd.Load() {
				canceled.Add(1)
			}
		case <-time.After(10 * time.Second):
		}
	}), nil)
	w := h2cRun(url)
	w.Timeout = 300 * time.Millisecond
	scheduleEnd.Store(time.Now().Add(w.Warmup + w.Duration).UnixNano())
	res, err := Run(context.Background(), w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 0 || res.ErrorKinds["timeout"] != 50 || res.Errors != 50 {
		t.Fatalf("ok %d errors %v: want 50 timeouts", res.OK, res.ErrorKinds)
	}
	// Of the 60 requests, those sent more than a timeout before the end.
	if got := canceled.Load(); got < 30 {
		t.Errorf("the server saw %d streams canceled during the schedule, want most of them", got)
	}
}

// goawayServer is a bare HTTP/2 server that answers JSON and, on each
// connection's perConn-th request, sends GOAWAY naming the stream before
// it as the last it processes: that request, and any sent after it on the
// connection, are left unanswered.
type goawayServer struct {
	url                      string
	conns, answered, refused atomic.Int64
}

func newGoawayServer(t *testing.T, perConn int) *goawayServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &goawayServer{url: "http://" + ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			g.conns.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				g.serve(c, perConn)
			}()
		}
	}()
	return g
}

func (g *goawayServer) serve(c net.Conn, perConn int) {
	br := bufio.NewReader(c)
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(br, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(c, br)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 1000})
	var hb strings.Builder
	enc := hpack.NewEncoder(&hb)
	n, last := 0, uint32(0)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		var id uint32
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				id = f.StreamID
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				id = f.StreamID
			}
		}
		if id == 0 {
			continue
		}
		if last != 0 {
			g.refused.Add(1)
			continue
		}
		if n++; n == perConn {
			last = id - 2
			g.refused.Add(1)
			fr.WriteGoAway(last, http2.ErrCodeNo, nil)
			continue
		}
		hb.Reset()
		enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/json"})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte(hb.String()), EndHeaders: true})
		fr.WriteData(id, true, []byte(`{"choices":[]}`))
		g.answered.Add(1)
	}
}

// TestH2CGoAway: streams the server did not process fail as "connection
// reset", and later requests go out on a new connection.
func TestH2CGoAway(t *testing.T) {
	g := newGoawayServer(t, 8)
	w := h2cRun(g.url)
	w.Warmup = 0 // every request measured, so the counts compare exactly
	res, err := Run(context.Background(), w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	refused := g.refused.Load()
	if res.Sent != 50 || res.OK+res.Errors != 50 || res.Errors != refused || res.ErrorKinds["connection reset"] != refused {
		t.Errorf("sent %d ok %d errors %v; the server refused %d: want each refused request as a connection reset, the rest answered", res.Sent, res.OK, res.ErrorKinds, refused)
	}
	// 51 requests (the probe too) over two connections at a time, a
	// GOAWAY every 8th request of a connection.
	if refused < 4 || g.conns.Load() < refused {
		t.Errorf("%d connections, %d refused: want a new connection after each GOAWAY", g.conns.Load(), refused)
	}
	if got := g.answered.Load(); got != res.OK+1 {
		t.Errorf("server answered %d, client counted %d ok (+1 probe)", got, res.OK)
	}
}

// TestH2CHeaderBlockDecodes: the request header block, encoded once for
// every request, is valid HPACK for a decoder with any table state.
func TestH2CHeaderBlockDecodes(t *testing.T) {
	w := DefaultWorkload()
	w.APIKey, w.Stream = "secret-"+strings.Repeat("k", 200), true
	block := headerBlock(w, "127.0.0.1:8080", "/v1/chat/completions", 1234)
	d := hpack.NewDecoder(4096, nil)
	for range 3 {
		fields, err := d.DecodeFull(block)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, f := range fields {
			got[f.Name] = f.Value
		}
		want := map[string]string{":method": "POST", ":scheme": "http", ":authority": "127.0.0.1:8080",
			":path": "/v1/chat/completions", "content-type": "application/json", "content-length": strconv.Itoa(1234),
			"authorization": "Bearer " + w.APIKey, "accept": "text/event-stream"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("decoded %v, want %v", got, want)
		}
	}
}

// TestH2CEndsAnsweredStreams: a stream whose final event arrived is a
// success at that event, and if the server does not end it, the client
// cancels it rather than wait for its timeout.
func TestH2CEndsAnsweredStreams(t *testing.T) {
	var canceled atomic.Int64
	url := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[]}\n\ndata: [DONE]\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			canceled.Add(1)
		case <-time.After(10 * time.Second):
		}
	}), nil)
	w := h2cRun(url)
	w.Stream = true
	res, err := Run(context.Background(), w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Left to the sweep, they would be timeouts.
	if !res.Valid || res.OK != 50 {
		t.Fatalf("valid %v %v ok %d errors %v: want 50 answered at their final event", res.Valid, res.Problems, res.OK, res.ErrorKinds)
	}
	deadline := time.Now().Add(5 * time.Second)
	for canceled.Load() < 51 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if canceled.Load() < 51 {
		t.Errorf("the server saw %d streams canceled, want all 51 (the probe too)", canceled.Load())
	}
}
