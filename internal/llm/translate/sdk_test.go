package translate

// These tests read both sides of every golden stream with the official
// client libraries' own stream accumulators: what the provider sent, read as
// its dialect, must mean the same as what Strait sent the client, read as
// the client's dialect. That checks the translation against an independent
// reading of each protocol, not against this package's idea of it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/straitgw/strait/internal/llm/sse"
)

// turn is a streamed answer in neutral form.
type turn struct {
	Text      string
	Reasoning string
	Tools     []toolCall
	Stop      string // Anthropic stop_reason; OpenAI finish_reasons are mapped
	Usage     Usage
	HasUsage  bool
	Error     string // the error event's message, if the stream failed
	Complete  bool   // the terminator was seen
}

type toolCall struct {
	ID, Name string
	Args     string // compact JSON
}

func sdkEvents(t *testing.T, stream []byte) []sse.Event {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(stream))
	var out []sse.Event
	for range 100000 {
		ev, err := r.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("reading stream: %v", err)
			}
			return out
		}
		ev.Data = bytes.Clone(ev.Data)
		out = append(out, ev)
	}
	t.Fatal("too many events")
	return nil
}

// readAnthropicStream accumulates an Anthropic stream with the Anthropic SDK.
func readAnthropicStream(t *testing.T, stream []byte) turn {
	t.Helper()
	var msg anthropic.Message
	var out turn
	for _, ev := range sdkEvents(t, stream) {
		if ev.Comment || ev.Data == nil {
			continue
		}
		var e anthropic.MessageStreamEventUnion
		if err := e.UnmarshalJSON(ev.Data); err != nil {
			t.Fatalf("Anthropic SDK cannot read event %q: %v", ev.Data, err)
		}
		if ev.Name != "" && ev.Name != e.Type && e.Type != "" {
			t.Errorf("event name %q but type %q", ev.Name, e.Type)
		}
		switch e.Type {
		case "error":
			var ee struct {
				Error struct{ Message string } `json:"error"`
			}
			_ = json.Unmarshal(ev.Data, &ee)
			out.Error = ee.Error.Message
			return out
		case "ping", "":
			continue
		case "message_stop":
			out.Complete = true
		}
		if out.Complete && e.Type != "message_stop" {
			break // what follows the terminator is not part of the answer
		}
		if err := msg.Accumulate(e); err != nil {
			t.Fatalf("Anthropic SDK rejects event %q: %v", ev.Data, err)
		}
		if e.Type == "message_stop" {
			break
		}
	}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			out.Text += b.Text
		case "thinking":
			out.Reasoning += b.Thinking
		case "tool_use":
			out.Tools = append(out.Tools, toolCall{ID: b.ID, Name: b.Name, Args: compactString(t, string(b.Input))})
		}
	}
	out.Stop = string(msg.StopReason)
	u := msg.Usage
	out.Usage = Usage{
		Input:      int(u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens),
		Output:     int(u.OutputTokens),
		CacheRead:  int(u.CacheReadInputTokens),
		CacheWrite: int(u.CacheCreationInputTokens),
	}
	out.HasUsage = out.Usage != Usage{}
	return out
}

