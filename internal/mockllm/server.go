package mockllm

import (
	"bytes"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/straitgw/strait/internal/llm/h1server"
)

// Dialect is an API dialect the server speaks.
type Dialect uint8

const (
	// OpenAI is the chat completions API: POST /v1/chat/completions.
	OpenAI Dialect = iota
	// Anthropic is the Messages API: POST /v1/messages.
	Anthropic
)

func (d Dialect) String() string {
	if d == Anthropic {
		return "anthropic"
	}
	return "openai"
}

// Request is a request as the server received it, kept for tests to
// assert on (Server.LastRequest).
type Request struct {
	Method, Path string
	Proto        string // "HTTP/1.1" or "HTTP/2.0"
	Header       http.Header
	// Body is the body's first MaxRecordedBody bytes; BodyBytes its size.
	Body      []byte
	BodyBytes int
}

// MaxRecordedBody bounds the copy of the last request's body.
const MaxRecordedBody = 64 << 10

// Count is one non-zero request counter (Server.Counts).
type Count struct {
	Dialect Dialect
	Stream  bool
	Status  int // 0: no answer (see Server.Count)
	N       int64
}

// Server is the mock provider. It is an http.Handler, so httptest.NewServer
// can serve it; Serve, ServeTLS, Start and StartTLS serve it with HTTP/2 as
// well. All its methods are safe for concurrent use.
type Server struct {
	opt         Options
	log         *slog.Logger
	faults      []fault
	modelFaults [][]fault // per Options.ModelErrors entry

	// The tokens the server reported as used (its own bill).
	billedIn, billedOut atomic.Int64

	// Rendered at New.
	text          string   // the reply text
	oaTextChoices [][]byte // a chunk choice per delta of text
	anTextDeltas  [][]byte // a content_block_delta event per delta of text
	oaModels      []byte
	anModels      []byte
	idBase        string // random per server, so IDs differ across runs

	seq      atomic.Uint64 // per-request number, in IDs
	start    time.Time     // rate-limit windows count from here
	clock    func() time.Time
	requests atomic.Int64
	counts   [2][2][600]atomic.Int64 // [dialect][stream][status]
	last     atomic.Pointer[Request]
	// lastParsed is the last body parseShared parsed, and what to.
	lastParsed atomic.Pointer[parsed]

	argsCache  sync.Map // schema → generated arguments
	argsCached atomic.Int64

	scripts sync.Pool // *script

	upgrades sync.Map // marker → body of a request upgraded to h2c
	upgraded *bridge  // under mu: where upgraded connections go

	lean   *engine // under mu: serves prior-knowledge h2c; nil until needed
	noLean bool    // serve h2c with net/http instead (tests compare the two)

	closing   chan struct{} // closed by Close and Shutdown: ends hanging requests
	closeOnce sync.Once
	mu        sync.Mutex
	servers   []*http.Server
	h1s       []*h1server.Server // HTTP/1.1 next to the lean engine
	closed    bool
}

// New returns a server for opt. It panics if opt.Validate reports a
// problem: call Validate first for options that come from a user.
func New(opt Options) *Server {
	if err := opt.Validate(); err != nil {
		panic("mockllm.New: " + err.Error())
	}
	opt = opt.withDefaults()
	s := &Server{
		opt:     opt,
		log:     opt.Logger,
		start:   time.Now(),
		clock:   time.Now,
		closing: make(chan struct{}),
	}
	for _, k := range opt.ErrorKinds {
		f, _ := k.compile()
		s.faults = append(s.faults, f)
	}
	for _, me := range opt.ModelErrors {
		var fs []fault
		for _, k := range me.Kinds {
			f, _ := k.compile()
			fs = append(fs, f)
		}
		if len(fs) == 0 {
			fs = []fault{{kind: "500", status: 500}}
		}
		s.modelFaults = append(s.modelFaults, fs)
	}
	var rnd [4]byte
	_, _ = crand.Read(rnd[:])
	s.idBase = hex.EncodeToString(rnd[:])

	// The text is what is left of ResponseBytes once the JSON around it is
	// counted, measured on a typical answer with an empty text.
	probe := reply{inputTokens: 100, outputTokens: 100}
	envelope := len(s.openaiJSON(nil, 1, "gpt-4o-mini", &probe))
	s.text = replyText(max(opt.ResponseBytes-envelope, 1))
	for _, piece := range split(s.text, opt.Deltas) {
		s.oaTextChoices = append(s.oaTextChoices, oaTextChoice(nil, piece))
		s.anTextDeltas = append(s.anTextDeltas, anTextDelta(nil, piece))
	}
	s.oaModels = openaiModels(opt.Models)
	s.anModels = anthropicModels(opt.Models)
	s.scripts.New = func() any {
		return &script{buf: make([]byte, 0, 4096), ends: make([]int, 0, 32), scratch: make([]byte, 0, 256), tmp: make([]byte, 0, 512)}
	}
	return s
}

