package translate

// Fuzz targets for everything in this package that reads a peer's bytes:
// client requests, provider responses and errors, provider streams. The
// committed corpus under testdata/fuzz/<FuzzName>/ is the golden inputs,
// written by TestWriteSeedCorpus:
//
//	go test ./internal/llm/translate/ -run TestWriteSeedCorpus -update
//
// Run one with, for example,
//
//	go test ./internal/llm/translate/ -run '^$' -fuzz FuzzRequest -fuzztime 60s

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/llm/sse"
)

// pairs are the dialect pairs a fuzz input's selector byte picks from.
var pairs = [4][2]Dialect{{OpenAI, Anthropic}, {Anthropic, OpenAI}, {OpenAI, OpenAI}, {Anthropic, Anthropic}}

func pairIndex(from, to Dialect) byte {
	for i, p := range pairs {
		if p[0] == from && p[1] == to {
			return byte(i)
		}
	}
	panic("no such pair")
}

func FuzzRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}]}`), byte(0), false)
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t"}]}]}`), byte(1), true)
	f.Fuzz(func(t *testing.T, body []byte, sel byte, strict bool) {
		p := pairs[sel%4]
		tr, err := Request(p[0], p[1], body, "the-model", Options{Strict: strict, MaxTokensCap: 1000})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != 400 || e.Kind != KindInvalidRequest || e.Message == "" {
				t.Fatalf("error %v (%T) is not a 400 *Error with a message", err, err)
			}
			return
		}
		var out struct {
			Model     string          `json:"model"`
			Messages  json.RawMessage `json:"messages"`
			MaxTokens *int            `json:"max_tokens"`
		}
		if err := json.Unmarshal(tr.Body, &out); err != nil {
			t.Fatalf("translated body is not a JSON object: %v\n%s", err, tr.Body)
		}
		if out.Model != "the-model" {
			t.Fatalf("model %q", out.Model)
		}
		if p[0] == p[1] {
			return
		}
		if strict && len(tr.Dropped) > 0 {
			t.Fatalf("strict translation dropped %v", tr.Dropped)
		}
		if p[1] == Anthropic && (out.MaxTokens == nil || *out.MaxTokens < 1 || *out.MaxTokens > 1000) {
			t.Fatalf("max_tokens %v out of range", out.MaxTokens)
		}
		if len(out.Messages) == 0 || out.Messages[0] != '[' {
			t.Fatalf("messages %s is not an array", out.Messages)
		}
	})
}

func FuzzResponse(f *testing.F) {
	f.Add([]byte(`{"id":"msg_1","content":[{"type":"text","text":"x"}],"stop_reason":"end_turn"}`), byte(1), 200)
	f.Add([]byte(`{"error":{"message":"m","type":"t"}}`), byte(0), 429)
	f.Fuzz(func(t *testing.T, body []byte, sel byte, status int) {
		p := pairs[sel%4]
		out, err := Response(p[0], p[1], body, "client-model")
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != 502 || e.Message == "" {
				t.Fatalf("error %v (%T) is not a 502 *Error with a message", err, err)
			}
		} else if p[0] != p[1] && !json.Valid(out) {
			t.Fatalf("translated response is not JSON: %s", out)
		}
		_ = ResponseUsage(p[0], body)
		e := ParseError(p[0], status, body)
		if e.Status < 400 || e.Status > 599 || e.Message == "" || len(e.Message) > len(body)+maxErrorText+100 {
			t.Fatalf("ParseError gave %+v", e)
		}
		st, b := ErrorBody(p[1], e)
		if st < 400 || st > 599 || !json.Valid(b) {
			t.Fatalf("ErrorBody gave %d %s", st, b)
		}
	})
}

// FuzzStream feeds arbitrary bytes as a provider stream and checks what the
// client receives is well framed and ends either with the client dialect's
// terminator or with its error event, never neither.
func FuzzStream(f *testing.F) {
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\"}\n\n"), byte(1))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":5}]}}]}\n\ndata: [DONE]\n\n"), byte(0))
	f.Fuzz(func(t *testing.T, input []byte, sel byte) {
		p := pairs[sel%4]
		out, s, endErr, eventErr := runStream(t, p[0], p[1], input, "m")
		if (endErr == nil) != s.Done() {
			t.Fatalf("End = %v but Done = %v", endErr, s.Done())
		}
		if eventErr != nil && s.Done() {
			t.Fatalf("Event failed (%v) after the terminator", eventErr)
		}
		r := sse.NewReader(bytes.NewReader(out))
		r.MaxEventBytes = len(out) + 1
		var last sse.Event
		for range len(out) + 1 {
			ev, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("client stream is badly framed: %v\n%q", err, out)
			}
			if !ev.Comment {
				last = ev
				last.Data = bytes.Clone(ev.Data)
			}
		}
		if p[0] == p[1] {
			return // forwarded as is: framing is the provider's
		}
		switch {
		case s.Done() && p[1] == OpenAI && string(last.Data) != "[DONE]":
			t.Fatalf("done, but the last OpenAI event is %q", last.Data)
		case s.Done() && p[1] == Anthropic && last.Name != "message_stop":
			t.Fatalf("done, but the last Anthropic event is %q", last.Name)
		case !s.Done() && p[1] == OpenAI && !bytes.HasPrefix(last.Data, []byte(`{"error":`)):
			t.Fatalf("not done, but the last OpenAI event is %q", last.Data)
		case !s.Done() && p[1] == Anthropic && last.Name != "error":
			t.Fatalf("not done, but the last Anthropic event is %q", last.Name)
		}
	})
}

// TestWriteSeedCorpus writes the golden inputs as fuzz corpus files with
// -update, and otherwise checks that every golden input is in the corpus.
func TestWriteSeedCorpus(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	for _, dir := range dirs {
		name := filepath.Base(dir)
		parts := strings.SplitN(name, "-", 4)
		input, err := os.ReadFile(filepath.Join(dir, "input"))
		if err != nil {
			t.Fatal(err)
		}
		sel := pairIndex(Dialect(parts[1]), Dialect(parts[2]))
		var target, content string
		switch parts[0] {
		case "request":
			target = "FuzzRequest"
			content = fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbyte(%q)\nbool(false)\n", input, sel)
		case "response":
			target = "FuzzResponse"
			content = fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbyte(%q)\nint(500)\n", input, sel)
		case "stream":
			target = "FuzzStream"
			content = fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbyte(%q)\n", input, sel)
		}
		path := filepath.Join("testdata", "fuzz", target, "golden-"+name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Errorf("%s is missing or stale (run with -update)", path)
		}
	}
}
