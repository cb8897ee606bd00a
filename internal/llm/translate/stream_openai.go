package translate

import (
	"bytes"
	"encoding/json"

	"github.com/straitgw/strait/internal/llm/jsonscan"
	"github.com/straitgw/strait/internal/llm/sse"
)

// openAIToAnthropic turns OpenAI chunks into Anthropic stream events:
//
//	first chunk             -> message_start (once)
//	reasoning deltas        -> a thinking block (reasoning_content, or
//	                           reasoning as some servers call it)
//	content/refusal deltas  -> a text block (empty strings send nothing)
//	tool_calls              -> one tool_use block per call, with
//	                           input_json_delta for each argument fragment
//	finish_reason           -> closes the open block; held until the usage
//	                           chunk
//	usage chunk (or [DONE]) -> message_delta with stop_reason and usage
//	[DONE]                  -> message_stop
//	error chunk             -> an error event
//	comment                 -> ping
//
// OpenAI has no block-close event, so a block is closed when the next one
// starts (or at the finish): blocks never overlap. An argument fragment for
// a tool whose block was already closed (a server interleaving parallel
// calls) is sent to that block's index rather than lost; Anthropic's own
// clients accumulate deltas by index.
type openAIToAnthropic struct {
	streamBase
	clientModel string

	started       bool
	open          int    // index of the open block, -1 if none
	openKind      string // "text", "thinking" or "tool_use"
	next          int    // index of the next block
	tools         map[int]*oaToolState
	madeToolCalls bool
	finish        string
	finishSeen    bool
	usageSeen     bool
	deltaSent     bool
}

type oaToolState struct {
	block int
	id    string
}

// oaChunk is an OpenAI stream chunk: only the fields Strait reads.
type oaChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			Refusal          *string `json:"refusal"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaUsage        `json:"usage"`
	Error json.RawMessage `json:"error"`
}

func (s *openAIToAnthropic) Event(ev sse.Event, w *sse.Writer) error {
	if s.ignoring() {
		return nil
	}
	if ev.Comment {
		if !s.started {
			return w.Raw(ev.Raw)
		}
		return w.Event("ping", pingData)
	}
	if ev.Data == nil {
		return nil
	}
	if bytes.Equal(bytes.TrimSpace(ev.Data), doneData) {
		return s.terminate(w)
	}
	var c oaChunk
	if err := unmarshal(ev.Data, &c); err != nil {
		return s.malformed(w, "not a JSON chunk", ev.Data)
	}
	if !isNull(c.Error) {
		return s.providerError(w, openAIErrorChunk(c.Error))
	}
	if ev.Name == "error" {
		// Some OpenAI-compatible servers name their error events and put
		// the error object at the top level.
		return s.providerError(w, openAIErrorChunk(ev.Data))
	}
	if err := s.start(w, c.ID, c.Model); err != nil {
		return err
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // the request asked for one choice
		}
		d := &ch.Delta
		reasoning := d.ReasoningContent
		if reasoning == nil {
			reasoning = d.Reasoning
		}
		if reasoning != nil && *reasoning != "" {
			if err := s.text(w, "thinking", *reasoning); err != nil {
				return err
			}
		}
		for _, text := range []*string{d.Content, d.Refusal} {
			if text != nil && *text != "" {
				if err := s.text(w, "text", *text); err != nil {
					return err
				}
			}
		}
		for j := range d.ToolCalls {
			tc := &d.ToolCalls[j]
			if err := s.toolCall(w, tc.Index, tc.ID, tc.Function.Name, tc.Function.Arguments); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish, s.finishSeen = *ch.FinishReason, true
			if err := s.closeOpen(w); err != nil {
				return err
			}
		}
	}
	if c.Usage != nil {
		s.usage, s.usageSeen = c.Usage.usage(), true
	}
	if s.finishSeen && s.usageSeen && !s.deltaSent {
		return s.messageDelta(w)
	}
	return nil
}

var (
	pingData        = []byte(`{"type":"ping"}`)
	messageStopData = []byte(`{"type":"message_stop"}`)
)

func (s *openAIToAnthropic) start(w *sse.Writer, id, model string) error {
	if s.started {
		return nil
	}
	s.started = true
	if s.clientModel != "" {
		model = s.clientModel
	}
	b := append(s.buf[:0], `{"type":"message_start","message":{"id":`...)
	b = jsonscan.AppendString(b, anthropicID(id))
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = jsonscan.AppendString(b, model)
	// OpenAI reports usage only at the end: message_delta carries it.
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`...)
	s.buf = b
	return w.Event("message_start", b)
}

// closeOpen sends content_block_stop for the open block, if any.
func (s *openAIToAnthropic) closeOpen(w *sse.Writer) error {
	if s.open < 0 {
		return nil
	}
	s.buf = append(s.buf[:0], `{"type":"content_block_stop","index":`...)
	s.buf = appendInt(s.buf, s.open)
	s.buf = append(s.buf, '}')
	s.open, s.openKind = -1, ""
	return w.Event("content_block_stop", s.buf)
}