// Text returns the text of a full answer, the same in both dialects.
func (s *Server) Text() string { return s.text }

// Requests returns how many requests the server received, on any path.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Count returns how many chat completion (OpenAI) or message (Anthropic)
// requests, streaming or not, were answered with status. Status 0 counts
// requests that got no answer: those the timeout error kind dropped, and
// those whose client gave up before their latency passed. A request whose
// body could not be read as JSON counts as not streaming.
func (s *Server) Count(d Dialect, stream bool, status int) int64 {
	if d > Anthropic || status < 0 || status >= 600 {
		return 0
	}
	return s.counts[d][b2i(stream)][status].Load()
}

// Counts lists every non-zero counter of Count.
func (s *Server) Counts() []Count {
	var out []Count
	for d := range s.counts {
		for st := range s.counts[d] {
			for status := range s.counts[d][st] {
				if n := s.counts[d][st][status].Load(); n > 0 {
					out = append(out, Count{Dialect: Dialect(d), Stream: st == 1, Status: status, N: n})
				}
			}
		}
	}
	return out
}

// LastRequest returns the last request received on a provider path, and
// false if there was none.
func (s *Server) LastRequest() (Request, bool) {
	r := s.last.Load()
	if r == nil {
		return Request{}, false
	}
	out := *r
	out.Header = r.Header.Clone()
	return out, true
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Shared header values: net/http never modifies them, so every response
// can point at the same slices instead of allocating its own.
var (
	hdrJSON    = []string{"application/json"}
	hdrSSE     = []string{"text/event-stream; charset=utf-8"}
	hdrNoCache = []string{"no-cache"}
)

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		if isH2CUpgrade(r) {
			s.upgradeH2C(w, r) // the request is counted once served as HTTP/2
			return
		}
	} else if len(r.Header[upgradeMarker]) > 0 {
		s.restoreUpgraded(r)
	}
	s.serve(w, r)
}

// serve routes a request to its endpoint.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	switch r.URL.Path {
	case "/v1/chat/completions":
		s.generate(w, r, OpenAI)
	case "/v1/messages":
		s.generate(w, r, Anthropic)
	case "/v1/messages/count_tokens":
		s.countTokens(w, r)
	case "/v1/models":
		s.models(w, r)
	default:
		d := guessDialect(r)
		s.writeError(w, d, s.seq.Add(1), http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path+" (this mock serves POST /v1/chat/completions, POST /v1/messages, POST /v1/messages/count_tokens and GET /v1/models)", "", 0)
	}
}

// guessDialect says which dialect a request outside the two generation
// paths is in, from the headers only Anthropic clients send.
func guessDialect(r *http.Request) Dialect {
	if r.Header.Get("anthropic-version") != "" || r.Header.Get("x-api-key") != "" {
		return Anthropic
	}
	return OpenAI
}

// generate answers a chat completion or message request and counts it.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, d Dialect) {
	start := time.Now()
	status, stream, abort := s.answer(w, r, d, start)
	s.counts[d][b2i(stream)][status].Add(1)
	if abort {
		// Drops the connection (HTTP/1) or resets the stream (HTTP/2)
		// without the server logging it.
		panic(http.ErrAbortHandler)
	}
}

