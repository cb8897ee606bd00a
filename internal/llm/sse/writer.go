package sse

import (
	"bytes"
	"errors"
	"io"
)

// ErrLineBreak is returned by Writer.Event for an event name that contains a
// line break, which would end the field early and corrupt the stream.
var ErrLineBreak = errors.New("sse: event name contains a line break")

// Writer writes events and flushes after each one, so that nothing a client
// is waiting for sits in a buffer. After a write fails, every later call
// returns the same error: a half-written event cannot be repaired.
type Writer struct {
	w   io.Writer
	buf []byte
	err error
}

// NewWriter returns a Writer writing to w. If w has a Flush method (as
// http.ResponseWriter does, or one returning an error), it is called after
// every event.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w}
}

// Event writes "event: name\n" (omitted if name is ""), one "data: " line per
// line of data (a CR, LF or CRLF in data starts a new line; empty data is one
// empty data line), and the blank line that dispatches the event.
func (w *Writer) Event(name string, data []byte) error {
	if w.err != nil {
		return w.err
	}
	if containsLineBreak(name) {
		return ErrLineBreak
	}
	b := w.buf[:0]
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	b = appendLines(b, "data: ", data)
	b = append(b, '\n')
	w.buf = b
	return w.send(b)
}

// Raw writes b as is, then flushes. The caller vouches that b is whole
// events (as Event.Raw is).
func (w *Writer) Raw(b []byte) error {
	if w.err != nil {
		return w.err
	}
	return w.send(b)
}

// Comment writes text as a comment block (": text\n\n"), one comment line
// per line of text. Clients ignore it; proxies see traffic, so it serves as
// a keep-alive.
func (w *Writer) Comment(text string) error {
	if w.err != nil {
		return w.err
	}
	b := appendLines(w.buf[:0], ": ", []byte(text))
	b = append(b, '\n')
	w.buf = b
	return w.send(b)
}

// Flush flushes the underlying writer if it can be flushed.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	var err error
	switch f := w.w.(type) {
	case interface{ FlushError() error }:
		err = f.FlushError()
	case interface{ Flush() error }:
		err = f.Flush()
	case interface{ Flush() }:
		f.Flush()
	}
	if err != nil {
		w.err = err
	}
	return err
}

func (w *Writer) send(b []byte) error {
	if _, err := w.w.Write(b); err != nil {
		w.err = err
		return err
	}
	return w.Flush()
}

// appendLines appends one "prefix line\n" per line of text, splitting at
// CRLF, LF and CR.
func appendLines(b []byte, prefix string, text []byte) []byte {
	for {
		i := bytes.IndexAny(text, "\r\n")
		if i < 0 {
			b = append(b, prefix...)
			b = append(b, text...)
			return append(b, '\n')
		}
		b = append(b, prefix...)
		b = append(b, text[:i]...)
		b = append(b, '\n')
		if text[i] == '\r' && i+1 < len(text) && text[i+1] == '\n' {
			i++
		}
		text = text[i+1:]
	}
}

func containsLineBreak(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' || s[i] == '\r' {
			return true
		}
	}
	return false
}
