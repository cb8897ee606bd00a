package mockllm

import (
	"net/http"
	"time"
)

// script is an answer rendered in full before it is paced out. For a
// stream, ends holds the end offset in buf of each segment: the opening
// events, each delta, then the closing events; the number of deltas is
// len(ends)-2. scratch and tmp are working space for the renderers.
type script struct {
	buf     []byte
	ends    []int
	scratch []byte
	tmp     []byte
}

// mark ends the current segment.
func (sc *script) mark() { sc.ends = append(sc.ends, len(sc.buf)) }

// pacer waits for deadlines on one timer, reused for every wait of a
// request, until the request's context ends. Before it actually waits it
// calls flush, if set: what was written goes out when nothing more is due,
// so events due at the same moment (all of them, at latency 0) leave in
// one write instead of one system call each.
type pacer struct {
	ctx <-chan struct{}
	f   http.Flusher
	t   *time.Timer
}

func (p *pacer) flush() {
	if p.f != nil {
		p.f.Flush()
	}
}

// until waits until deadline and reports whether the request is still
// wanted.
func (p *pacer) until(deadline time.Time) bool {
	d := time.Until(deadline)
	if d <= 0 {
		select {
		case <-p.ctx:
			return false
		default:
			return true
		}
	}
	p.flush()
	if p.t == nil {
		p.t = time.NewTimer(d)
	} else {
		p.t.Reset(d)
	}
	select {
	case <-p.t.C:
		return true
	case <-p.ctx:
		return false
	}
}

func (p *pacer) stop() {
	if p.t != nil {
		p.t.Stop()
	}
}

// stream answers with server-sent events: the opening events and the
// first delta at once, delta i at start + i/n of the latency, the closing
// events at deadline. kind midstream or cut stops after half of the
// deltas, with an error event or a dropped connection.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, d Dialect, n uint64, req *request, rep *reply, start, deadline time.Time, kind ErrorKind) (status int, abort bool) {
	sc := s.getScript()
	defer s.putScript(sc)
	if d == Anthropic {
		s.anthropicStream(sc, n, req.model, rep, s.opt.Deltas)
	} else {
		s.openaiStream(sc, n, req.model, rep, req.includeUsage, s.opt.Deltas)
	}
	deltas := len(sc.ends) - 2
	segment := func(i int) []byte { // 0: opening, 1..deltas, deltas+1: closing
		from := 0
		if i > 0 {
			from = sc.ends[i-1]
		}
		return sc.buf[from:sc.ends[i]]
	}
	at := func(i int) time.Time { // when delta i is due
		return start.Add(time.Duration(int64(deadline.Sub(start)) * int64(i) / int64(max(deltas, 1))))
	}

	h := w.Header()
	h["Content-Type"] = hdrSSE
	h["Cache-Control"] = hdrNoCache
	s.setAnswerHeaders(h, d, n, sc)
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	p := pacer{ctx: r.Context().Done(), f: f}
	defer p.stop()

	send := deltas
	if kind == KindMidstream || kind == KindCut {
		send = (deltas + 1) / 2
		if s.opt.CutAfter > 0 {
			send = min(s.opt.CutAfter, deltas)
		}
	}
	// What the stream has reported once its opening is out: Anthropic's
	// message_start carries the input tokens and 1 output token.
	early := func() {
		if d == Anthropic {
			s.bill(rep.inputTokens, 1)
		}
	}
	first := segment(0)
	if deltas > 0 {
		first = sc.buf[:sc.ends[1]] // the opening and the first delta in one write
	}
	if _, err := w.Write(first); err != nil {
		early()
		return http.StatusOK, false
	}
	for i := 1; i < send; i++ {
		if !p.until(at(i)) {
			early()
			return http.StatusOK, false
		}
		if _, err := w.Write(segment(i + 1)); err != nil {
			early()
			return http.StatusOK, false
		}
	}
	switch kind {
	case KindMidstream:
		if !p.until(at(send)) {
			return http.StatusOK, false
		}
		if d == Anthropic {
			sc.tmp = anthropicStreamError(sc.tmp[:0])
		} else {
			sc.tmp = openaiStreamError(sc.tmp[:0])
		}
		_, _ = w.Write(sc.tmp)
		p.flush()
		early()
		return http.StatusOK, false
	case KindCut:
		p.flush() // what was sent reaches the client before the connection drops
		early()
		return http.StatusOK, true
	}
	if !p.until(deadline) {
		early()
		return http.StatusOK, false
	}
	_, _ = w.Write(segment(deltas + 1))
	p.flush()
	if d == Anthropic || req.includeUsage {
		s.bill(rep.inputTokens, rep.outputTokens)
	} else {
		early()
	}
	return http.StatusOK, false
}