// answer answers a generation request and returns the status sent (0 for
// none), whether it asked to stream, and whether the caller must drop the
// connection.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, d Dialect, start time.Time) (status int, stream, abort bool) {
	n := s.seq.Add(1)
	if r.Method != http.MethodPost {
		return s.writeError(w, d, n, http.StatusMethodNotAllowed, "use POST for "+r.URL.Path, "", 0), false, false
	}
	body, status := s.readBody(w, r, d, n)
	if status != 0 {
		return status, false, false
	}
	if !s.authorized(r, d) {
		return s.unauthorized(w, d, n), false, false
	}
	req, err := s.parseShared(d, body)
	if err != nil {
		return s.badRequest(w, d, n, err), false, false
	}
	if wait, limited := s.rateLimited(s.clock()); limited {
		s.log.Debug("rate-limit window: answering 429", "dialect", d, "retry_after", wait)
		return s.writeError(w, d, n, http.StatusTooManyRequests, "rate limit window of the mock provider: retry after the time in retry-after", "", wait), req.stream, false
	}
	var kind ErrorKind
	if f, ok := s.faultFor(r, req.model); ok {
		s.log.Debug("injecting error", "dialect", d, "kind", f.kind, "stream", req.stream)
		switch {
		case f.status != 0:
			var retry time.Duration
			if f.status == http.StatusTooManyRequests {
				retry = time.Second
			}
			return s.writeError(w, d, n, f.status, faultMessage(f.status), "", retry), req.stream, false
		case f.kind == KindOverloaded:
			st := http.StatusServiceUnavailable
			if d == Anthropic {
				st = 529
			}
			return s.writeError(w, d, n, st, faultMessage(st), "", 0), req.stream, false
		case f.kind == KindTimeout:
			s.hang(r)
			return 0, req.stream, true
		case f.kind == KindReset:
			h := w.Header()
			h["Content-Type"] = hdrJSON
			if req.stream {
				h["Content-Type"] = hdrSSE
			}
			h["Content-Length"] = []string{"1000"}
			w.WriteHeader(http.StatusOK)
			flush(w)
			return http.StatusOK, req.stream, true
		}
		kind = f.kind
	}
	rep := s.plan(&req)
	deadline := start.Add(s.latency())
	if req.stream {
		status, abort = s.stream(w, r, d, n, &req, &rep, start, deadline, kind)
		return status, true, abort
	}
	status, abort = s.json(w, r, d, n, &req, &rep, deadline, kind)
	return status, false, abort
}

// faultFor is pickFault, unless the lean engine drew the request's fault
// already: it hands it over in the request's context.
func (s *Server) faultFor(r *http.Request, model string) (fault, bool) {
	if f, ok := r.Context().Value(drawnFault{}).(fault); ok {
		return f, true
	}
	return s.pickFault(model)
}

// parseRequest reads a generation request's body in dialect d.
func parseRequest(d Dialect, body []byte) (request, error) {
	if d == OpenAI {
		return parseOpenAI(body)
	}
	return parseAnthropic(body, false)
}

// admit reports whether a generation request, its body read, passes every
// check answer makes before it answers (method, size, key, body, rate-limit
// window), without answering or counting it; and if so, which fault, if
// any, it drew for it. The lean engine answers the requests that pass with
// no fault itself, and hands every other one to the handler.
func (s *Server) admit(r *http.Request, body []byte, d Dialect) (req request, f fault, faulted, ok bool) {
	if r.Method != http.MethodPost || int64(len(body)) > s.opt.MaxBodyBytes || !s.authorized(r, d) {
		return req, f, false, false
	}
	req, err := s.parseShared(d, body)
	if err != nil {
		return req, f, false, false
	}
	if _, limited := s.rateLimited(s.clock()); limited {
		return req, f, false, false
	}
	f, faulted = s.pickFault(req.model)
	return req, f, faulted, true
}

// parsed is the last body parseShared parsed, and what it parsed to.
type parsed struct {
	d    Dialect
	body []byte
	req  request
}

// parseShared is parseRequest, remembering the last body parsed for the
// lean engine's loop and net/http's goroutines alike. Load generators
// send the same body over and over, and decoding it with encoding/json
// was the largest part of a plain answer's cost (12% of the mock's CPU
// over HTTP/1.1); a request is only ever read, so the parse can be
// shared.
func (s *Server) parseShared(d Dialect, body []byte) (request, error) {
	if p := s.lastParsed.Load(); p != nil && p.d == d && bytes.Equal(p.body, body) {
		return p.req, nil
	}
	req, err := parseRequest(d, body)
	if err == nil && len(body) <= maxParsedBody {
		s.lastParsed.Store(&parsed{d: d, body: bytes.Clone(body), req: req})
	}
	return req, err
}

