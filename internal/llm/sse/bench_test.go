package sse

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// BenchmarkReader reads a stream of typical Anthropic text deltas.
func BenchmarkReader(b *testing.B) {
	ev := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Paris is mild today\"}}\n\n"
	input := []byte(strings.Repeat(ev, 1000))
	b.SetBytes(int64(len(input)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewReader(bytes.NewReader(input))
		for {
			if _, err := r.Next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkWriterEvent writes one event.
func BenchmarkWriterEvent(b *testing.B) {
	w := NewWriter(io.Discard)
	data := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Paris is mild today"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Event("content_block_delta", data); err != nil {
			b.Fatal(err)
		}
	}
}
