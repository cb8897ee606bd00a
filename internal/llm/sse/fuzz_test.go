package sse

// FuzzReader checks the Reader against itself: the events must not depend
// on how the input is split into reads, each event's Raw must read back as
// the same event, and the Raws must be the input minus the blank lines
// between events. The committed corpus under testdata/fuzz/FuzzReader holds
// real provider streams, written by TestWriteSeedCorpus:
//
//	go test ./internal/llm/sse/ -run TestWriteSeedCorpus -update
//
// Run the fuzzer with
//
//	go test ./internal/llm/sse/ -run '^$' -fuzz FuzzReader -fuzztime 60s

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the seed corpus under testdata/fuzz")

// chunkedReader returns data in reads whose sizes cycle through sizes.
type chunkedReader struct {
	data  []byte
	sizes []byte
	i     int
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(c.sizes) > 0 {
		n = int(c.sizes[c.i%len(c.sizes)])%64 + 1
		c.i++
	}
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// seedStreams are realistic inputs: an Anthropic stream, an OpenAI stream,
// and framing edge cases.
var seedStreams = map[string]string{
	"anthropic": "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\"}}\n\n" +
		"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	"openai": "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n" +
		": keep-alive\n\n" +
		"data: {\"id\":\"chatcmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":3}}\n\ndata: [DONE]\n\n",
	"crlf-and-cr":   "event: a\r\ndata: 1\r\n\r\ndata: 2\rdata: 3\r\r\n",
	"truncated":     "data: {\"partial\":",
	"bom-and-blank": "\xEF\xBB\xBF\n\n:c\n\ndata\n\n",
	"junk-after":    "data: [DONE]\n\n garbage \x00\xff\n",
}

func FuzzReader(f *testing.F) {
	for _, s := range seedStreams {
		f.Add([]byte(s), []byte{0})
	}
	f.Add([]byte("data: x\r"), []byte{7, 0, 3})
	f.Fuzz(func(t *testing.T, input, sizes []byte) {
		const limit = 256
		read := func(src io.Reader) ([]got, error) {
			r := NewReader(src)
			r.MaxEventBytes = limit
			var out []got
			for range len(input) + 1 { // each event consumes at least one byte
				ev, err := r.Next()
				if err != nil {
					return out, err
				}
				out = append(out, copyEvent(ev))
			}
			t.Fatalf("more events than input bytes")
			return nil, nil
		}
		whole, werr := read(bytes.NewReader(input))
		split, serr := read(&chunkedReader{data: input, sizes: sizes})
		if !sameErr(werr, serr) {
			t.Fatalf("errors differ: whole %v, split %v", werr, serr)
		}
		if len(whole) != len(split) {
			t.Fatalf("whole read %d events, split read %d", len(whole), len(split))
		}
		rest := input
		if bytes.HasPrefix(rest, []byte("\xEF\xBB\xBF")) {
			rest = rest[3:]
		}
		for i, ev := range whole {
			if ev != split[i] {
				t.Fatalf("event %d: whole %+v, split %+v", i, ev, split[i])
			}
			if len(ev.Raw) > limit {
				t.Fatalf("event %d is %d bytes, over the %d limit", i, len(ev.Raw), limit)
			}
			// Only blank-line bytes lie between events.
			skipped := bytes.TrimLeft(rest, "\r\n")
			if !bytes.HasPrefix(skipped, []byte(ev.Raw)) {
				t.Fatalf("event %d raw %q is not the next input bytes %q", i, ev.Raw, skipped[:min(len(skipped), 80)])
			}
			rest = skipped[len(ev.Raw):]
			// Raw alone reads back as the same event (unless it starts with
			// what would be a byte order mark at the start of a stream).
			if strings.HasPrefix(ev.Raw, "\xEF\xBB\xBF") {
				continue
			}
			again, err := read(strings.NewReader(ev.Raw))
			if err != io.EOF || len(again) != 1 || again[0] != ev {
				t.Fatalf("event %d raw %q reads back as %+v, %v", i, ev.Raw, again, err)
			}
		}
		if werr == io.EOF && len(bytes.Trim(rest, "\r\n")) != 0 {
			t.Fatalf("clean EOF with unread bytes %q", rest)
		}
	})
}

func sameErr(a, b error) bool {
	for _, e := range []error{io.EOF, io.ErrUnexpectedEOF, ErrEventTooLarge} {
		if errors.Is(a, e) != errors.Is(b, e) {
			return false
		}
	}
	return (a == nil) == (b == nil)
}

// TestWriteSeedCorpus writes seedStreams as corpus files with -update, and
// otherwise checks that the committed corpus matches them.
func TestWriteSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReader")
	for name, s := range seedStreams {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n[]byte(\"\\x00\")\n", s)
		path := filepath.Join(dir, "seed-"+name)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to write the corpus)", err)
		}
		if string(b) != content {
			t.Errorf("%s is stale; run with -update", path)
		}
	}
}
