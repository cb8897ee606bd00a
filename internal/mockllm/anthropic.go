package mockllm

import (
	"strconv"

	"github.com/straitgw/strait/internal/llm/jsonscan"
)

// The Anthropic Messages dialect: a message object, or a stream of named
// events: message_start (with the input token count), content_block_start,
// ping, content_block_delta..., content_block_stop, message_delta (the stop
// reason and the cumulative output token count), message_stop, and nothing
// after it.

// appendAnthropicID appends the message ID "msg_…" of request n.
func (s *Server) appendAnthropicID(b []byte, n uint64) []byte {
	b = append(b, "msg_"...)
	return s.appendID(b, n)
}

func (s *Server) appendToolUseID(b []byte, n uint64) []byte {
	b = append(b, "toolu_"...)
	return s.appendID(b, n)
}

// anthropicJSON appends the message object answering with rep.
func (s *Server) anthropicJSON(b []byte, n uint64, model string, rep *reply) []byte {
	b = append(b, `{"id":"`...)
	b = s.appendAnthropicID(b, n)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = jsonscan.AppendString(b, model)
	b = append(b, `,"content":[`...)
	if rep.tool != "" {
		b = append(b, `{"type":"tool_use","id":"`...)
		b = s.appendToolUseID(b, n)
		b = append(b, `","name":`...)
		b = jsonscan.AppendString(b, rep.tool)
		b = append(b, `,"input":`...)
		b = append(b, rep.args...)
		b = append(b, '}')
	} else {
		b = append(b, `{"type":"text","text":"`...)
		b = append(b, rep.text...) // the text needs no escaping: see sentences
		b = append(b, `"}`...)
	}
	b = append(b, `],"stop_reason":"`...)
	b = append(b, rep.finish.anthropic()...)
	b = append(b, `","stop_sequence":`...)
	b = appendStopSequence(b, rep)
	b = append(b, `,"usage":`...)
	b = appendAnthropicUsage(b, rep.inputTokens, rep.outputTokens)
	return append(b, '}')
}

func appendStopSequence(b []byte, rep *reply) []byte {
	if rep.finish == finishStopSeq {
		return jsonscan.AppendString(b, rep.stopSeq)
	}
	return append(b, "null"...)
}

func appendAnthropicUsage(b []byte, in, out int) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(in), 10)
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(out), 10)
	return append(b, '}')
}

// Events that never change.
const (
	anPing            = "event: ping\ndata: {\"type\":\"ping\"}\n\n"
	anTextBlockStart  = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	anBlockStop       = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	anMessageStop     = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	anDeltaEventStart = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
)

// anTextDelta appends the content_block_delta event carrying one piece of
// text. The server renders these once for its whole text.
func anTextDelta(b []byte, piece string) []byte {
	b = append(b, anDeltaEventStart...)
	b = append(b, `{"type":"text_delta","text":`...)
	b = jsonscan.AppendString(b, piece)
	return append(b, "}}\n\n"...)
}

// anthropicStream renders the whole stream answering with rep into sc.
func (s *Server) anthropicStream(sc *script, n uint64, model string, rep *reply, deltas int) {
	b := sc.buf
	b = append(b, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\""...)
	b = s.appendAnthropicID(b, n)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = jsonscan.AppendString(b, model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	// The output count starts at 1, as the provider's does.
	b = appendAnthropicUsage(b, rep.inputTokens, 1)
	b = append(b, "}}\n\n"...)
	if rep.tool != "" {
		b = append(b, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\""...)
		b = s.appendToolUseID(b, n)
		b = append(b, `","name":`...)
		b = jsonscan.AppendString(b, rep.tool)
		b = append(b, ",\"input\":{}}}\n\n"...)
		b = append(b, anPing...)
		sc.buf = b
		sc.mark()
		for _, piece := range split(rep.args, deltas) {
			b = append(b, anDeltaEventStart...)
			b = append(b, `{"type":"input_json_delta","partial_json":`...)
			b = jsonscan.AppendString(b, piece)
			b = append(b, "}}\n\n"...)
			sc.buf = b
			sc.mark()
		}
	} else {
		b = append(b, anTextBlockStart...)
		b = append(b, anPing...)
		sc.buf = b
		sc.mark()
		if rep.full {
			for _, ev := range s.anTextDeltas {
				b = append(b, ev...)
				sc.buf = b
				sc.mark()
			}
		} else {
			for _, piece := range split(rep.text, deltas) {
				b = anTextDelta(b, piece)
				sc.buf = b
				sc.mark()
			}
		}
	}
	b = append(b, anBlockStop...)
	b = append(b, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\""...)
	b = append(b, rep.finish.anthropic()...)
	b = append(b, `","stop_sequence":`...)
	b = appendStopSequence(b, rep)
	b = append(b, `},"usage":{"output_tokens":`...)
	b = strconv.AppendInt(b, int64(rep.outputTokens), 10)
	b = append(b, "}}\n\n"...)
	b = append(b, anMessageStop...)
	sc.buf = b
	sc.mark()
}

// anthropicStreamError appends the error event Anthropic sends when a
// stream fails after it started.
func anthropicStreamError(b []byte) []byte {
	b = append(b, "event: error\ndata: "...)
	b = appendAnthropicError(b, 529, "Overloaded", "")
	return append(b, "\n\n"...)
}

// anthropicErrorType is the error.type Anthropic sends with status.
func anthropicErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 409:
		return "conflict_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 504:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// appendAnthropicError appends an Anthropic error object for status;
// requestID is left out when empty (stream error events carry none).
func appendAnthropicError(b []byte, status int, msg, requestID string) []byte {
	b = append(b, `{"type":"error","error":{"type":"`...)
	b = append(b, anthropicErrorType(status)...)
	b = append(b, `","message":`...)
	b = jsonscan.AppendString(b, msg)
	b = append(b, '}')
	if requestID != "" {
		b = append(b, `,"request_id":`...)
		b = jsonscan.AppendString(b, requestID)
	}
	return append(b, '}')
}

// anthropicModels renders the model list.
func anthropicModels(models []string) []byte {
	b := []byte(`{"data":[`)
	for i, m := range models {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"model","id":`...)
		b = jsonscan.AppendString(b, m)
		b = append(b, `,"display_name":`...)
		b = jsonscan.AppendString(b, m)
		b = append(b, `,"created_at":"2026-01-01T00:00:00Z"}`...)
	}
	b = append(b, `],"has_more":false,"first_id":`...)
	b = jsonscan.AppendString(b, models[0])
	b = append(b, `,"last_id":`...)
	b = jsonscan.AppendString(b, models[len(models)-1])
	return append(b, '}')
}
