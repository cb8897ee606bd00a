package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// got is an Event copied out of the Reader's buffers, for comparing.
type got struct {
	Name    string
	Data    string
	HasData bool
	Raw     string
	Comment bool
}

func copyEvent(ev Event) got {
	return got{Name: ev.Name, Data: string(ev.Data), HasData: ev.Data != nil, Raw: string(ev.Raw), Comment: ev.Comment}
}

// readAll reads every event; maxEvents bounds the loop.
func readAll(t testing.TB, r *Reader) ([]got, error) {
	t.Helper()
	var out []got
	for range 100000 {
		ev, err := r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, copyEvent(ev))
	}
	t.Fatal("reader did not end after 100000 events")
	return nil, nil
}

func TestReaderFraming(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []got
		err   error
	}{
		{
			name:  "LF",
			input: "event: a\ndata: one\n\ndata: two\n\n",
			want: []got{
				{Name: "a", Data: "one", HasData: true, Raw: "event: a\ndata: one\n\n"},
				{Data: "two", HasData: true, Raw: "data: two\n\n"},
			},
			err: io.EOF,
		},
		{
			name:  "CRLF",
			input: "event: a\r\ndata: one\r\n\r\n",
			want:  []got{{Name: "a", Data: "one", HasData: true, Raw: "event: a\r\ndata: one\r\n\r\n"}},
			err:   io.EOF,
		},
		{
			name:  "CR",
			input: "event: a\rdata: one\r\rdata: two\r\r",
			want: []got{
				{Name: "a", Data: "one", HasData: true, Raw: "event: a\rdata: one\r\r"},
				{Data: "two", HasData: true, Raw: "data: two\r\r"},
			},
			err: io.EOF,
		},
		{
			name:  "mixed endings",
			input: "data: a\r\ndata: b\rdata: c\n\r\n",
			want:  []got{{Data: "a\nb\nc", HasData: true, Raw: "data: a\r\ndata: b\rdata: c\n\r\n"}},
			err:   io.EOF,
		},
		{
			name:  "multi-line data keeps empty lines",
			input: "data: a\ndata:\ndata:  b\n\n",
			want:  []got{{Data: "a\n\n b", HasData: true, Raw: "data: a\ndata:\ndata:  b\n\n"}},
			err:   io.EOF,
		},
		{
			name:  "single empty data line is empty, not nil",
			input: "data:\n\n",
			want:  []got{{Data: "", HasData: true, Raw: "data:\n\n"}},
			err:   io.EOF,
		},
		{
			name:  "comment-only block",
			input: ": keep-alive\n\ndata: x\n\n",
			want: []got{
				{Comment: true, Raw: ": keep-alive\n\n"},
				{Data: "x", HasData: true, Raw: "data: x\n\n"},
			},
			err: io.EOF,
		},
		{
			name:  "comment inside an event",
			input: ": note\ndata: x\n\n",
			want:  []got{{Data: "x", HasData: true, Raw: ": note\ndata: x\n\n"}},
			err:   io.EOF,
		},
		{
			name:  "blank lines between events are skipped",
			input: "\n\r\n\rdata: x\n\n\n\ndata: y\n\n\n",
			want: []got{
				{Data: "x", HasData: true, Raw: "data: x\n\n"},
				{Data: "y", HasData: true, Raw: "data: y\n\n"},
			},
			err: io.EOF,
		},
		{
			name:  "fields without a data line",
			input: "event: a\nid: 7\nretry: 10\n\n",
			want:  []got{{Name: "a", Raw: "event: a\nid: 7\nretry: 10\n\n"}},
			err:   io.EOF,
		},
		{
			name:  "no space after colon, field without colon, unknown field",
			input: "event:x\ndata\nfoo: bar\ndata:y\n\n",
			want:  []got{{Name: "x", Data: "\ny", HasData: true, Raw: "event:x\ndata\nfoo: bar\ndata:y\n\n"}},
			err:   io.EOF,
		},
		{
			name:  "last event name wins",
			input: "event: a\nevent: b\ndata: x\n\n",
			want:  []got{{Name: "b", Data: "x", HasData: true, Raw: "event: a\nevent: b\ndata: x\n\n"}},
			err:   io.EOF,
		},
		{
			name:  "byte order mark at the start is dropped",
			input: "\xEF\xBB\xBFdata: x\n\n",
			want:  []got{{Data: "x", HasData: true, Raw: "data: x\n\n"}},
			err:   io.EOF,
		},
		{
			name:  "input ends mid-event",
			input: "data: x\n\ndata: y\n",
			want:  []got{{Data: "x", HasData: true, Raw: "data: x\n\n"}},
			err:   io.ErrUnexpectedEOF,
		},
		{
			name:  "input ends mid-line",
			input: "data: x",
			err:   io.ErrUnexpectedEOF,
		},
		{
			name:  "a final CR ends the event at end of input",
			input: "data: x\r\r",
			want:  []got{{Data: "x", HasData: true, Raw: "data: x\r\r"}},
			err:   io.EOF,
		},
		{
			name:  "empty input",
			input: "",
			err:   io.EOF,
		},
	}
	for _, tt := range tests {
		// Every test runs with the input in one read and one byte per read,
		// which splits events (and CRLF pairs) at every position.
		for _, mode := range []string{"whole", "bytewise"} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				var src io.Reader = strings.NewReader(tt.input)
				if mode == "bytewise" {
					src = iotest.OneByteReader(src)
				}
				evs, err := readAll(t, NewReader(src))
				if !errors.Is(err, tt.err) {
					t.Errorf("error = %v, want %v", err, tt.err)
				}
				if len(evs) != len(tt.want) {
					t.Fatalf("got %d events %+v, want %d %+v", len(evs), evs, len(tt.want), tt.want)
				}
				for i := range evs {
					if evs[i] != tt.want[i] {
						t.Errorf("event %d = %+v, want %+v", i, evs[i], tt.want[i])
					}
				}
			})
		}
	}
}

