// Package sse reads and writes Server-Sent Events framing (the WHATWG
// event-stream format) for the LLM gateway's streamed responses.
//
// The Reader hands back each event together with the exact bytes it was
// read from, so a relay can forward an event unchanged and only translate
// the ones it must. The Writer flushes after every event: a streamed answer
// that sits in a buffer is a stalled answer to the client.
//
// The package imports nothing of ours.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// DefaultMaxEventBytes bounds an event when Reader.MaxEventBytes is 0.
const DefaultMaxEventBytes = 1 << 20

// ErrEventTooLarge is returned by Reader.Next when an event is larger than
// Reader.MaxEventBytes. The Reader cannot resynchronise after it: every
// later call returns the same error.
var ErrEventTooLarge = errors.New("sse: event exceeds the size limit")

// Event is one dispatched event.
type Event struct {
	// Name is the `event:` field, "" if the event had none (the last one
	// wins if there are several).
	Name string
	// Data is the `data:` lines joined with "\n". It is nil if the event had
	// no data line, and empty but not nil for a single empty `data:` line.
	Data []byte
	// Raw is the exact bytes of the event as read, including its terminating
	// blank line, so a relay can forward it unchanged.
	Raw []byte
	// Comment is true for a block made only of comment lines (lines starting
	// with ':'), such as keep-alives. Name is "" and Data nil then.
	Comment bool
}

// Reader reads events from an io.Reader. It accepts LF, CRLF and CR line
// endings, multi-line data, and events split across reads at any byte.
//
// Besides the WHATWG rules it returns blocks that a browser would not
// dispatch, so that nothing a relay forwards is lost: comment-only blocks
// (Comment set) and blocks with fields but no data line (Data nil). Blank
// lines between events belong to no event and are skipped. `id:` and
// `retry:` lines are kept in Raw but not interpreted.
type Reader struct {
	// MaxEventBytes bounds the raw size of one event, line endings
	// included; 0 means DefaultMaxEventBytes. A larger event gives
	// ErrEventTooLarge.
	MaxEventBytes int

	r   io.Reader
	buf []byte
	// buf[start:end] holds bytes read but not yet returned; the event being
	// parsed begins at start.
	start, end int
	// returned is how many bytes the previous Next handed out (as Raw); they
	// are discarded at the next call, not before, so Raw stays valid.
	returned int
	eof      bool
	err      error // sticky
	bomDone  bool

	// Per-event parse state, kept across reads so a large event split over
	// many reads is scanned once. Offsets are relative to start.
	scan     int // next unparsed line
	nameOff  [2]int
	hasName  bool
	dataLns  [][2]int // value spans of the data: lines
	comments int      // comment lines in the event
	fields   int      // non-comment lines in the event
	dataBuf  []byte   // joined data of a multi-line event
}

// NewReader returns a Reader reading from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: r}
}

const (
	initialBufSize = 4 << 10
	minReadSize    = 4 << 10
	// maxEmptyReads bounds how often a misbehaving io.Reader may return
	// (0, nil) in a row before Next gives up with io.ErrNoProgress.
	maxEmptyReads = 100
)

func (r *Reader) limit() int {
	if r.MaxEventBytes > 0 {
		return r.MaxEventBytes
	}
	return DefaultMaxEventBytes
}

// Next returns the next event. At a clean end of input it returns io.EOF; if
// input ends in the middle of an event it returns io.ErrUnexpectedEOF. A
// read error is returned as is. The returned slices are valid until the next
// call.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	r.start += r.returned
	r.returned = 0
	for {
		ev, ok, err := r.parse()
		if err != nil {
			r.err = err
			return Event{}, err
		}
		if ok {
			return ev, nil
		}
		if r.eof {
			if r.start == r.end {
				r.err = io.EOF
			} else {
				r.err = io.ErrUnexpectedEOF
			}
			return Event{}, r.err
		}
		if err := r.fill(); err != nil {
			r.err = err
			return Event{}, err
		}
	}
}

// bufs holds the first buffers of Readers that were released: a relay
// reads one stream per request, and most streams' events fit the first
// buffer, so it is reused rather than left to the collector.
var bufs = sync.Pool{New: func() any { b := make([]byte, initialBufSize); return &b }}

// Release gives the Reader's buffer back for another Reader to use. The
// Reader, and every Event it returned, must not be used after it.
func (r *Reader) Release() {
	if cap(r.buf) == initialBufSize {
		b := r.buf[:initialBufSize]
		bufs.Put(&b)
	}
	r.buf = nil
	r.start, r.end, r.returned = 0, 0, 0
	r.err = errReleased
}

var errReleased = errors.New("sse: read after Release")

