package translate

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"time"
)

// finishReason maps an Anthropic stop_reason to an OpenAI finish_reason.
// Nothing unknown passes through raw: an unknown reason is "stop". A turn
// that made tool calls reports "tool_calls" unless it was cut short.
func finishReason(stopReason string, madeToolCalls bool) string {
	var r string
	switch stopReason {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "refusal":
		return "content_filter"
	case "tool_use":
		r = "tool_calls"
	default: // end_turn, stop_sequence, pause_turn (no OpenAI equivalent), unknown
		r = "stop"
	}
	if madeToolCalls {
		r = "tool_calls"
	}
	return r
}

// stopReason maps an OpenAI finish_reason to an Anthropic stop_reason, with
// the same rules as finishReason.
func stopReason(finish string, madeToolCalls bool) string {
	var r string
	switch finish {
	case "length":
		return "max_tokens"
	case "content_filter":
		return "refusal"
	case "tool_calls", "function_call":
		r = "tool_use"
	default: // stop, unknown
		r = "end_turn"
	}
	if madeToolCalls {
		r = "tool_use"
	}
	return r
}

const (
	openAIIDPrefix    = "chatcmpl-"
	anthropicIDPrefix = "msg_"
)

// openAIID gives an Anthropic message id the OpenAI prefix ("msg_abc" ->
// "chatcmpl-abc"), so that the two map onto each other.
func openAIID(id string) string {
	if id == "" {
		id = newID()
	}
	return openAIIDPrefix + strings.TrimPrefix(id, anthropicIDPrefix)
}

// anthropicID is the reverse of openAIID.
func anthropicID(id string) string {
	if id == "" {
		id = newID()
	}
	return anthropicIDPrefix + strings.TrimPrefix(id, openAIIDPrefix)
}

// newID makes an id for a response whose provider gave none. A variable so
// tests can make it deterministic.
var newID = func() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "strait" + hex.EncodeToString(b[:])
}

// now is the clock for OpenAI's created field, a variable for tests.
var now = time.Now