// readOpenAIStream accumulates an OpenAI stream with the OpenAI SDK.
// reasoning_content is not an OpenAI field, so it is gathered by hand.
func readOpenAIStream(t *testing.T, stream []byte) turn {
	t.Helper()
	var acc openai.ChatCompletionAccumulator
	var out turn
	finish := ""
	for _, ev := range sdkEvents(t, stream) {
		if ev.Comment || ev.Data == nil {
			continue
		}
		if string(ev.Data) == "[DONE]" {
			out.Complete = true
			break
		}
		var probe struct {
			Error *struct{ Message string } `json:"error"`
		}
		if json.Unmarshal(ev.Data, &probe) == nil && probe.Error != nil {
			out.Error = probe.Error.Message
			return out
		}
		if ev.Name == "error" { // an OpenAI-compatible server's named error event
			var top struct{ Message string }
			_ = json.Unmarshal(ev.Data, &top)
			out.Error = top.Message
			return out
		}
		var c openai.ChatCompletionChunk
		if err := c.UnmarshalJSON(ev.Data); err != nil {
			t.Fatalf("OpenAI SDK cannot read chunk %q: %v", ev.Data, err)
		}
		if !acc.AddChunk(c) {
			t.Fatalf("OpenAI SDK accumulator rejects chunk %q", ev.Data)
		}
		var raw struct {
			Choices []struct {
				Delta struct {
					ReasoningContent string `json:"reasoning_content"`
					Reasoning        string `json:"reasoning"`
				} `json:"delta"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		_ = json.Unmarshal(ev.Data, &raw)
		for _, ch := range raw.Choices {
			out.Reasoning += ch.Delta.ReasoningContent + ch.Delta.Reasoning
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if len(acc.Choices) > 0 {
		m := acc.Choices[0].Message
		out.Text = m.Content
		for _, tc := range m.ToolCalls {
			out.Tools = append(out.Tools, toolCall{ID: tc.ID, Name: tc.Function.Name, Args: compactString(t, tc.Function.Arguments)})
		}
	}
	out.Stop = stopReason(finish, false)
	if finish == "" {
		out.Stop = ""
	}
	u := acc.Usage
	out.Usage = Usage{Input: int(u.PromptTokens), Output: int(u.CompletionTokens), CacheRead: int(u.PromptTokensDetails.CachedTokens)}
	out.HasUsage = out.Usage != Usage{}
	return out
}

func compactString(t *testing.T, s string) string {
	t.Helper()
	if s == "" {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("tool arguments %q are not JSON: %v", s, err)
	}
	return b.String()
}

func readStream(t *testing.T, d Dialect, stream []byte) turn {
	if d == Anthropic {
		return readAnthropicStream(t, stream)
	}
	return readOpenAIStream(t, stream)
}

func TestClientLibrariesReadTranslatedStreamsAsTheProviderMeantThem(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("testdata", "golden", "stream-*"))
	if len(dirs) == 0 {
		t.Fatal("no stream cases")
	}
	for _, dir := range dirs {
		name := filepath.Base(dir)
		parts := strings.SplitN(name, "-", 4)
		from, to := Dialect(parts[1]), Dialect(parts[2])
		t.Run(name, func(t *testing.T) {
			deterministic(t)
			input, err := os.ReadFile(filepath.Join(dir, "input"))
			if err != nil {
				t.Fatal(err)
			}
			out, s, endErr, eventErr := runStream(t, from, to, input, "")
			client := readStream(t, to, out)
			if eventErr != nil {
				if client.Error == "" {
					t.Fatalf("Event failed (%v) but the client saw no error event", eventErr)
				}
				return // the provider stream is malformed: nothing to compare
			}
			provider := readStream(t, from, input)

			if (endErr == nil) != provider.Complete || provider.Error != "" && endErr == nil {
				t.Errorf("End = %v, but the provider stream complete=%v error=%q", endErr, provider.Complete, provider.Error)
			}
			if endErr != nil {
				if client.Error == "" || client.Complete {
					t.Errorf("End = %v, but the client saw error %q, complete %v; want an error and no terminator",
						endErr, client.Error, client.Complete)
				}
				if provider.Error != "" && client.Error != provider.Error {
					t.Errorf("client error %q, provider sent %q", client.Error, provider.Error)
				}
				if !strings.HasPrefix(provider.Text, client.Text) {
					t.Errorf("client text %q is not what the provider sent before failing (%q)", client.Text, provider.Text)
				}
				return
			}
			if !client.Complete || client.Error != "" || !s.Done() {
				t.Fatalf("complete provider stream, but client complete=%v error=%q done=%v", client.Complete, client.Error, s.Done())
			}
			if client.Text != provider.Text {
				t.Errorf("text: client %q, provider %q", client.Text, provider.Text)
			}
			if client.Reasoning != provider.Reasoning {
				t.Errorf("reasoning: client %q, provider %q", client.Reasoning, provider.Reasoning)
			}
			if len(client.Tools) != len(provider.Tools) {
				t.Fatalf("tools: client %+v, provider %+v", client.Tools, provider.Tools)
			}
			for i := range client.Tools {
				c, p := client.Tools[i], provider.Tools[i]
				if p.Args == "" {
					p.Args = "{}" // OpenAI's "no arguments" is Anthropic's empty input
				}
				if c.Args == "" {
					c.Args = "{}"
				}
				if c != p {
					t.Errorf("tool %d: client %+v, provider %+v", i, c, p)
				}
			}
			wantStop := provider.Stop
			if len(provider.Tools) > 0 && wantStop != "max_tokens" {
				wantStop = "tool_use"
			}
			if wantStop == "stop_sequence" || wantStop == "" {
				wantStop = "end_turn"
			}
			if client.Stop != wantStop {
				t.Errorf("stop: client %q, want %q (provider %q)", client.Stop, wantStop, provider.Stop)
			}
			wantUsage, streamUsage := provider.Usage, s.Usage()
			if to == OpenAI {
				// No OpenAI field: cache writes are counted in prompt_tokens only.
				wantUsage.CacheWrite, streamUsage.CacheWrite = 0, 0
			}
			if client.HasUsage && client.Usage != streamUsage {
				t.Errorf("client usage %+v, Stream.Usage %+v", client.Usage, streamUsage)
			}
			if clientUsage := client.Usage; clientUsage != wantUsage && provider.HasUsage {
				t.Errorf("usage: client %+v, provider %+v", clientUsage, wantUsage)
			}
		})
	}
}
