package mockllm_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/mockllm"
)

// start serves a new mock on 127.0.0.1 for the test and returns its base
// URL.
func start(t *testing.T, opt mockllm.Options) (*mockllm.Server, string) {
	t.Helper()
	s := mockllm.New(opt)
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, url
}

// client bounds every request of a test.
var client = &http.Client{Timeout: 30 * time.Second}

// post sends body to url+path with headers given as name, value pairs.
func post(t *testing.T, url, path, body string, headers ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// decode reads resp's body as JSON into a map, failing the test on a
// status other than want.
func decode(t *testing.T, resp *http.Response, want int) map[string]any {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("status %d, want %d; body %s", resp.StatusCode, want, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, b)
	}
	return m
}

// event is one server-sent event as a client sees it.
type event struct {
	name string
	data string
	at   time.Time // when its blank line arrived
}

// readEvents reads server-sent events until the end of r, returning those
// read and the error that ended the input (nil at a clean end).
func readEvents(r io.Reader) ([]event, error) {
	var out []event
	var cur event
	var data []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" || data != nil {
				cur.data = strings.Join(data, "\n")
				cur.at = time.Now()
				out = append(out, cur)
			}
			cur, data = event{}, nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			cur.name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if cur.name != "" || data != nil {
		return out, io.ErrUnexpectedEOF
	}
	return out, sc.Err()
}

// names lists the event names of evs.
func names(evs []event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.name
	}
	return out
}

// obj decodes the JSON object of an event's data.
func obj(t *testing.T, data string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatalf("event data is not a JSON object: %v\n%s", err, data)
	}
	return m
}

// path walks m along keys (strings for objects, ints for arrays).
func path(m any, keys ...any) any {
	cur := m
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			o, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = o[k]
		case int:
			a, ok := cur.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			cur = a[k]
		}
	}
	return cur
}

// tokens is the mock's documented token estimate for n bytes of text.
func tokens(n int) int { return max(1, (n+3)/4) }

const weatherSchema = `{"type":"object","properties":{"location":{"type":"string","minLength":3},"unit":{"type":"string","enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["location","unit"]}`
