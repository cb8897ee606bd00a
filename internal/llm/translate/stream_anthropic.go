package translate

import (
	"github.com/straitgw/strait/internal/llm/jsonscan"
	"github.com/straitgw/strait/internal/llm/sse"
)

// anthropicToOpenAI turns Anthropic stream events into OpenAI chunks:
//
//	message_start        -> the role chunk (once, however often it comes)
//	text block           -> content deltas; its start and stop send nothing
//	thinking block       -> reasoning_content deltas (never content)
//	tool_use block       -> a tool_calls entry with its own 0-based index,
//	                        then argument fragments; "{}" at its stop if
//	                        no fragment came
//	message_delta        -> the finish_reason chunk (once)
//	message_stop         -> the usage chunk (if the provider gave usage),
//	                        then [DONE]
//	ping                 -> an SSE comment, to keep proxies from idling out
//	error                -> an error chunk, and no [DONE]
//	anything else        -> nothing
type anthropicToOpenAI struct {
	streamBase
	clientModel string

	started bool
	// prefix is every chunk's start up to `"choices":`.
	prefix        []byte
	blocks        map[int]*anBlockState
	nextTool      int
	madeToolCalls bool
	stopReason    string
	finishSent    bool
	usageSeen     bool
	// omitUsage leaves out the usage chunk: the client did not ask for it.
	omitUsage bool
}

type anBlockState struct {
	kind      string // text, thinking, tool_use, or another type to ignore
	toolIndex int
	gotArgs   bool
}

func (s *anthropicToOpenAI) Event(ev sse.Event, w *sse.Writer) error {
	if s.ignoring() {
		return nil
	}
	if ev.Comment {
		return w.Raw(ev.Raw)
	}
	if ev.Data == nil {
		return nil
	}
	var e anEvent
	if err := unmarshal(ev.Data, &e); err != nil {
		return s.malformed(w, "not a JSON object", ev.Data)
	}
	typ := e.Type
	if typ == "" {
		typ = ev.Name
	}
	switch typ {
	case "message_start":
		if s.started {
			return nil // a repeated message_start would repeat the role chunk
		}
		var id, model string
		if e.Message != nil {
			id, model = e.Message.ID, e.Message.Model
			if e.Message.Usage != nil {
				s.usage, s.usageSeen = e.Message.Usage.usage(), true
			}
		}
		return s.start(w, id, model)
	case "content_block_start":
		if e.ContentBlock == nil {
			return s.malformed(w, "content_block_start without a content_block", ev.Data)
		}
		if err := s.start(w, "", ""); err != nil {
			return err
		}
		return s.blockStart(w, &e)
	case "content_block_delta":
		if e.Delta == nil {
			return s.malformed(w, "content_block_delta without a delta", ev.Data)
		}
		if err := s.start(w, "", ""); err != nil {
			return err
		}
		return s.blockDelta(w, &e)
	case "content_block_stop":
		b := s.blocks[e.Index]
		if b == nil || b.kind != "tool_use" || b.gotArgs {
			return nil
		}
		// A tool without parameters gets no argument delta; OpenAI clients
		// parse the arguments, and "" is not JSON.
		b.gotArgs = true
		return s.toolArgs(w, b.toolIndex, "{}")
	case "message_delta":
		if e.Usage != nil {
			e.Usage.apply(&s.usage)
			s.usageSeen = true
		}
		if e.Delta != nil && e.Delta.StopReason != "" {
			s.stopReason = e.Delta.StopReason
		}
		if s.stopReason == "" || s.finishSent {
			return nil
		}
		if err := s.start(w, "", ""); err != nil {
			return err
		}
		return s.finish(w)
	case "message_stop":
		if err := s.start(w, "", ""); err != nil {
			return err
		}
		if !s.finishSent {
			if err := s.finish(w); err != nil {
				return err
			}
		}
		if s.usageSeen && !s.omitUsage {
			// The chunk OpenAI sends for stream_options.include_usage:
			// no choices, only the usage.
			s.buf = append(s.buf[:0], s.prefix...)
			s.buf = append(s.buf, `[],"usage":`...)
			s.buf = appendOpenAIUsage(s.buf, s.usage)
			s.buf = append(s.buf, '}')
			if err := w.Event("", s.buf); err != nil {
				return err
			}
		}
		s.done = true
		return w.Event("", doneData)
	case "ping":
		return w.Comment("ping")
	case "error":
		var typ, msg string
		if e.Error != nil {
			typ, msg = e.Error.Type, e.Error.Message
		}
		return s.providerError(w, anthropicErrorEvent(typ, msg))
	}
	return nil // unknown event types are to be ignored
}

