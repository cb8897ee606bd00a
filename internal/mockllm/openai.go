package mockllm

import (
	"strconv"

	"github.com/straitgw/strait/internal/llm/jsonscan"
)

// The OpenAI chat completions dialect: a chat.completion object, or a
// stream of chat.completion.chunk objects on "data:" lines (no event
// names) ending with "data: [DONE]".

// Only the fields the API reference marks required are sent, plus usage:
// the optional ones (system_fingerprint, service_tier, annotations, usage
// details) would take most of a default-sized answer, and a client must do
// without them anyway.

// appendOAID appends the completion ID "chatcmpl-…" of request n.
func (s *Server) appendOAID(b []byte, n uint64) []byte {
	b = append(b, "chatcmpl-"...)
	return s.appendID(b, n)
}

// openaiJSON appends the chat.completion object answering with rep.
func (s *Server) openaiJSON(b []byte, n uint64, model string, rep *reply) []byte {
	b = append(b, `{"id":"`...)
	b = s.appendOAID(b, n)
	b = append(b, `","object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, s.clock().Unix(), 10)
	b = append(b, `,"model":`...)
	b = jsonscan.AppendString(b, model)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	if rep.tool != "" {
		b = append(b, `null,"tool_calls":[{"id":"`...)
		b = s.appendCallID(b, n)
		b = append(b, `","type":"function","function":{"name":`...)
		b = jsonscan.AppendString(b, rep.tool)
		b = append(b, `,"arguments":`...)
		b = jsonscan.AppendString(b, rep.args)
		b = append(b, `}}]`...)
	} else {
		b = append(b, '"')
		b = append(b, rep.text...) // the text needs no escaping: see sentences
		b = append(b, '"')
	}
	b = append(b, `,"refusal":null},"logprobs":null,"finish_reason":"`...)
	b = append(b, rep.finish.openai()...)
	b = append(b, `"}],"usage":`...)
	b = appendOAUsage(b, rep)
	return append(b, '}')
}

func appendOAUsage(b []byte, rep *reply) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(rep.inputTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(rep.outputTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(rep.inputTokens+rep.outputTokens), 10)
	return append(b, '}')
}

var oaRoleChoice = []byte(`{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}`)

// oaTextChoice appends the choice of a chunk carrying one piece of text.
// The server renders these once for its whole text.
func oaTextChoice(b []byte, piece string) []byte {
	b = append(b, `{"index":0,"delta":{"content":`...)
	b = jsonscan.AppendString(b, piece)
	return append(b, `},"logprobs":null,"finish_reason":null}`...)
}

// openaiStream renders the whole stream answering with rep into sc: a
// first chunk with the role (and, for a tool call, the call's ID and name),
// one chunk per delta, then the chunk with finish_reason, the usage chunk
// if the client asked for it, and [DONE].
func (s *Server) openaiStream(sc *script, n uint64, model string, rep *reply, includeUsage bool, deltas int) {
	// Every chunk repeats the same id, created and model.
	head := sc.scratch[:0]
	head = append(head, `data: {"id":"`...)
	head = s.appendOAID(head, n)
	head = append(head, `","object":"chat.completion.chunk","created":`...)
	head = strconv.AppendInt(head, s.clock().Unix(), 10)
	head = append(head, `,"model":`...)
	head = jsonscan.AppendString(head, model)
	head = append(head, `,"choices":[`...)
	sc.scratch = head
	tail := "]}\n\n"
	if includeUsage {
		tail = `],"usage":null}` + "\n\n"
	}
	chunk := func(choice []byte) {
		sc.buf = append(sc.buf, head...)
		sc.buf = append(sc.buf, choice...)
		sc.buf = append(sc.buf, tail...)
	}

	c := sc.tmp[:0]
	defer func() { sc.tmp = c }()
	if rep.tool != "" {
		c = append(c, `{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"`...)
		c = s.appendCallID(c, n)
		c = append(c, `","type":"function","function":{"name":`...)
		c = jsonscan.AppendString(c, rep.tool)
		c = append(c, `,"arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}`...)
		chunk(c)
		sc.mark()
		for _, piece := range split(rep.args, deltas) {
			c = append(c[:0], `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`...)
			c = jsonscan.AppendString(c, piece)
			c = append(c, `}}]},"logprobs":null,"finish_reason":null}`...)
			chunk(c)
			sc.mark()
		}
	} else {
		chunk(oaRoleChoice)
		sc.mark()
		if rep.full {
			for _, choice := range s.oaTextChoices {
				chunk(choice)
				sc.mark()
			}
		} else {
			for _, piece := range split(rep.text, deltas) {
				c = oaTextChoice(c[:0], piece)
				chunk(c)
				sc.mark()
			}
		}
	}

	c = append(c[:0], `{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
	c = append(c, rep.finish.openai()...)
	c = append(c, `"}`...)
	chunk(c)
	if includeUsage {
		sc.buf = append(sc.buf, head...)
		sc.buf = append(sc.buf, `],"usage":`...)
		sc.buf = appendOAUsage(sc.buf, rep)
		sc.buf = append(sc.buf, "}\n\n"...)
	}
	sc.buf = append(sc.buf, "data: [DONE]\n\n"...)
	sc.mark()
}

// openaiStreamError appends the data line OpenAI sends when a stream fails
// after it started: an error object in place of a chunk, and no [DONE].
func openaiStreamError(b []byte) []byte {
	b = append(b, "data: "...)
	b = appendOAError(b, 500, "the mock provider ended this stream with an injected error", "")
	return append(b, "\n\n"...)
}

// appendOAError appends an OpenAI error object for status.
func appendOAError(b []byte, status int, msg, param string) []byte {
	typ, code := "invalid_request_error", ""
	switch {
	case status == 401:
		code = "invalid_api_key"
	case status == 429:
		typ, code = "requests", "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	b = append(b, `{"error":{"message":`...)
	b = jsonscan.AppendString(b, msg)
	b = append(b, `,"type":`...)
	b = jsonscan.AppendString(b, typ)
	b = append(b, `,"param":`...)
	if param == "" {
		b = append(b, "null"...)
	} else {
		b = jsonscan.AppendString(b, param)
	}
	b = append(b, `,"code":`...)
	if code == "" {
		b = append(b, "null"...)
	} else {
		b = jsonscan.AppendString(b, code)
	}
	return append(b, "}}"...)
}

// openaiModels renders the model list.
func openaiModels(models []string) []byte {
	b := []byte(`{"object":"list","data":[`)
	for i, m := range models {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = jsonscan.AppendString(b, m)
		b = append(b, `,"object":"model","created":1767225600,"owned_by":"strait-mock"}`...)
	}
	return append(b, "]}"...)
}