// TestReaderSplitAtEveryByte feeds a stream in two reads split at every
// position and checks that the events do not depend on the split.
func TestReaderSplitAtEveryByte(t *testing.T) {
	input := "event: message_start\r\ndata: {\"a\":1}\r\n\r\n: ping\n\ndata: x\rdata: y\r\r" +
		"event: e\ndata: " + strings.Repeat("z", 5000) + "\n\n"
	whole, err := readAll(t, NewReader(strings.NewReader(input)))
	if err != io.EOF || len(whole) != 4 {
		t.Fatalf("whole: %d events, err %v; want 4, EOF", len(whole), err)
	}
	for split := 1; split < len(input); split++ {
		r := NewReader(io.MultiReader(strings.NewReader(input[:split]), strings.NewReader(input[split:])))
		evs, err := readAll(t, r)
		if err != io.EOF {
			t.Fatalf("split %d: err %v", split, err)
		}
		if len(evs) != len(whole) {
			t.Fatalf("split %d: %d events, want %d", split, len(evs), len(whole))
		}
		for i := range evs {
			if evs[i] != whole[i] {
				t.Fatalf("split %d: event %d = %+v, want %+v", split, i, evs[i], whole[i])
			}
		}
	}
}

func TestReaderSlicesValidUntilNextCall(t *testing.T) {
	// Many events in one read: the first event's slices must survive while
	// the caller holds them, until Next is called again.
	input := strings.Repeat("event: n\ndata: payload-1\ndata: payload-2\n\n", 200)
	r := NewReader(strings.NewReader(input))
	for i := range 200 {
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if string(ev.Raw) != "event: n\ndata: payload-1\ndata: payload-2\n\n" || string(ev.Data) != "payload-1\npayload-2" {
			t.Fatalf("event %d: raw %q data %q", i, ev.Raw, ev.Data)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the events: %v, want EOF", err)
	}
}

func TestReaderEventTooLarge(t *testing.T) {
	small := "data: ok\n\n"
	big := "data: " + strings.Repeat("x", 200) + "\n\n"
	for _, mode := range []string{"whole", "bytewise"} {
		t.Run(mode, func(t *testing.T) {
			var src io.Reader = strings.NewReader(small + big + small)
			if mode == "bytewise" {
				src = iotest.OneByteReader(src)
			}
			r := NewReader(src)
			r.MaxEventBytes = 100
			ev, err := r.Next()
			if err != nil || string(ev.Data) != "ok" {
				t.Fatalf("first event: %q, %v", ev.Data, err)
			}
			if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
				t.Fatalf("big event: err %v, want ErrEventTooLarge", err)
			}
			if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
				t.Fatalf("after the big event: err %v, want ErrEventTooLarge again", err)
			}
		})
	}
	t.Run("a line without end", func(t *testing.T) {
		r := NewReader(io.LimitReader(infiniteX{}, 1<<20))
		r.MaxEventBytes = 1000
		if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
			t.Fatalf("err %v, want ErrEventTooLarge", err)
		}
	})
	t.Run("exactly the limit is allowed", func(t *testing.T) {
		ev := "data: " + strings.Repeat("x", 92) + "\n\n" // 100 bytes
		r := NewReader(strings.NewReader(ev))
		r.MaxEventBytes = 100
		if got, err := r.Next(); err != nil || len(got.Raw) != 100 {
			t.Fatalf("got %d bytes, %v", len(got.Raw), err)
		}
	})
}

type infiniteX struct{}

func (infiniteX) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

type stuckReader struct{ reads int }

func (s *stuckReader) Read([]byte) (int, error) { s.reads++; return 0, nil }