// fill reads more input, making room first. It sets r.eof at the end of
// input and returns other read errors.
func (r *Reader) fill() error {
	if r.end-r.start > r.limit() {
		return ErrEventTooLarge
	}
	if r.start > 0 && (r.start == r.end || len(r.buf)-r.end < minReadSize) {
		// Slide the pending bytes to the front. Event state is relative to
		// start, so it survives the move.
		n := copy(r.buf, r.buf[r.start:r.end])
		r.start, r.end = 0, n
	}
	if r.buf == nil && r.end == 0 {
		r.buf = (*bufs.Get().(*[]byte))[:initialBufSize]
	}
	if len(r.buf)-r.end < minReadSize {
		size := max(2*len(r.buf), initialBufSize)
		// Never hold much more than one event's worth: the limit plus a
		// read's slack (the extra room lets the reader see that the event
		// went past the limit).
		size = min(size, r.limit()+minReadSize+1)
		if size-r.end <= 0 {
			return ErrEventTooLarge
		}
		nb := make([]byte, size)
		copy(nb, r.buf[r.start:r.end])
		r.buf, r.end, r.start = nb, r.end-r.start, 0
	}
	for range maxEmptyReads {
		n, err := r.r.Read(r.buf[r.end:])
		if n < 0 || n > len(r.buf)-r.end {
			return fmt.Errorf("sse: the underlying reader returned an invalid count %d", n)
		}
		r.end += n
		if !r.bomDone && r.end-r.start >= 3 || err != nil {
			r.skipBOM()
		}
		if err == io.EOF {
			r.eof = true
			return nil
		}
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
	}
	return io.ErrNoProgress
}

// skipBOM drops a UTF-8 byte order mark at the very start of the stream, as
// the event-stream format requires.
func (r *Reader) skipBOM() {
	if r.bomDone {
		return
	}
	r.bomDone = true
	if bytes.HasPrefix(r.buf[r.start:r.end], []byte("\xEF\xBB\xBF")) {
		r.start += 3
	}
}

// parse scans complete lines of the pending bytes. It returns an event when
// a blank line ends one, ok == false when it needs more input.
func (r *Reader) parse() (ev Event, ok bool, err error) {
	if !r.bomDone && !r.eof {
		return Event{}, false, nil // wait until a BOM can be ruled out
	}
	for {
		pending := r.buf[r.start:r.end]
		if r.scan > r.limit() {
			return Event{}, false, ErrEventTooLarge
		}
		rest := pending[r.scan:]
		lineLen, termLen := lineEnd(rest, r.eof)
		if termLen == 0 {
			return Event{}, false, nil
		}
		line := rest[:lineLen]
		lineStart := r.scan
		r.scan += lineLen + termLen
		if lineLen == 0 {
			if r.comments == 0 && r.fields == 0 {
				// A blank line outside any event: skip it.
				r.start += r.scan
				r.scan = 0
				continue
			}
			if r.scan > r.limit() {
				return Event{}, false, ErrEventTooLarge
			}
			return r.dispatch(pending[:r.scan]), true, nil
		}
		r.field(line, lineStart)
	}
}

// lineEnd finds the end of the first line of b: the length of the line and
// of its terminator (1 or 2 bytes). termLen is 0 if b holds no complete line;
// a CR at the end of b counts as a terminator only at the end of input,
// since an LF may follow it.
func lineEnd(b []byte, eof bool) (lineLen, termLen int) {
	lf := bytes.IndexByte(b, '\n')
	search := b
	if lf >= 0 {
		search = b[:lf]
	}
	if cr := bytes.IndexByte(search, '\r'); cr >= 0 {
		switch {
		case cr+1 < len(b) && b[cr+1] == '\n':
			return cr, 2
		case cr+1 < len(b) || eof:
			return cr, 1
		default:
			return 0, 0
		}
	}
	if lf >= 0 {
		return lf, 1
	}
	return 0, 0
}

// field records one non-blank line at offset off of the event.
func (r *Reader) field(line []byte, off int) {
	if line[0] == ':' {
		r.comments++
		return
	}
	r.fields++
	name, value := line, line[len(line):]
	valOff := off + len(line)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		valOff = off + i + 1
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
			valOff++
		}
	}
	switch string(name) {
	case "data":
		r.dataLns = append(r.dataLns, [2]int{valOff, valOff + len(value)})
	case "event":
		r.hasName = true
		r.nameOff = [2]int{valOff, valOff + len(value)}
	}
}

// dispatch builds the event from raw, the event's bytes, and resets the
// per-event state.
func (r *Reader) dispatch(raw []byte) Event {
	ev := Event{Raw: raw}
	switch {
	case r.fields == 0:
		ev.Comment = true
	default:
		if r.hasName {
			ev.Name = eventName(raw[r.nameOff[0]:r.nameOff[1]])
		}
		switch len(r.dataLns) {
		case 0:
		case 1:
			ev.Data = raw[r.dataLns[0][0]:r.dataLns[0][1]:r.dataLns[0][1]]
		default:
			r.dataBuf = r.dataBuf[:0]
			for i, s := range r.dataLns {
				if i > 0 {
					r.dataBuf = append(r.dataBuf, '\n')
				}
				r.dataBuf = append(r.dataBuf, raw[s[0]:s[1]]...)
			}
			ev.Data = r.dataBuf[:len(r.dataBuf):len(r.dataBuf)]
		}
	}
	r.returned = len(raw)
	r.scan = 0
	r.hasName = false
	r.dataLns = r.dataLns[:0]
	r.comments, r.fields = 0, 0
	return ev
}

// eventName returns b as a string without allocating for the event names the
// gateway sees on every event.
func eventName(b []byte) string {
	switch string(b) {
	case "message_start":
		return "message_start"
	case "content_block_start":
		return "content_block_start"
	case "content_block_delta":
		return "content_block_delta"
	case "content_block_stop":
		return "content_block_stop"
	case "message_delta":
		return "message_delta"
	case "message_stop":
		return "message_stop"
	case "ping":
		return "ping"
	case "error":
		return "error"
	case "":
		return ""
	}
	return string(b)
}
