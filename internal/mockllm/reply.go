package mockllm

import (
	"strings"
	"unicode/utf8"
)

// sentences make up the reply text, cycled and cut to length. Plain ASCII
// with nothing JSON must escape, so that any prefix of the text can be
// copied between quotes as it is.
var sentences = []string{
	"This answer comes from the Strait mock provider.",
	"Its length, pace and token counts follow the flags it was started with.",
	"Each delta of a stream carries an equal share of the text.",
	"A gateway under test relays it like any other answer.",
	"Latency, errors and rate limits are injected on purpose.",
	"Nothing here was written by a model.",
}

// replyText returns about n bytes of text made of sentences: whole words,
// cut at the end of the word nearest to n bytes (a few bytes either way)
// and closed with a full stop, so that an answer reported as complete
// (finish_reason stop, stop_reason end_turn) reads as one.
func replyText(n int) string {
	var b strings.Builder
	b.Grow(n + 80)
	for i := 0; b.Len() <= n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(sentences[i%len(sentences)])
	}
	text := b.String() // longer than n
	before := wordPrefix(text, n)
	after := text // up to the end of the word running through byte n
	if i := strings.IndexByte(text[n:], ' '); i >= 0 {
		after = text[:n+i]
	}
	cut := after
	if before != "" && n-len(before) <= len(after)-n {
		cut = before
	}
	cut = strings.TrimRight(cut, ",;:")
	if !strings.HasSuffix(cut, ".") {
		cut += "."
	}
	return cut
}

// wordPrefix returns the longest prefix of text of at most n bytes that
// ends at the end of a word; "" if the first word is longer than n.
func wordPrefix(text string, n int) string {
	if n >= len(text) {
		return text
	}
	i := strings.LastIndexByte(text[:n+1], ' ')
	if i < 0 {
		return ""
	}
	return strings.TrimRight(text[:i], " ")
}

// finish is why an answer ended.
type finish uint8

const (
	finishStop     finish = iota // the text ended (OpenAI stop, Anthropic end_turn)
	finishLength                 // max_tokens cut it (length, max_tokens)
	finishStopSeq                // a stop sequence cut it (stop, stop_sequence)
	finishToolCall               // a tool call (tool_calls, tool_use)
)

func (f finish) openai() string {
	switch f {
	case finishLength:
		return "length"
	case finishToolCall:
		return "tool_calls"
	}
	return "stop"
}

func (f finish) anthropic() string {
	switch f {
	case finishLength:
		return "max_tokens"
	case finishStopSeq:
		return "stop_sequence"
	case finishToolCall:
		return "tool_use"
	}
	return "end_turn"
}

// reply is the answer to one request, the same in both dialects.
type reply struct {
	text    string // the answer text; empty for a tool call
	full    bool   // text is the server's whole text, whose deltas are pre-rendered
	tool    string // name of the tool called; "" for text
	args    string // the tool call's arguments, JSON
	finish  finish
	stopSeq string // the stop sequence that ended the text
	// Token counts: output is that of the text, or of the tool call's
	// name and arguments.
	inputTokens, outputTokens int
}

// plan decides the answer to r: a tool call, or the server's text cut at
// the first stop sequence it contains and at max_tokens (at the end of a
// word, reported as length / max_tokens).
func (s *Server) plan(r *request) reply {
	rep := reply{inputTokens: r.inputTokens}
	if r.tool != nil {
		rep.tool = r.tool.name
		rep.args = s.arguments(r.tool.schema)
		rep.finish = finishToolCall
		rep.outputTokens = tokens(len(rep.tool) + len(rep.args))
		return rep
	}
	text, end := s.text, finishStop
	for _, seq := range r.stop {
		if seq == "" {
			continue
		}
		if i := strings.Index(text, seq); i >= 0 {
			text, end, rep.stopSeq = text[:i], finishStopSeq, seq
		}
	}
	if r.maxTokens > 0 && tokens(len(text)) > r.maxTokens {
		// Cut where a word ends, as a model stops between tokens; only a
		// first word longer than the whole budget is cut inside.
		cut := wordPrefix(text, r.maxTokens*4)
		if cut == "" {
			cut = text[:r.maxTokens*4]
		}
		text, end, rep.stopSeq = cut, finishLength, ""
	}
	rep.text, rep.finish = text, end
	rep.full = len(text) == len(s.text)
	rep.outputTokens = tokens(len(text))
	return rep
}

// arguments returns the generated arguments for a tool schema, from a
// bounded cache: benchmarks send the same tools over and over.
func (s *Server) arguments(schema []byte) string {
	if v, ok := s.argsCache.Load(string(schema)); ok {
		return v.(string)
	}
	args := toolArguments(schema)
	if s.argsCached.Add(1) <= maxCachedSchemas {
		s.argsCache.Store(string(schema), args)
	}
	return args
}

const maxCachedSchemas = 256

// split cuts s into at most n pieces of nearly equal length, on UTF-8
// boundaries. It returns fewer pieces (one per rune at most) for short
// text, and none for empty text.
func split(s string, n int) []string {
	if s == "" || n <= 0 {
		return nil
	}
	n = min(n, utf8.RuneCountInString(s))
	pieces := make([]string, 0, n)
	start := 0
	for i := 1; i <= n; i++ {
		end := i * len(s) / n
		for end < len(s) && !utf8.RuneStart(s[end]) {
			end++
		}
		if end > start {
			pieces = append(pieces, s[start:end])
			start = end
		}
	}
	return pieces
}
