package llmsdk_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/straitgw/strait/internal/llm/translate"
)

// scripted is a provider that answers from a script, for what the mock
// provider does not do: several tool calls in one answer, any stop reason,
// cache token counts, a stream that ends early but cleanly. Each request
// takes the next answer, rendered as JSON or as a stream in the dialect of
// the path it came on (/v1/chat/completions or /v1/messages), and is
// recorded for the test to read.
type scripted struct {
	url string

	mu      sync.Mutex
	answers []answer
	got     []providerRequest
}

// providerRequest is a request the scripted provider received.
type providerRequest struct {
	dialect translate.Dialect
	proto   string
	header  http.Header
	body    []byte
}

// answer is one scripted answer, in neutral terms.
type answer struct {
	text  string
	calls []toolCall
	// stop is the stop reason in Anthropic's terms: end_turn, max_tokens,
	// tool_use or stop_sequence (matching scriptedStopSequence). The
	// OpenAI rendering maps it to its finish_reason.
	stop  string
	usage usage
	// endEarly ends a stream right after the first delta of its text,
	// cleanly (the body ends, the connection is fine) but without the rest
	// of the answer or the dialect's terminator.
	endEarly bool
}

// usage is what the provider reports: input excludes the cached tokens,
// which OpenAI counts in prompt_tokens and Anthropic apart.
type usage struct{ input, cached, output int64 }

// scriptedStopSequence is the stop sequence an answer with stop
// "stop_sequence" reports.
const scriptedStopSequence = "END"

// scriptedCreated is the created time of OpenAI answers.
const scriptedCreated = 1767225600

// startScripted serves a scripted provider on 127.0.0.1, HTTP/1.1 and h2c
// (prior knowledge) on one port.
func startScripted(t *testing.T) *scripted {
	t.Helper()
	s := &scripted{}
	srv := httptest.NewUnstartedServer(s)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// push queues answers, served in order.
func (s *scripted) push(a ...answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers = append(s.answers, a...)
}

// last returns the last request received.
func (s *scripted) last(t *testing.T) providerRequest {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.got) == 0 {
		t.Fatal("the scripted provider received no request")
	}
	return s.got[len(s.got)-1]
}