// start sends the role chunk the first time it is called. id and model are
// the provider's; a stream whose message_start is missing still gets a
// role chunk first.
func (s *anthropicToOpenAI) start(w *sse.Writer, id, model string) error {
	if s.started {
		return nil
	}
	s.started = true
	if s.clientModel != "" {
		model = s.clientModel
	}
	b := append(s.prefix[:0], `{"id":`...)
	b = jsonscan.AppendString(b, openAIID(id))
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = appendInt(b, int(now().Unix()))
	b = append(b, `,"model":`...)
	b = jsonscan.AppendString(b, model)
	b = append(b, `,"choices":`...)
	s.prefix = b
	return s.delta(w, `{"role":"assistant","content":""}`)
}

// delta sends a chunk whose choice carries the given delta object.
func (s *anthropicToOpenAI) delta(w *sse.Writer, delta string) error {
	s.buf = append(s.buf[:0], s.prefix...)
	s.buf = append(s.buf, `[{"index":0,"delta":`...)
	s.buf = append(s.buf, delta...)
	s.buf = append(s.buf, `,"logprobs":null,"finish_reason":null}]}`...)
	return w.Event("", s.buf)
}

// stringDelta sends a delta with one string field: content or
// reasoning_content.
func (s *anthropicToOpenAI) stringDelta(w *sse.Writer, field, text string) error {
	s.buf = append(s.buf[:0], s.prefix...)
	s.buf = append(s.buf, `[{"index":0,"delta":{"`...)
	s.buf = append(s.buf, field...)
	s.buf = append(s.buf, `":`...)
	s.buf = jsonscan.AppendString(s.buf, text)
	s.buf = append(s.buf, `},"logprobs":null,"finish_reason":null}]}`...)
	return w.Event("", s.buf)
}

func (s *anthropicToOpenAI) toolArgs(w *sse.Writer, index int, args string) error {
	s.buf = append(s.buf[:0], s.prefix...)
	s.buf = append(s.buf, `[{"index":0,"delta":{"tool_calls":[{"index":`...)
	s.buf = appendInt(s.buf, index)
	s.buf = append(s.buf, `,"function":{"arguments":`...)
	s.buf = jsonscan.AppendString(s.buf, args)
	s.buf = append(s.buf, `}}]},"logprobs":null,"finish_reason":null}]}`...)
	return w.Event("", s.buf)
}

func (s *anthropicToOpenAI) finish(w *sse.Writer) error {
	s.finishSent = true
	s.buf = append(s.buf[:0], s.prefix...)
	s.buf = append(s.buf, `[{"index":0,"delta":{},"logprobs":null,"finish_reason":`...)
	s.buf = jsonscan.AppendString(s.buf, finishReason(s.stopReason, s.madeToolCalls))
	s.buf = append(s.buf, `}]}`...)
	return w.Event("", s.buf)
}

// maxBlocks bounds the content blocks tracked in one message, so a hostile
// stream cannot grow the map without end.
const maxBlocks = 10000

func (s *anthropicToOpenAI) blockStart(w *sse.Writer, e *anEvent) error {
	cb := e.ContentBlock
	if s.blocks == nil {
		s.blocks = make(map[int]*anBlockState, 4)
	}
	if len(s.blocks) >= maxBlocks {
		return s.malformed(w, "too many content blocks", nil)
	}
	b := &anBlockState{kind: cb.Type}
	s.blocks[e.Index] = b
	switch cb.Type {
	case "text":
		if cb.Text != "" {
			return s.stringDelta(w, "content", cb.Text)
		}
	case "thinking":
		if cb.Thinking != "" {
			return s.stringDelta(w, "reasoning_content", cb.Thinking)
		}
	case "tool_use":
		b.toolIndex = s.nextTool
		s.nextTool++
		s.madeToolCalls = true
		s.buf = append(s.buf[:0], s.prefix...)
		s.buf = append(s.buf, `[{"index":0,"delta":{"tool_calls":[`...)
		s.buf = appendToolCall(s.buf, b.toolIndex, cb.ID, cb.Name, "")
		s.buf = append(s.buf, `]},"logprobs":null,"finish_reason":null}]}`...)
		if err := w.Event("", s.buf); err != nil {
			return err
		}
		// Some servers put the whole input in the start event.
		if in := cb.Input; !isNull(in) && string(in) != "{}" {
			b.gotArgs = true
			return s.toolArgs(w, b.toolIndex, string(compactJSON(nil, in)))
		}
	}
	return nil
}

func (s *anthropicToOpenAI) blockDelta(w *sse.Writer, e *anEvent) error {
	d := e.Delta
	switch d.Type {
	case "text_delta":
		if d.Text == "" {
			return nil
		}
		return s.stringDelta(w, "content", d.Text)
	case "thinking_delta":
		if d.Thinking == "" {
			return nil
		}
		return s.stringDelta(w, "reasoning_content", d.Thinking)
	case "input_json_delta":
		b := s.blocks[e.Index]
		if b == nil || b.kind != "tool_use" || d.PartialJSON == "" {
			return nil
		}
		b.gotArgs = true
		return s.toolArgs(w, b.toolIndex, d.PartialJSON)
	}
	// signature_delta, citations_delta and unknown deltas have no OpenAI
	// form.
	return nil
}