// maxParsedBody bounds the body kept in parsed.
const maxParsedBody = 64 << 10

// readBody reads the request body, bounded by MaxBodyBytes, and records
// the request. A non-zero status means it answered with that error.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, d Dialect, n uint64) ([]byte, int) {
	limit := s.opt.MaxBodyBytes
	tooBig := func() int {
		return s.writeError(w, d, n, http.StatusRequestEntityTooLarge, "request body larger than "+strconv.FormatInt(limit, 10)+" bytes", "", 0)
	}
	var body []byte
	var err error
	switch cl := r.ContentLength; {
	case cl > limit:
		s.record(r, nil)
		return nil, tooBig() // without reading it
	case cl >= 0:
		body = make([]byte, cl)
		_, err = io.ReadFull(r.Body, body)
	default:
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	}
	s.record(r, body)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, tooBig()
		}
		return nil, s.writeError(w, d, n, http.StatusBadRequest, "could not read the request body: "+err.Error(), "", 0)
	}
	return body, 0
}

// record keeps r as the last request. The body is not copied: it is never
// reused.
func (s *Server) record(r *http.Request, body []byte) {
	// The header is kept, not copied: only the last request is ever read,
	// so LastRequest copies it then, instead of every request paying for
	// a copy (a map per request, 8% of the mock's CPU on streams). No one
	// changes a request's header once it is recorded: the lean engine's
	// are never changed, and a handler gets a copy.
	rec := &Request{Method: r.Method, Path: r.URL.Path, Proto: r.Proto, Header: r.Header, Body: body, BodyBytes: len(body)}
	if len(body) > MaxRecordedBody {
		rec.Body = append([]byte(nil), body[:MaxRecordedBody]...)
	}
	s.last.Store(rec)
}

// authorized checks the API key where the dialect carries it: OpenAI in
// "Authorization: Bearer"; Anthropic in x-api-key or, as its current SDKs
// send it, "Authorization: Bearer" (x-api-key decides when both are set).
func (s *Server) authorized(r *http.Request, d Dialect) bool {
	if s.opt.APIKey == "" {
		return true
	}
	if d == Anthropic {
		if k, ok := r.Header["X-Api-Key"]; ok {
			return len(k) == 1 && k[0] == s.opt.APIKey
		}
	}
	auth := r.Header.Get("Authorization")
	return len(auth) == len("Bearer ")+len(s.opt.APIKey) && auth[:7] == "Bearer " && auth[7:] == s.opt.APIKey
}

func (s *Server) unauthorized(w http.ResponseWriter, d Dialect, n uint64) int {
	msg := "incorrect API key provided: this mock accepts only the key it was started with"
	if d == Anthropic {
		msg = "invalid x-api-key"
	}
	return s.writeError(w, d, n, http.StatusUnauthorized, msg, "", 0)
}

func (s *Server) badRequest(w http.ResponseWriter, d Dialect, n uint64, err error) int {
	var br *badRequest
	if errors.As(err, &br) {
		return s.writeError(w, d, n, http.StatusBadRequest, br.msg, br.param, 0)
	}
	return s.writeError(w, d, n, http.StatusBadRequest, err.Error(), "", 0)
}

// writeError answers with an error in the dialect's shape and returns
// status. retryAfter, if positive, goes in a retry-after header (whole
// seconds, rounded up).
func (s *Server) writeError(w http.ResponseWriter, d Dialect, n uint64, status int, msg, param string, retryAfter time.Duration) int {
	sc := s.getScript()
	defer s.putScript(sc)
	h := w.Header()
	h["Content-Type"] = hdrJSON
	reqID := string(s.appendRequestID(sc.scratch[:0], n))
	if d == Anthropic {
		h["Request-Id"] = []string{reqID}
		sc.buf = appendAnthropicError(sc.buf, status, msg, reqID)
	} else {
		h["X-Request-Id"] = []string{reqID}
		sc.buf = appendOAError(sc.buf, status, msg, param)
	}
	if retryAfter > 0 {
		secs := (retryAfter + time.Second - 1) / time.Second
		h["Retry-After"] = []string{strconv.FormatInt(int64(secs), 10)}
	}
	h["Content-Length"] = []string{strconv.Itoa(len(sc.buf))}
	w.WriteHeader(status)
	_, _ = w.Write(sc.buf)
	return status
}