// count returns how many requests were received.
func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var d translate.Dialect
	switch r.URL.Path {
	case "/v1/chat/completions":
		d = translate.OpenAI
	case "/v1/messages":
		d = translate.Anthropic
	default:
		writeScriptedError(w, translate.OpenAI, http.StatusNotFound, "the scripted provider has no endpoint "+r.URL.Path)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		writeScriptedError(w, d, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	var head struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		writeScriptedError(w, d, http.StatusBadRequest, "the body is not JSON: "+err.Error())
		return
	}
	s.mu.Lock()
	s.got = append(s.got, providerRequest{dialect: d, proto: r.Proto, header: r.Header.Clone(), body: body})
	var a answer
	ok := len(s.answers) > 0
	if ok {
		a, s.answers = s.answers[0], s.answers[1:]
	}
	s.mu.Unlock()
	if !ok {
		writeScriptedError(w, d, http.StatusInternalServerError, "the scripted provider has no answer left for this request")
		return
	}
	if !head.Stream {
		w.Header().Set("Content-Type", "application/json")
		if d == translate.Anthropic {
			w.Write(anthropicAnswerJSON(head.Model, a))
		} else {
			w.Write(openAIAnswerJSON(head.Model, a))
		}
		return
	}
	var events []string
	var firstDelta int
	if d == translate.Anthropic {
		events, firstDelta = anthropicAnswerEvents(head.Model, a)
	} else {
		events, firstDelta = openAIAnswerEvents(head.Model, a, head.StreamOptions != nil && head.StreamOptions.IncludeUsage)
	}
	if a.endEarly {
		events = events[:firstDelta+1]
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	for _, ev := range events {
		if _, err := io.WriteString(w, ev); err != nil {
			return
		}
		if f != nil {
			f.Flush()
		}
	}
}

// writeScriptedError answers with an error in dialect d's shape.
func writeScriptedError(w http.ResponseWriter, d translate.Dialect, status int, msg string) {
	var body any
	if d == translate.Anthropic {
		body = map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": msg}}
	} else {
		body = map[string]any{"error": map[string]any{"message": msg, "type": "server_error", "param": nil, "code": nil}}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(mustJSON(body))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// finishReason is an Anthropic stop reason in OpenAI's terms.
func finishReason(stop string) string {
	switch stop {
	case "max_tokens":
		return "length"
	case "tool_use":
		return "tool_calls"
	}
	return "stop"
}

func (u usage) openAI() map[string]any {
	return map[string]any{
		"prompt_tokens":         u.input + u.cached,
		"completion_tokens":     u.output,
		"total_tokens":          u.input + u.cached + u.output,
		"prompt_tokens_details": map[string]any{"cached_tokens": u.cached},
	}
}

func (u usage) anthropic() map[string]any {
	return map[string]any{
		"input_tokens":                u.input,
		"cache_creation_input_tokens": 0,
		"cache_read_input_tokens":     u.cached,
		"output_tokens":               u.output,
	}
}

// stopSequence is the stop_sequence field of an answer: the sequence, or
// null.
func (a answer) stopSequence() any {
	if a.stop == "stop_sequence" {
		return scriptedStopSequence
	}
	return nil
}

func openAIAnswerJSON(model string, a answer) []byte {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if a.text != "" {
		msg["content"] = a.text
	}
	if len(a.calls) > 0 {
		var calls []any
		for _, c := range a.calls {
			calls = append(calls, map[string]any{
				"id": c.id, "type": "function",
				"function": map[string]any{"name": c.name, "arguments": c.args},
			})
		}
		msg["tool_calls"] = calls
	}
	return mustJSON(map[string]any{
		"id": "chatcmpl-scripted", "object": "chat.completion", "created": scriptedCreated, "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finishReason(a.stop)}},
		"usage":   a.usage.openAI(),
	})
}

func anthropicAnswerJSON(model string, a answer) []byte {
	content := []any{}
	if a.text != "" {
		content = append(content, map[string]any{"type": "text", "text": a.text})
	}
	for _, c := range a.calls {
		content = append(content, map[string]any{"type": "tool_use", "id": c.id, "name": c.name, "input": json.RawMessage(c.args)})
	}
	return mustJSON(map[string]any{
		"id": "msg_scripted", "type": "message", "role": "assistant", "model": model, "content": content,
		"stop_reason": a.stop, "stop_sequence": a.stopSequence(), "usage": a.usage.anthropic(),
	})
}

// halves cuts s in two pieces, so that every text and every argument
// string arrives as more than one delta; short strings stay whole.
func halves(s string) []string {
	switch {
	case s == "":
		return nil
	case len(s) < 2:
		return []string{s}
	}
	return []string{s[:len(s)/2], s[len(s)/2:]}
}

// openAIAnswerEvents renders a as OpenAI stream chunks, each a whole SSE
// event: the role, the text in deltas, each tool call (its id and name,
// then its arguments in fragments), the finish reason, the usage if asked
// for, and [DONE]. firstDelta is the index of the first text delta's event.
func openAIAnswerEvents(model string, a answer, includeUsage bool) (events []string, firstDelta int) {
	chunk := func(choices []any, usage any) {
		c := map[string]any{"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": scriptedCreated, "model": model, "choices": choices}
		if usage != nil {
			c["usage"] = usage
		}
		events = append(events, "data: "+string(mustJSON(c))+"\n\n")
	}
	delta := func(d map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "logprobs": nil, "finish_reason": finish}}
	}
	chunk(delta(map[string]any{"role": "assistant", "content": ""}, nil), nil)
	firstDelta = len(events)
	for _, piece := range halves(a.text) {
		chunk(delta(map[string]any{"content": piece}, nil), nil)
	}
	for i, c := range a.calls {
		chunk(delta(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": ""},
		}}}, nil), nil)
		for _, frag := range halves(c.args) {
			chunk(delta(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": frag},
			}}}, nil), nil)
		}
	}
	chunk(delta(map[string]any{}, finishReason(a.stop)), nil)
	if includeUsage {
		chunk([]any{}, a.usage.openAI())
	}
	return append(events, "data: [DONE]\n\n"), firstDelta
}

// anthropicAnswerEvents renders a as Anthropic stream events: message_start
// with the input usage, a ping, a text block, a tool_use block per call,
// message_delta with the stop reason and output usage, message_stop.
// firstDelta is the index of the first text delta's event.
func anthropicAnswerEvents(model string, a answer) (events []string, firstDelta int) {
	event := func(v map[string]any) {
		events = append(events, fmt.Sprintf("event: %s\ndata: %s\n\n", v["type"], mustJSON(v)))
	}
	start := a.usage.anthropic()
	start["output_tokens"] = 1
	event(map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_scripted", "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": start,
	}})
	event(map[string]any{"type": "ping"})
	index := 0
	if a.text != "" {
		event(map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "text", "text": ""}})
		firstDelta = len(events)
		for _, piece := range halves(a.text) {
			event(map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "text_delta", "text": piece}})
		}
		event(map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	for _, c := range a.calls {
		event(map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{
			"type": "tool_use", "id": c.id, "name": c.name, "input": map[string]any{},
		}})
		for _, frag := range halves(c.args) {
			event(map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": frag}})
		}
		event(map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	event(map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": a.stop, "stop_sequence": a.stopSequence()},
		"usage": map[string]any{"output_tokens": a.usage.output}})
	event(map[string]any{"type": "message_stop"})
	return events, firstDelta
}

// callID is a tool call id in the style of dialect d's provider; the
// gateway passes ids through unchanged both ways.
func callID(d translate.Dialect, suffix string) string {
	if d == translate.Anthropic {
		return "toolu_01" + suffix
	}
	return "call_" + suffix
}

// describe summarizes a provider request for failure messages: its first
// 4 KiB, which hold the messages unless an image is that large.
func (r providerRequest) describe() string {
	body := strings.TrimSpace(string(r.body))
	if len(body) > 4096 {
		body = body[:4096] + fmt.Sprintf("… (%d bytes)", len(r.body))
	}
	return fmt.Sprintf("%s request over %s: %s", r.dialect, r.proto, body)
}
