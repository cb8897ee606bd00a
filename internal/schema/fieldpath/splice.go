package fieldpath

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ReplaceFunc appends the new value of span s, whose current value is val,
// to dst. It must not keep val or dst.
type ReplaceFunc func(dst []byte, s *Span, val []byte) ([]byte, error)

// errOrder is a locator's bug, not the record's: spans or frames out of
// order, or overlapping.
var errOrder = errors.New("fieldpath: spans and frames out of order")

// Splice appends body to dst with the value of every span in f replaced by
// what replace appends, and with every length prefix around a changed
// value rewritten: the span's own, and those of the frames enclosing it.
// Nothing else of body changes. Splice does not allocate once f's memory
// has grown to the record's needs.
func Splice(dst, body []byte, f *Found, replace ReplaceFunc) ([]byte, error) {
	if len(f.Spans) == 0 {
		return append(dst, body...), nil
	}
	// The new values first, in order, each starting at replAt[i].
	f.repl, f.replAt = f.repl[:0], f.replAt[:0]
	for i := range f.Spans {
		s := &f.Spans[i]
		if s.LenAt > s.Start || s.Start > s.End || s.End > len(body) || (i > 0 && s.LenAt < f.Spans[i-1].End) {
			return dst, errOrder
		}
		f.replAt = append(f.replAt, len(f.repl))
		var err error
		if f.repl, err = replace(f.repl, s, body[s.Start:s.End]); err != nil {
			return dst, err
		}
	}
	f.replAt = append(f.replAt, len(f.repl))
	if err := f.measureFrames(body); err != nil {
		return dst, err
	}

	// Then the record: body's bytes up to each prefix or span, and the
	// new prefix and value in its place.
	at := 0
	si, fi := 0, 0
	for si < len(f.Spans) || fi < len(f.Frames) {
		if fi < len(f.Frames) && (si == len(f.Spans) || f.Frames[fi].LenAt <= f.Spans[si].LenAt) {
			fr := &f.Frames[fi]
			if fr.LenAt < at {
				return dst, errOrder
			}
			dst = append(dst, body[at:fr.LenAt]...)
			dst = appendLen(dst, fr.Len, f.newLen[fi])
			at = fr.Start
			fi++
			continue
		}
		s := &f.Spans[si]
		if s.LenAt < at {
			return dst, errOrder
		}
		dst = append(dst, body[at:s.LenAt]...)
		v := f.repl[f.replAt[si]:f.replAt[si+1]]
		dst = appendLen(dst, s.Len, len(v))
		dst = append(dst, v...)
		at = s.End
		si++
	}
	return append(dst, body[at:]...), nil
}

// measureFrames computes every frame's new length into f.newLen: its old
// length, plus the size changes of the spans inside it, plus the width
// changes of the length prefixes of the frames inside it. One pass in
// record order, with a stack of the frames open at each point.
func (f *Found) measureFrames(body []byte) error {
	n := len(f.Frames)
	if n == 0 {
		return nil
	}
	f.newLen = growInts(f.newLen, n)
	f.acc = growInts(f.acc, n)
	clear(f.acc)
	f.stack = f.stack[:0]
	closeTo := func(pos int) {
		for len(f.stack) > 0 {
			top := f.stack[len(f.stack)-1]
			fr := &f.Frames[top]
			if fr.End > pos {
				return
			}
			f.stack = f.stack[:len(f.stack)-1]
			nl := fr.End - fr.Start + f.acc[top]
			f.newLen[top] = nl
			grew := f.acc[top] + lenWidth(fr.Len, nl) - (fr.Start - fr.LenAt)
			if len(f.stack) > 0 {
				f.acc[f.stack[len(f.stack)-1]] += grew
			}
		}
	}
	si, fi := 0, 0
	for si < len(f.Spans) || fi < len(f.Frames) {
		if fi < len(f.Frames) && (si == len(f.Spans) || f.Frames[fi].LenAt <= f.Spans[si].LenAt) {
			fr := &f.Frames[fi]
			if fr.LenAt > fr.Start || fr.Start > fr.End || fr.End > len(body) {
				return errOrder
			}
			closeTo(fr.LenAt)
			if len(f.stack) > 0 && f.Frames[f.stack[len(f.stack)-1]].End < fr.End {
				return errOrder // overlaps its parent's end
			}
			f.stack = append(f.stack, fi)
			fi++
			continue
		}
		s := &f.Spans[si]
		closeTo(s.LenAt)
		if len(f.stack) > 0 {
			top := f.stack[len(f.stack)-1]
			if f.Frames[top].End < s.End || f.Frames[top].Start > s.LenAt {
				return errOrder
			}
			nv := f.replAt[si+1] - f.replAt[si]
			f.acc[top] += lenWidth(s.Len, nv) + nv - (s.End - s.LenAt)
		}
		si++
	}
	closeTo(len(body) + 1)
	return nil
}

func growInts(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n)
	}
	return s[:n]
}

// lenWidth is the size of a length prefix of kind k holding n.
func lenWidth(k LenKind, n int) int {
	switch k {
	case Uvarint:
		return uvarintLen(uint64(n))
	case Zigzag:
		return uvarintLen(uint64(n) << 1)
	}
	return 0
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func appendLen(dst []byte, k LenKind, n int) []byte {
	switch k {
	case Uvarint:
		return binary.AppendUvarint(dst, uint64(n))
	case Zigzag:
		return binary.AppendVarint(dst, int64(n))
	}
	return dst
}

// Describe returns a short description of a locator fault at a path, for
// the Error messages of format locators.
func Describe(path string, format string, args ...any) *Error {
	return &Error{Field: path, Reason: fmt.Sprintf(format, args...)}
}