func faultMessage(status int) string {
	switch status {
	case 429:
		return "rate limited by the mock provider (injected error)"
	case 503:
		return "the mock provider is overloaded (injected error); retry later"
	case 529:
		return "Overloaded"
	}
	return "injected error of the mock provider: HTTP " + strconv.Itoa(status)
}

// appendID appends the unique part of request n's IDs.
func (s *Server) appendID(b []byte, n uint64) []byte {
	b = append(b, s.idBase...)
	return appendHex(b, n, 12)
}

func (s *Server) appendRequestID(b []byte, n uint64) []byte {
	b = append(b, "req_"...)
	return s.appendID(b, n)
}

func (s *Server) appendCallID(b []byte, n uint64) []byte {
	b = append(b, "call_"...)
	return s.appendID(b, n)
}

// setAnswerHeaders sets the headers every successful answer carries.
func (s *Server) setAnswerHeaders(h http.Header, d Dialect, n uint64, sc *script) {
	id := string(s.appendRequestID(sc.scratch[:0], n))
	if d == Anthropic {
		h["Request-Id"] = []string{id}
	} else {
		h["X-Request-Id"] = []string{id}
	}
}

// json answers with a complete JSON object at deadline.
func (s *Server) json(w http.ResponseWriter, r *http.Request, d Dialect, n uint64, req *request, rep *reply, deadline time.Time, kind ErrorKind) (status int, abort bool) {
	// Wait first, render after: thousands of requests waiting out their
	// latency then hold no buffer.
	p := pacer{ctx: r.Context().Done()}
	defer p.stop()
	if !p.until(deadline) {
		return 0, false // the client gave up
	}
	sc := s.getScript()
	defer s.putScript(sc)
	if d == Anthropic {
		sc.buf = s.anthropicJSON(sc.buf, n, req.model, rep)
	} else {
		sc.buf = s.openaiJSON(sc.buf, n, req.model, rep)
	}
	h := w.Header()
	h["Content-Type"] = hdrJSON
	cut := kind == KindMidstream || kind == KindCut
	if cut || len(sc.buf) > 2048 {
		// net/http sets Content-Length itself for a body it holds whole
		// (2 KiB on HTTP/1.1); past that it would chunk, and a cut answer
		// must announce more than it sends.
		h["Content-Length"] = []string{strconv.Itoa(len(sc.buf))}
	}
	s.setAnswerHeaders(h, d, n, sc)
	w.WriteHeader(http.StatusOK)
	if cut {
		_, _ = w.Write(sc.buf[:len(sc.buf)/2])
		flush(w)
		return http.StatusOK, true
	}
	s.bill(rep.inputTokens, rep.outputTokens)
	_, _ = w.Write(sc.buf)
	return http.StatusOK, false
}

// countTokens answers POST /v1/messages/count_tokens.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	n := s.seq.Add(1)
	if r.Method != http.MethodPost {
		s.writeError(w, Anthropic, n, http.StatusMethodNotAllowed, "use POST for "+r.URL.Path, "", 0)
		return
	}
	body, status := s.readBody(w, r, Anthropic, n)
	if status != 0 {
		return
	}
	if !s.authorized(r, Anthropic) {
		s.unauthorized(w, Anthropic, n)
		return
	}
	req, err := parseAnthropic(body, true)
	if err != nil {
		s.badRequest(w, Anthropic, n, err)
		return
	}
	sc := s.getScript()
	defer s.putScript(sc)
	sc.buf = append(sc.buf, `{"input_tokens":`...)
	sc.buf = strconv.AppendInt(sc.buf, int64(req.inputTokens), 10)
	sc.buf = append(sc.buf, '}')
	h := w.Header()
	h["Content-Type"] = hdrJSON
	s.setAnswerHeaders(h, Anthropic, n, sc)
	_, _ = w.Write(sc.buf)
}

