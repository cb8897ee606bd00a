package translate

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/llm/sse"
)

// An OpenAI client gets the closing usage chunk (no choices, only usage)
// exactly when it asked for it with stream_options.include_usage, as from
// OpenAI itself; the stream's Usage is tracked either way, for metrics.
func TestUsageChunkOnlyWhenTheOpenAIClientAskedForIt(t *testing.T) {
	input, err := os.ReadFile("testdata/golden/stream-anthropic-openai-text-only/input")
	if err != nil {
		t.Fatal(err)
	}
	for _, include := range []bool{true, false} {
		var buf bytes.Buffer
		w := sse.NewWriter(&buf)
		s := NewStreamWith(Anthropic, OpenAI, "m", StreamOptions{IncludeUsage: include})
		r := sse.NewReader(bytes.NewReader(input))
		for {
			ev, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Event(ev, w); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.End(w, nil); err != nil {
			t.Fatal(err)
		}
		got := strings.Contains(buf.String(), `"choices":[],"usage":`)
		if got != include || !s.Done() || s.Usage().Output == 0 || !strings.HasSuffix(buf.String(), "data: [DONE]\n\n") {
			t.Errorf("include_usage %v: usage chunk sent %v, done %v, usage %+v:\n%s", include, got, s.Done(), s.Usage(), buf.String())
		}
	}
}

func TestTranslatedRequestCarriesIncludeUsage(t *testing.T) {
	for body, want := range map[string]bool{
		`{"model":"gpt","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`:  true,
		`{"model":"gpt","stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":"hi"}]}`: false,
		`{"model":"gpt","stream":true,"messages":[{"role":"user","content":"hi"}]}`:                                          false,
	} {
		tr, err := Request(OpenAI, Anthropic, []byte(body), "claude", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if tr.IncludeUsage != want {
			t.Errorf("%s: IncludeUsage %v, want %v", body, tr.IncludeUsage, want)
		}
	}
}

// A same-dialect stream forwards the provider's error event and nothing
// after it, as a translated stream stops there too.
func TestPassThroughStopsAfterTheProvidersErrorEvent(t *testing.T) {
	input := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{\"input_tokens\":3}}}\n\n" +
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"late\"}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	var buf bytes.Buffer
	w := sse.NewWriter(&buf)
	s := NewStream(Anthropic, Anthropic, "c")
	r := sse.NewReader(strings.NewReader(input))
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Event(ev, w); err != nil {
			t.Fatal(err)
		}
	}
	endErr := s.End(w, nil)
	out := buf.String()
	if !strings.Contains(out, "overloaded_error") || strings.Contains(out, "late") || strings.Contains(out, "message_stop") {
		t.Errorf("forwarded:\n%s", out)
	}
	var pe ProviderError
	if !errors.As(endErr, &pe) {
		t.Errorf("End: %v, want the provider's error", endErr)
	}
}

// TestOpenAIUsageChunkScannedAsDecoded: the pass-through stream reads an
// OpenAI usage chunk by scanning (UsageOf) and gets what the decoder
// gets; what the scan does not take (a fraction, a chunk that is not
// JSON after its usage) is left to the decoder, as before.
func TestOpenAIUsageChunkScannedAsDecoded(t *testing.T) {
	for _, tc := range []struct {
		data string
		want Usage
	}{
		{`{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}}`, Usage{Input: 12, Output: 34}},
		{`{"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":100,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`, Usage{Input: 120, Output: 3, CacheRead: 100}},
		{`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":null}}`, Usage{Input: 5, Output: 1}},
		{`{"choices":[],"usage":null}`, Usage{}},
		{`{"choices":[],"usage":{"prompt_tokens":5.0,"completion_tokens":1}}`, Usage{}},        // the decoder refuses 5.0 for an int
		{`{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":1}} trailing`, Usage{}}, // not one JSON value
		{`{"choices":[{"delta":{"content":"usage"}}]}`, Usage{}},
	} {
		s := &passThrough{}
		s.watchOpenAI("", []byte(tc.data))
		if s.usage != tc.want {
			t.Errorf("%s: usage %+v, want %+v", tc.data, s.usage, tc.want)
		}
		var c struct {
			Usage *oaUsage `json:"usage"`
		}
		var decoded Usage
		if unmarshal([]byte(tc.data), &c) == nil {
			decoded = c.Usage.usage()
		}
		if decoded != tc.want {
			t.Errorf("%s: the decoder reads %+v, the table says %+v", tc.data, decoded, tc.want)
		}
	}
}
