package translate

// Golden files are the spec of each translation. A case is a directory
// testdata/golden/<kind>-<from>-<to>-<name>/ holding:
//
//	input          what the client (request) or provider (response, stream) sent
//	options.json   optional Options for a request case
//	want           what Strait produces
//
// Kinds: request (want is {"stream","dropped","body"} or {"error"}),
// response (want is the body, or {"error"}), stream (want is the client's
// event stream followed by a "#--- end" summary of End, Usage and Done).
// JSON is indented in want for review; stream events are as written.
//
// After changing a translation, regenerate and review every diff by eye:
//
//	go test ./internal/llm/translate/ -run TestGolden -update

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/llm/sse"
)

var update = flag.Bool("update", false, "rewrite the golden files and the fuzz seed corpus")

// fixedClock and sequentialIDs make outputs deterministic. Tests in this
// package do not run in parallel, so swapping the variables is safe.
func deterministic(t testing.TB) {
	t.Helper()
	oldNow, oldID := now, newID
	now = func() time.Time { return time.Unix(1767225600, 0) }
	n := 0
	newID = func() string { n++; return fmt.Sprintf("strait%04d", n) }
	t.Cleanup(func() { now, newID = oldNow, oldID })
}

func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden cases (%v)", err)
	}
	for _, dir := range dirs {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			deterministic(t)
			parts := strings.SplitN(name, "-", 4)
			if len(parts) != 4 {
				t.Fatalf("case %q: want <kind>-<from>-<to>-<name>", name)
			}
			kind, from, to := parts[0], Dialect(parts[1]), Dialect(parts[2])
			input, err := os.ReadFile(filepath.Join(dir, "input"))
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			switch kind {
			case "request":
				var opt Options
				if b, err := os.ReadFile(filepath.Join(dir, "options.json")); err == nil {
					if err := json.Unmarshal(b, &opt); err != nil {
						t.Fatalf("options.json: %v", err)
					}
				}
				got = goldenRequest(t, from, to, input, opt)
			case "response":
				got = goldenResponse(t, from, to, input)
			case "stream":
				got = goldenStream(t, from, to, input)
			default:
				t.Fatalf("unknown kind %q", kind)
			}
			wantPath := filepath.Join(dir, "want")
			if *update {
				if err := os.WriteFile(wantPath, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(wantPath)
			if err != nil {
				t.Fatalf("%v (run with -update to create it, then review it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s (rerun with -update and review the diff)\n--- got\n%s\n--- want\n%s", wantPath, got, want)
			}
		})
	}
}

func indentJSON(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("output is not valid JSON: %v\n%s", err, b)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

func errorJSON(t testing.TB, err error) []byte {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	b, _ := marshal(map[string]any{"error": map[string]any{
		"status": e.Status, "kind": e.Kind, "param": e.Param, "message": e.Message}})
	return indentJSON(t, b)
}

func goldenRequest(t *testing.T, from, to Dialect, input []byte, opt Options) []byte {
	tr, err := Request(from, to, input, "upstream-model", opt)
	if err != nil {
		return errorJSON(t, err)
	}
	if !json.Valid(tr.Body) {
		t.Fatalf("translated body is not valid JSON: %s", tr.Body)
	}
	dropped := tr.Dropped
	if dropped == nil {
		dropped = []string{}
	}
	b, _ := marshal(map[string]any{"stream": tr.Stream, "dropped": dropped, "body": json.RawMessage(tr.Body)})
	return indentJSON(t, b)
}

func goldenResponse(t *testing.T, from, to Dialect, input []byte) []byte {
	out, err := Response(from, to, input, "client-model")
	if err != nil {
		return errorJSON(t, err)
	}
	return indentJSON(t, out)
}

// runStream feeds a provider stream through a Stream the way the gateway
// does, and returns what the client received and End's result.
func runStream(t testing.TB, from, to Dialect, input []byte, model string) (out []byte, s Stream, endErr, eventErr error) {
	t.Helper()
	var buf bytes.Buffer
	w := sse.NewWriter(&buf)
	s = NewStream(from, to, model)
	r := sse.NewReader(bytes.NewReader(input))
	var cause error
	for range 100000 {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			cause = err
			break
		}
		if err := s.Event(ev, w); err != nil {
			eventErr = err
			break
		}
	}
	endErr = s.End(w, cause)
	return buf.Bytes(), s, endErr, eventErr
}

func goldenStream(t *testing.T, from, to Dialect, input []byte) []byte {
	out, s, endErr, eventErr := runStream(t, from, to, input, "client-model")
	var b bytes.Buffer
	b.Write(out)
	b.WriteString("#--- end\n")
	fmt.Fprintf(&b, "event error: %v\n", eventErr)
	fmt.Fprintf(&b, "end error: %v\n", endErr)
	fmt.Fprintf(&b, "done: %v\n", s.Done())
	fmt.Fprintf(&b, "usage: %+v\n", s.Usage())
	return b.Bytes()
}