// text sends a text or thinking delta, opening a block of that kind first
// if the open block is another.
func (s *openAIToAnthropic) text(w *sse.Writer, kind, text string) error {
	if s.openKind != kind {
		if err := s.closeOpen(w); err != nil {
			return err
		}
		s.open, s.openKind = s.next, kind
		s.next++
		s.buf = append(s.buf[:0], `{"type":"content_block_start","index":`...)
		s.buf = appendInt(s.buf, s.open)
		if kind == "thinking" {
			s.buf = append(s.buf, `,"content_block":{"type":"thinking","thinking":"","signature":""}}`...)
		} else {
			s.buf = append(s.buf, `,"content_block":{"type":"text","text":""}}`...)
		}
		if err := w.Event("content_block_start", s.buf); err != nil {
			return err
		}
	}
	s.buf = append(s.buf[:0], `{"type":"content_block_delta","index":`...)
	s.buf = appendInt(s.buf, s.open)
	if kind == "thinking" {
		s.buf = append(s.buf, `,"delta":{"type":"thinking_delta","thinking":`...)
	} else {
		s.buf = append(s.buf, `,"delta":{"type":"text_delta","text":`...)
	}
	s.buf = jsonscan.AppendString(s.buf, text)
	s.buf = append(s.buf, "}}"...)
	return w.Event("content_block_delta", s.buf)
}

// maxTools bounds the tool calls tracked in one message.
const maxTools = 10000

// toolCall handles one tool_calls entry: a new call (an unseen index, or a
// new id at a known index, as some servers reuse index 0) opens a tool_use
// block; arguments go out as input_json_delta.
func (s *openAIToAnthropic) toolCall(w *sse.Writer, index int, id, name, args string) error {
	t := s.tools[index]
	if t == nil || (id != "" && id != t.id) {
		if len(s.tools) >= maxTools {
			return s.malformed(w, "too many tool calls", nil)
		}
		if err := s.closeOpen(w); err != nil {
			return err
		}
		if id == "" {
			id = "call_" + newID()
		}
		if s.tools == nil {
			s.tools = make(map[int]*oaToolState, 2)
		}
		t = &oaToolState{block: s.next, id: id}
		s.tools[index] = t
		s.open, s.openKind = s.next, "tool_use"
		s.next++
		s.madeToolCalls = true
		s.buf = append(s.buf[:0], `{"type":"content_block_start","index":`...)
		s.buf = appendInt(s.buf, t.block)
		s.buf = append(s.buf, `,"content_block":{"type":"tool_use","id":`...)
		s.buf = jsonscan.AppendString(s.buf, id)
		s.buf = append(s.buf, `,"name":`...)
		s.buf = jsonscan.AppendString(s.buf, name)
		s.buf = append(s.buf, `,"input":{}}}`...)
		if err := w.Event("content_block_start", s.buf); err != nil {
			return err
		}
	} else if s.open != t.block && s.open >= 0 && s.openKind != "tool_use" {
		// A fragment for an earlier tool after text started: close the
		// text so that blocks do not overlap.
		if err := s.closeOpen(w); err != nil {
			return err
		}
	}
	if args == "" {
		return nil
	}
	s.buf = append(s.buf[:0], `{"type":"content_block_delta","index":`...)
	s.buf = appendInt(s.buf, t.block)
	s.buf = append(s.buf, `,"delta":{"type":"input_json_delta","partial_json":`...)
	s.buf = jsonscan.AppendString(s.buf, args)
	s.buf = append(s.buf, "}}"...)
	return w.Event("content_block_delta", s.buf)
}

// messageDelta sends the stop reason and, if known, the usage.
func (s *openAIToAnthropic) messageDelta(w *sse.Writer) error {
	s.deltaSent = true
	s.buf = append(s.buf[:0], `{"type":"message_delta","delta":{"stop_reason":`...)
	s.buf = jsonscan.AppendString(s.buf, stopReason(s.finish, s.madeToolCalls))
	s.buf = append(s.buf, `,"stop_sequence":null},"usage":`...)
	if s.usageSeen {
		s.buf = appendAnthropicUsage(s.buf, s.usage)
	} else {
		s.buf = append(s.buf, `{"output_tokens":0}`...)
	}
	s.buf = append(s.buf, '}')
	return w.Event("message_delta", s.buf)
}

// terminate handles [DONE]: whatever is still owed, then message_stop.
func (s *openAIToAnthropic) terminate(w *sse.Writer) error {
	if err := s.start(w, "", ""); err != nil {
		return err
	}
	if err := s.closeOpen(w); err != nil {
		return err
	}
	if !s.deltaSent {
		if err := s.messageDelta(w); err != nil {
			return err
		}
	}
	s.done = true
	return w.Event("message_stop", messageStopData)
}