func TestReaderErrors(t *testing.T) {
	t.Run("read error is returned and sticks", func(t *testing.T) {
		boom := errors.New("boom")
		r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)))
		if ev, err := r.Next(); err != nil || string(ev.Data) != "a" {
			t.Fatalf("first: %q %v", ev.Data, err)
		}
		for range 2 {
			if _, err := r.Next(); !errors.Is(err, boom) {
				t.Fatalf("err %v, want boom", err)
			}
		}
	})
	t.Run("a reader that never makes progress", func(t *testing.T) {
		s := &stuckReader{}
		if _, err := NewReader(s).Next(); !errors.Is(err, io.ErrNoProgress) {
			t.Fatalf("err %v, want io.ErrNoProgress", err)
		}
		if s.reads > maxEmptyReads {
			t.Fatalf("%d reads, want at most %d", s.reads, maxEmptyReads)
		}
	})
}

// flushRecorder records writes and counts flushes.
type flushRecorder struct {
	bytes.Buffer
	flushes int
	writes  int
}

func (f *flushRecorder) Write(p []byte) (int, error) { f.writes++; return f.Buffer.Write(p) }
func (f *flushRecorder) Flush()                      { f.flushes++ }

type errFlusher struct {
	bytes.Buffer
	err error
}

func (f *errFlusher) Flush() error { return f.err }

func TestWriter(t *testing.T) {
	rec := &flushRecorder{}
	w := NewWriter(rec)
	steps := []struct {
		do   func() error
		want string
	}{
		{func() error { return w.Event("message_start", []byte(`{"a":1}`)) }, "event: message_start\ndata: {\"a\":1}\n\n"},
		{func() error { return w.Event("", []byte("x")) }, "data: x\n\n"},
		{func() error { return w.Event("", []byte("a\nb\r\nc\rd")) }, "data: a\ndata: b\ndata: c\ndata: d\n\n"},
		{func() error { return w.Event("", []byte("end\n")) }, "data: end\ndata: \n\n"},
		{func() error { return w.Event("", nil) }, "data: \n\n"},
		{func() error { return w.Comment("ping") }, ": ping\n\n"},
		{func() error { return w.Comment("two\nlines") }, ": two\n: lines\n\n"},
		{func() error { return w.Raw([]byte("data: raw\r\n\r\n")) }, "data: raw\r\n\r\n"},
	}
	for i, s := range steps {
		before := rec.Len()
		if err := s.do(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := rec.String()[before:]; got != s.want {
			t.Errorf("step %d wrote %q, want %q", i, got, s.want)
		}
		if rec.flushes != i+1 || rec.writes != i+1 {
			t.Errorf("step %d: %d writes and %d flushes, want one each per event", i, rec.writes, rec.flushes)
		}
	}
	if err := w.Event("bad\nname", []byte("x")); !errors.Is(err, ErrLineBreak) {
		t.Errorf("name with a line break: %v, want ErrLineBreak", err)
	}

	// What the Writer wrote reads back as the same events.
	evs, err := readAll(t, NewReader(strings.NewReader(rec.String())))
	if err != io.EOF || len(evs) != len(steps) {
		t.Fatalf("read back %d events, %v", len(evs), err)
	}
	if evs[2].Data != "a\nb\nc\nd" || evs[0].Name != "message_start" || !evs[5].Comment || evs[4].Data != "" || !evs[4].HasData {
		t.Errorf("read back %+v", evs)
	}
}

func TestWriterErrorsStick(t *testing.T) {
	boom := errors.New("flush failed")
	f := &errFlusher{err: boom}
	w := NewWriter(f)
	if err := w.Event("", []byte("x")); !errors.Is(err, boom) {
		t.Fatalf("first event: %v, want the flush error", err)
	}
	n := f.Len()
	for _, do := range []func() error{
		func() error { return w.Event("", []byte("y")) },
		func() error { return w.Raw([]byte("data: z\n\n")) },
		func() error { return w.Comment("c") },
		w.Flush,
	} {
		if err := do(); !errors.Is(err, boom) {
			t.Errorf("after a failure: %v, want the same error", err)
		}
	}
	if f.Len() != n {
		t.Errorf("wrote %d more bytes after a failure", f.Len()-n)
	}
}

// TestReleaseReusesTheBuffer: a released Reader's buffer serves the next
// Reader, whose events are read whole, and the released Reader reads no
// more.
func TestReleaseReusesTheBuffer(t *testing.T) {
	a := NewReader(strings.NewReader("data: one\n\n"))
	if ev, err := a.Next(); err != nil || string(ev.Data) != "one" {
		t.Fatalf("%q %v", ev.Data, err)
	}
	a.Release()
	if _, err := a.Next(); err == nil {
		t.Fatal("a released Reader read on")
	}
	b := NewReader(strings.NewReader("data: two\n\ndata: three\n\n"))
	for _, want := range []string{"two", "three"} {
		if ev, err := b.Next(); err != nil || string(ev.Data) != want {
			t.Fatalf("after a Release: %q %v, want %q", ev.Data, err, want)
		}
	}
	b.Release()
	b.Release() // twice is harmless
}
