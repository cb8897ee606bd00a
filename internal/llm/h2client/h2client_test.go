package h2client

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// h2cServer serves h over h2c with x/net's HTTP/2 server. Each
// generation is a configured server of its own, so that one can be shut
// down (GOAWAY) while the next takes new connections.
type h2cServer struct {
	t          *testing.T
	ln         net.Listener
	h          http.Handler
	maxStreams uint32
	mu         sync.Mutex
	gen        generation
	conns      atomic.Int32
}

type generation struct {
	hs  *http.Server
	h2s *http2.Server
}

func newH2CServer(t *testing.T, maxStreams uint32, h http.HandlerFunc) *h2cServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &h2cServer{t: t, ln: ln, h: h, maxStreams: maxStreams}
	s.next()
	go s.serve()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		g := s.gen
		s.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		g.hs.Shutdown(ctx)
	})
	return s
}

// next starts a new generation for the connections accepted from now
// on, and returns the previous one's server.
func (s *h2cServer) next() *http.Server {
	g := generation{hs: &http.Server{}, h2s: &http2.Server{MaxConcurrentStreams: s.maxStreams}}
	if err := http2.ConfigureServer(g.hs, g.h2s); err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	old := s.gen
	s.gen = g
	s.mu.Unlock()
	return old.hs
}

func (s *h2cServer) serve() {
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.conns.Add(1)
		s.mu.Lock()
		g := s.gen
		s.mu.Unlock()
		go g.h2s.ServeConn(nc, &http2.ServeConnOpts{BaseConfig: g.hs, Handler: s.h})
	}
}

func (s *h2cServer) addr() string { return s.ln.Addr().String() }

func (s *h2cServer) url(path string) string { return "http://" + s.addr() + path }

func newTransport(addr string) *Transport {
	return New(Options{Addr: addr})
}

func post(t *testing.T, ctx context.Context, tr http.RoundTripper, url string, body []byte) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return tr.RoundTrip(req)
}

func TestJSON(t *testing.T) {
	s := newH2CServer(t, 0, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.ProtoMajor != 2 || r.Header.Get("Content-Type") != "application/json" || r.ContentLength != int64(len(b)) {
			w.WriteHeader(400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "abc")
		w.Header().Set("Content-Length", fmt.Sprint(len(b)+2))
		w.Write([]byte("[" + string(b) + "]"))
	})
	tr := newTransport(s.addr())
	defer tr.CloseIdleConnections()
	var wrote atomic.Bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			wrote.Store(true)
		}
	}})
	resp, err := post(t, ctx, tr, s.url("/v1/chat/completions"), []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || string(b) != `[{"a":1}]` || resp.Header.Get("X-Request-Id") != "abc" || resp.ContentLength != 9 ||
		resp.Proto != "HTTP/2.0" || resp.ProtoMajor != 2 || resp.Request == nil || !wrote.Load() {
		t.Fatalf("status %d body %q header %v length %d proto %s wrote %v", resp.StatusCode, b, resp.Header, resp.ContentLength, resp.Proto, wrote.Load())
	}
}

var _ = tls.Client
var _ = errors.New
var _ = strings.Repeat
var _ = time.Second
var _ = httptest.NewServer
