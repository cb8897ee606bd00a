package schema

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

func TestPrefix(t *testing.T) {
	for _, id := range []int{0, 1, 255, 256, 1 << 24, 1<<31 - 1, -1} {
		b := AppendPrefix([]byte("x"), id)
		if len(b) != 1+PrefixLen || b[1] != MagicByte {
			t.Fatalf("AppendPrefix(%d) = %x", id, b)
		}
		got, rest, err := ParsePrefix(append(b[1:], "body"...))
		if err != nil || got != id || string(rest) != "body" {
			t.Errorf("ParsePrefix(AppendPrefix(%d)) = %d, %q, %v", id, got, rest, err)
		}
	}
	if got := AppendPrefix(nil, 12); !bytes.Equal(got, []byte{0, 0, 0, 0, 12}) {
		t.Errorf("AppendPrefix(12) = %x, want big-endian id after a zero byte", got)
	}
	for _, bad := range [][]byte{nil, {0}, {0, 0, 0, 1}, {1, 0, 0, 0, 1}, []byte(`{"a":1}`)} {
		if _, _, err := ParsePrefix(bad); !errors.Is(err, ErrNoPrefix) {
			t.Errorf("ParsePrefix(%x) = %v, want ErrNoPrefix", bad, err)
		}
	}
}

func TestMessageIndexes(t *testing.T) {
	tests := []struct {
		wire    []byte
		indexes []int
	}{
		{[]byte{0}, []int{0}},          // [0] as the single byte 0
		{[]byte{2, 2}, []int{1}},       // count 1, index 1
		{[]byte{4, 0, 4}, []int{0, 2}}, // a nested message
		{[]byte{2, 0x80, 0x02}, []int{128}},
	}
	for _, tt := range tests {
		got, rest, err := ParseMessageIndexes(append(slices.Clone(tt.wire), "msg"...))
		if err != nil || !slices.Equal(got, tt.indexes) || string(rest) != "msg" {
			t.Errorf("ParseMessageIndexes(%x) = %v, %q, %v; want %v", tt.wire, got, rest, err, tt.indexes)
		}
		if enc := AppendMessageIndexes(nil, tt.indexes); !bytes.Equal(enc, tt.wire) {
			t.Errorf("AppendMessageIndexes(%v) = %x, want %x", tt.indexes, enc, tt.wire)
		}
	}
	// [0] written out in full (count 1, index 0) reads as [0] too.
	if got, rest, err := ParseMessageIndexes([]byte{2, 0, 9}); err != nil || !slices.Equal(got, []int{0}) || !bytes.Equal(rest, []byte{9}) {
		t.Errorf("[0] in full: %v, %x, %v", got, rest, err)
	}
	if enc := AppendMessageIndexes(nil, nil); !bytes.Equal(enc, []byte{0}) {
		t.Errorf("AppendMessageIndexes(nil) = %x, want 00", enc)
	}
	for _, bad := range [][]byte{
		nil,                // no count
		{0x80},             // count cut short
		{1},                // negative count
		{4, 2},             // count 2, one index
		{2, 1},             // negative index
		{0xfe, 0xff, 0x03}, // count far beyond the bytes
		append([]byte{0x82, 0x02}, make([]byte, 200)...), // more than maxIndexes
	} {
		if _, _, err := ParseMessageIndexes(bad); !errors.Is(err, ErrMalformedIndexes) {
			t.Errorf("ParseMessageIndexes(%x) = %v, want ErrMalformedIndexes", bad, err)
		}
	}
}

// FuzzWirePrefix parses arbitrary payloads as the wire format, whole and
// split in two as a network read may deliver them. Invariants: no panic;
// what parses re-encodes, canonically, to no more bytes than were read and
// parses back the same; and parsing only a first part of a payload never reports
// more than parsing the whole.
func FuzzWirePrefix(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 7, 0, 'm'}, uint(3))
	f.Add([]byte{0, 0, 0, 1, 0, 4, 0, 4, 'x'}, uint(6))
	f.Add([]byte{0, 0, 0, 1, 0, 2, 0}, uint(6))
	f.Add([]byte{1, 2, 3}, uint(1))
	f.Fuzz(func(t *testing.T, b []byte, cut uint) {
		id, rest, err := ParsePrefix(b)
		if err != nil {
			if len(b) >= PrefixLen && b[0] == MagicByte {
				t.Fatalf("ParsePrefix(%x) = %v for a well-formed prefix", b, err)
			}
			return
		}
		if !bytes.Equal(AppendPrefix(nil, id), b[:PrefixLen]) || len(rest) != len(b)-PrefixLen {
			t.Fatalf("prefix of %x does not round-trip", b)
		}
		idx, body, err := ParseMessageIndexes(rest)
		if err == nil {
			read := rest[:len(rest)-len(body)]
			enc := AppendMessageIndexes(nil, idx)
			// Varints may come longer than needed, as readers accept
			// them; the canonical encoding is never longer.
			if len(enc) > len(read) {
				t.Fatalf("indexes %v read from %x re-encode to the longer %x", idx, read, enc)
			}
			again, _, err := ParseMessageIndexes(enc)
			if err != nil || !slices.Equal(again, idx) {
				t.Fatalf("indexes %v: re-encoded %x parse to %v, %v", idx, enc, again, err)
			}
		}
		// The first part of a split read.
		k := int(cut % uint(len(rest)+1))
		pidx, _, perr := ParseMessageIndexes(rest[:k])
		if perr == nil && (err != nil || !slices.Equal(pidx, idx)) {
			t.Fatalf("first %d bytes of %x parse to %v, the whole to %v, %v", k, rest, pidx, idx, err)
		}
	})
}
