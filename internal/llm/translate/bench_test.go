package translate

// Benchmarks for the reference request (the golden "reference" cases: a
// system prompt, three messages, one tool; about 0.6 KB) and for one
// streamed event each way. Run with
//
//	go test ./internal/llm/translate/ -run '^$' -bench . -benchmem

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/straitgw/strait/internal/llm/sse"
)

func benchInput(b *testing.B, name string) []byte {
	b.Helper()
	in, err := os.ReadFile(filepath.Join("testdata", "golden", name, "input"))
	if err != nil {
		b.Fatal(err)
	}
	return in
}

func benchRequest(b *testing.B, from, to Dialect, name string) {
	body := benchInput(b, name)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Request(from, to, body, "upstream-model", Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRequestOpenAIToAnthropic(b *testing.B) {
	benchRequest(b, OpenAI, Anthropic, "request-openai-anthropic-reference")
}

func BenchmarkRequestAnthropicToOpenAI(b *testing.B) {
	benchRequest(b, Anthropic, OpenAI, "request-anthropic-openai-reference")
}

func BenchmarkRequestSameDialect(b *testing.B) {
	benchRequest(b, OpenAI, OpenAI, "request-openai-anthropic-reference")
}

func benchResponse(b *testing.B, from, to Dialect, name string) {
	body := benchInput(b, name)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Response(from, to, body, "client-model"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResponseAnthropicToOpenAI(b *testing.B) {
	benchResponse(b, Anthropic, OpenAI, "response-anthropic-openai-thinking-and-tools")
}

func BenchmarkResponseOpenAIToAnthropic(b *testing.B) {
	benchResponse(b, OpenAI, Anthropic, "response-openai-anthropic-tools")
}

// benchStreamEvent measures one content event in the middle of a stream:
// the stream is started once, then the same delta is translated b.N times.
func benchStreamEvent(b *testing.B, from, to Dialect, start []sse.Event, ev sse.Event) {
	w := sse.NewWriter(io.Discard)
	s := NewStream(from, to, "client-model")
	for _, e := range start {
		if err := s.Event(e, w); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(ev.Raw)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Event(ev, w); err != nil {
			b.Fatal(err)
		}
	}
}

func sseEvent(name, data string) sse.Event {
	raw := "data: " + data + "\n\n"
	if name != "" {
		raw = "event: " + name + "\n" + raw
	}
	return sse.Event{Name: name, Data: []byte(data), Raw: []byte(raw)}
}

var (
	benchAnthropicStart = []sse.Event{
		sseEvent("message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`),
		sseEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
	}
	benchAnthropicDelta = sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Paris is mild today"}}`)
	benchOpenAIStart    = []sse.Event{
		sseEvent("", `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`),
	}
	benchOpenAIDelta = sseEvent("", `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"Paris is mild today"},"logprobs":null,"finish_reason":null}]}`)
)

func BenchmarkStreamEventAnthropicToOpenAI(b *testing.B) {
	benchStreamEvent(b, Anthropic, OpenAI, benchAnthropicStart, benchAnthropicDelta)
}

func BenchmarkStreamEventOpenAIToAnthropic(b *testing.B) {
	benchStreamEvent(b, OpenAI, Anthropic, benchOpenAIStart, benchOpenAIDelta)
}

func BenchmarkStreamEventPassThrough(b *testing.B) {
	benchStreamEvent(b, Anthropic, Anthropic, benchAnthropicStart, benchAnthropicDelta)
}
