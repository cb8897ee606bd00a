package llmload

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/llm/sse"
)

// scanAll feeds data to a scanner in chunks whose sizes cycle through
// sizes and describes every event found, one line each.
func scanAll(data []byte, sizes []byte) []string {
	s := sseScan{keep: 1 << 20}
	var got []string
	for i := 0; len(data) > 0; i++ {
		n := len(data)
		if len(sizes) > 0 {
			n = min(int(sizes[i%len(sizes)])%64+1, len(data))
		}
		chunk := data[:n]
		data = data[n:]
		for len(chunk) > 0 {
			m, ok := s.scan(chunk)
			if m == 0 && !ok {
				panic("scan made no progress")
			}
			chunk = chunk[m:]
			if ok {
				ev := s.event()
				got = append(got, describe(ev.Comment, string(ev.Name), ev.HasData, ev.Data))
			}
		}
	}
	return got
}

// readAll is the reference: internal/llm/sse's Reader over the whole input.
func readAll(data []byte) []string {
	r := sse.NewReader(bytes.NewReader(data))
	var got []string
	for {
		ev, err := r.Next()
		if err != nil {
			return got
		}
		got = append(got, describe(ev.Comment, ev.Name, ev.Data != nil, ev.Data))
	}
}

func describe(comment bool, name string, hasData bool, data []byte) string {
	return fmt.Sprintf("comment=%v name=%q hasData=%v data=%q", comment, name, hasData, data)
}

var scanSeeds = []string{
	"event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: ping\ndata: {}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	"data: {\"choices\":[]}\n\n: keep-alive\n\ndata: [DONE]\n\n",
	"\xEF\xBB\xBFdata: a\r\ndata: b\r\n\r\nevent:error\rdata:{\"error\":1}\r\r",
	"\xEF\xBBdata: x\n\n",
	"\n\n\ndata\n\nevent\n\nid: 1\n\nretry: 5\n\n:c1\n:c2\n\n",
	"data:  two spaces\ndata:\ndata: [DONE]\n\nevent: a\nevent: b\ndata: last name wins\n\n",
	"datum: x\ndataa: y\neventx: z\n\n",
}

func FuzzSSEScanMatchesReader(f *testing.F) {
	for i, s := range scanSeeds {
		f.Add([]byte(s), []byte{byte(i), 1, 7, 2})
	}
	f.Fuzz(func(t *testing.T, data, sizes []byte) {
		if len(data) > 64<<10 {
			return
		}
		want := readAll(data)
		got := scanAll(data, sizes)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("input %q split by %v:\nscanner %q\nreader  %q", data, sizes, got, want)
		}
	})
}

// TestSSEScanAnySplit checks each seed at every two-piece split, and byte by
// byte, against the reference reader.
func TestSSEScanAnySplit(t *testing.T) {
	for _, seed := range scanSeeds {
		data := []byte(seed)
		want := strings.Join(readAll(data), "\n")
		if want == "" && !strings.Contains(seed, "\n\n\n") {
			t.Fatalf("reference found no events in %q", seed)
		}
		for cut := 0; cut <= len(data); cut++ {
			sizes := []byte{byte(max(cut, 1) - 1), 255}
			if got := strings.Join(scanAll(data, sizes), "\n"); got != want {
				t.Fatalf("%q cut at %d:\nscanner %s\nreader  %s", seed, cut, got, want)
			}
		}
		if got := strings.Join(scanAll(data, []byte{0}), "\n"); got != want {
			t.Fatalf("%q byte by byte:\nscanner %s\nreader  %s", seed, got, want)
		}
	}
}

// TestSSEScanKeepsLittle: a stream's events are found with only the first
// keep bytes of each event's data held.
func TestSSEScanKeepsLittle(t *testing.T) {
	s := sseScan{keep: 8}
	in := []byte("data: " + strings.Repeat("x", 1000) + "\n\ndata: [DONE]\n\n")
	n, ok := s.scan(in)
	if !ok {
		t.Fatal("no event")
	}
	ev := s.event()
	if ev.DataLen != 1000 || len(ev.Data) != 8 || cap(s.data) > 64 {
		t.Fatalf("data len %d kept %d (cap %d), want 1000 and 8", ev.DataLen, len(ev.Data), cap(s.data))
	}
	if _, ok := s.scan(in[n:]); !ok {
		t.Fatal("no second event")
	}
	if ev := s.event(); !ev.dataIs("[DONE]") {
		t.Fatalf("second event %q, want [DONE]", ev.Data)
	}
}