// models answers GET /v1/models in the dialect the headers suggest.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	n := s.seq.Add(1)
	d := guessDialect(r)
	if r.Method != http.MethodGet {
		s.writeError(w, d, n, http.StatusMethodNotAllowed, "use GET for "+r.URL.Path, "", 0)
		return
	}
	s.record(r, nil)
	if !s.authorized(r, d) {
		s.unauthorized(w, d, n)
		return
	}
	h := w.Header()
	h["Content-Type"] = hdrJSON
	if d == Anthropic {
		_, _ = w.Write(s.anModels)
	} else {
		_, _ = w.Write(s.oaModels)
	}
}

// latency draws this request's latency: the configured one, moved by
// jitter, plus a spike now and then. math/rand/v2's top-level functions
// take no lock.
func (s *Server) latency() time.Duration {
	l := s.opt.Latency
	if j := s.opt.Jitter; j > 0 {
		l += time.Duration((rand.Float64()*2 - 1) * float64(j))
	}
	if s.opt.SpikeRate > 0 && rand.Float64() < s.opt.SpikeRate {
		l += s.opt.Spike
	}
	return max(l, 0)
}

// pickFault draws whether a request for model gets an injected error, and
// which: by the first ModelErrors entry for the model, else ErrorRate.
func (s *Server) pickFault(model string) (fault, bool) {
	rate, faults := s.opt.ErrorRate, s.faults
	for i, me := range s.opt.ModelErrors {
		if glob(me.Model, model) {
			rate, faults = me.Rate, s.modelFaults[i]
			break
		}
	}
	if rate <= 0 || rand.Float64() >= rate {
		return fault{}, false
	}
	return faults[rand.IntN(len(faults))], true
}

// Billed returns the input and output tokens the server reported as used:
// in full for each JSON answer and each stream that reached its closing
// events, and for a stream that ended early what its events had reported
// (Anthropic's message_start carries the input tokens and 1 output token;
// an OpenAI stream reports usage only at its end).
func (s *Server) Billed() (input, output int64) { return s.billedIn.Load(), s.billedOut.Load() }

// bill records tokens the server reported.
func (s *Server) bill(in, out int) {
	s.billedIn.Add(int64(in))
	s.billedOut.Add(int64(out))
}

// glob matches '*' (any run) and '?' (one byte) in pattern against name.
func glob(pattern, name string) bool {
	if pattern == "" {
		return name == ""
	}
	switch pattern[0] {
	case '*':
		for i := 0; i <= len(name); i++ {
			if glob(pattern[1:], name[i:]) {
				return true
			}
		}
		return false
	case '?':
		return name != "" && glob(pattern[1:], name[1:])
	}
	return name != "" && name[0] == pattern[0] && glob(pattern[1:], name[1:])
}

// rateLimited reports whether now falls in a rate-limit window, and how
// long the window lasts from now. Windows open at each multiple of
// RateLimitEvery after the server started, for RateLimitFor.
func (s *Server) rateLimited(now time.Time) (time.Duration, bool) {
	every, dur := s.opt.RateLimitEvery, s.opt.RateLimitFor
	if every <= 0 || dur <= 0 {
		return 0, false
	}
	el := now.Sub(s.start)
	if el < every {
		return 0, false
	}
	phase := el % every
	if phase >= dur {
		return 0, false
	}
	return dur - phase, true
}

// hang holds a request without answering until Hang passes, the client
// gives up or the server closes.
func (s *Server) hang(r *http.Request) {
	t := time.NewTimer(s.opt.Hang)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	case <-s.closing:
	}
}

func (s *Server) getScript() *script {
	sc := s.scripts.Get().(*script)
	sc.buf, sc.ends, sc.scratch, sc.tmp = sc.buf[:0], sc.ends[:0], sc.scratch[:0], sc.tmp[:0]
	return sc
}

// putScript returns sc to the pool unless it grew past what most answers
// need, so that one huge answer does not pin its memory.
func (s *Server) putScript(sc *script) {
	if cap(sc.buf) <= 1<<20 {
		s.scripts.Put(sc)
	}
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
