package mockllm_test

import (
	"io"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/mockllm"
)

// Model errors apply to the models they name only; the rest are answered.
func TestModelErrors(t *testing.T) {
	me, err := mockllm.ParseModelErrors("gpt-4o*=1:503; claude-*=0")
	if err != nil {
		t.Fatal(err)
	}
	s, url := start(t, mockllm.Options{ModelErrors: me})
	for model, want := range map[string]int{"gpt-4o-mini": 503, "claude-x": 200, "other": 200} {
		resp := post(t, url, "/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: status %d, want %d", model, resp.StatusCode, want)
		}
	}
	if n := s.Count(mockllm.OpenAI, false, 503); n != 1 {
		t.Errorf("%d 503s counted, want 1", n)
	}
	for _, bad := range []string{"gpt=2", "=0.5", "gpt=0.5:teapot"} {
		if _, err := mockllm.ParseModelErrors(bad); err == nil {
			t.Errorf("ParseModelErrors(%q): no error", bad)
		}
	}
}

// reset answers 200 and drops the connection before the body; cut with
// CutAfter sends that many deltas.
func TestResetAndCutAfter(t *testing.T) {
	_, url := start(t, mockllm.Options{ErrorRate: 1, ErrorKinds: []mockllm.ErrorKind{mockllm.KindReset}})
	resp := post(t, url, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || err == nil || len(body) != 0 {
		t.Errorf("reset: status %d, %d bytes, err %v; want 200, nothing, an error", resp.StatusCode, len(body), err)
	}

	_, url = start(t, mockllm.Options{ErrorRate: 1, ErrorKinds: []mockllm.ErrorKind{mockllm.KindCut}, CutAfter: 3, Deltas: 10})
	resp = post(t, url, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	evs, _ := readEvents(resp.Body)
	resp.Body.Close()
	deltas := 0
	for _, e := range evs {
		if strings.Contains(e.data, `"content":"`) && !strings.Contains(e.data, `"content":""`) {
			deltas++
		}
	}
	if deltas != 3 {
		t.Errorf("cut after 3: %d deltas sent", deltas)
	}
}

// Billed counts what the answers reported as usage.
func TestBilled(t *testing.T) {
	s, url := start(t, mockllm.Options{})
	var in, out int64
	for range 3 {
		m := decode(t, post(t, url, "/v1/messages", `{"model":"claude-x","max_tokens":50,"messages":[{"role":"user","content":"hello there"}]}`,
			"anthropic-version", "2023-06-01"), 200)
		in += int64(path(m, "usage", "input_tokens").(float64))
		out += int64(path(m, "usage", "output_tokens").(float64))
	}
	if gi, go_ := s.Billed(); gi != in || go_ != out {
		t.Errorf("Billed() = %d, %d; the answers reported %d, %d", gi, go_, in, out)
	}
}
