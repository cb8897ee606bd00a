package authz

// Helpers shared by this package's tests: a connection's context with a
// principal and a topic-ID resolver, and requests run through a chain of
// the filter and, when they go upstream, answered by a stand-in broker.

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/straitgw/strait/internal/kafka/filter"
)

// testIDs maps topic IDs to names for the tests' contexts.
type testIDs map[[16]byte]string

func (ids testIDs) TopicName(_ context.Context, id [16]byte) (string, error) {
	if n, ok := ids[id]; ok {
		return n, nil
	}
	return "", errors.New("no such topic ID")
}

// idOf is the test topic ID of a name: its first bytes.
func idOf(name string) [16]byte {
	var id [16]byte
	copy(id[:], name)
	return id
}

// syncBuilder is a strings.Builder safe for the log handler to write from
// any goroutine.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testCtx is a connection of principal ("" for anonymous) whose log lines
// are kept; topics resolves the IDs of the named topics.
func testCtx(t testing.TB, principal string, topics ...string) (*filter.Context, *syncBuilder) {
	t.Helper()
	logs := &syncBuilder{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ids := testIDs{}
	for _, n := range topics {
		ids[idOf(n)] = n
	}
	c := &filter.Context{
		Ctx:            ctx,
		VirtualCluster: "vc-" + strings.ReplaceAll(t.Name(), "/", "-"),
		ClientAddr:     &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000},
		Log:            slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Topics:         ids,
	}
	c.SetPrincipal(principal)
	return c, logs
}

func newFilter(t testing.TB, rules ...Rule) *Filter {
	t.Helper()
	f, err := New(Config{Rules: rules})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return f
}

// exchange is a request run through a chain of the filter.
type exchange struct {
	t  testing.TB
	ch *filter.Chain
	c  *filter.Context
	fr *filter.Request
	at int
}

// send runs req, at its version, through a chain of f.
func send(t testing.TB, f *Filter, c *filter.Context, req kmsg.Request) *exchange {
	t.Helper()
	ch, err := filter.NewChain(f)
	if err != nil {
		t.Fatal(err)
	}
	key, version := req.Key(), req.GetVersion()
	fr := &filter.Request{Header: filter.Header{Key: key, Version: version, CorrelationID: 7}, Body: req}
	at, err := ch.OnRequest(c, ch.RequestMask(key, version), fr)
	if err != nil {
		t.Fatalf("OnRequest: %v", err)
	}
	return &exchange{t: t, ch: ch, c: c, fr: fr, at: at}
}

// sendErr runs req and returns the filter's error, which must not be nil.
func sendErr(t testing.TB, f *Filter, c *filter.Context, req kmsg.Request) error {
	t.Helper()
	ch, err := filter.NewChain(f)
	if err != nil {
		t.Fatal(err)
	}
	fr := &filter.Request{Header: filter.Header{Key: req.Key(), Version: req.GetVersion(), CorrelationID: 7}, Body: req}
	_, err = ch.OnRequest(c, ch.RequestMask(req.Key(), req.GetVersion()), fr)
	if err == nil {
		t.Fatal("OnRequest: no error")
	}
	return err
}

// answered is the filter's own answer; nil when the request goes upstream.
func (x *exchange) answered() kmsg.Response {
	if x.at < x.ch.Len() {
		return x.fr.Response()
	}
	return nil
}

// mustAnswer is the filter's own answer, which there must be.
func (x *exchange) mustAnswer() kmsg.Response {
	x.t.Helper()
	resp := x.answered()
	if resp == nil {
		x.t.Fatalf("%T went upstream; want the filter's answer", x.fr.Body)
	}
	return resp
}

// upstream is what goes to the broker, which it must.
func (x *exchange) upstream() kmsg.Request {
	x.t.Helper()
	if resp := x.answered(); resp != nil {
		x.t.Fatalf("the filter answered %T itself: %+v", x.fr.Body, resp)
	}
	return x.fr.Body
}

// untouched reports whether the client's bytes go upstream as they came.
func (x *exchange) untouched() bool { return x.fr.Untouched() }

// reply passes the broker's answer back through the chain, as the proxy
// does (skimmer first), and returns what the client gets.
func (x *exchange) reply(resp kmsg.Response) kmsg.Response {
	x.t.Helper()
	x.upstream()
	key, version := x.fr.Header.Key, x.fr.Header.Version
	resp.SetVersion(version)
	m := x.ch.ResponseMask(key, version)
	if !x.ch.WantsResponse(m, x.ch.Len(), key, version, nil) {
		return resp
	}
	if err := x.ch.OnResponse(x.c, m, x.ch.Len(), &filter.Response{Header: x.fr.Header, Request: x.fr.Body, Body: resp}); err != nil {
		x.t.Fatalf("OnResponse: %v", err)
	}
	return resp
}

// Error codes the tests check, by their Kafka names.
const (
	codeNone              int16 = 0
	codeUnknownTopic      int16 = 3
	codeTopicAuth         int16 = 29
	codeGroupAuth         int16 = 30
	codeClusterAuth       int16 = 31
	codeUnsupportedVer    int16 = 35
	codeInvalidRequest    int16 = 42
	codeTxnAuth           int16 = 53
	codeOpNotAttempted    int16 = 55
	codeUnknownTopicID    int16 = 100
	codeGroupIDNotFound   int16 = 69
	codeUnknownServerErr  int16 = -1
	codeNotCoordinator    int16 = 16
	codeCoordinatorNotAvl int16 = 15
)

func ptr[T any](v T) *T { return &v }
