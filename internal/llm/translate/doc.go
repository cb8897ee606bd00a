// Package translate converts requests, responses, errors and streams between
// the OpenAI chat-completions dialect and the Anthropic messages dialect, so
// the LLM gateway can serve a client of one dialect from a provider of the
// other. It holds no connections and no goroutines: the gateway feeds it
// bytes and events.
//
// # What has no equivalent
//
// Parameters that only tune, log or cache a request are dropped and named in
// Translated.Dropped, or rejected with a 400 when Options.Strict is set:
//
//   - OpenAI to Anthropic: seed, frequency_penalty, presence_penalty,
//     logit_bias, logprobs, top_logprobs, response_format, reasoning_effort,
//     metadata, store, service_tier, prediction, modalities, audio, any
//     unknown top-level field, messages[].name, an assistant's
//     reasoning_content (a thinking block needs a signature the client never
//     had), image_url.detail and tools[].function.strict. A temperature above
//     1 is clamped to 1 (OpenAI's range is 0–2, Anthropic's 0–1).
//   - Anthropic to OpenAI: top_k, thinking, service_tier, any unknown
//     top-level field, metadata other than user_id, every cache_control
//     (OpenAI caches prompts by itself; the client loses the explicit
//     breakpoints), citations, thinking and redacted_thinking blocks in
//     history, and a tool result's is_error (the content still says what
//     went wrong).
//
// Content and tools that cannot be expressed are always rejected with a 400
// naming the field, since dropping them would silently change what the
// model is asked: OpenAI input_audio parts, uploaded file ids, files other
// than PDF or plain text, legacy functions/function_call, n other than 1,
// non-function tools; Anthropic server tools (web search, code execution…),
// URL or file-id documents, images inside tool results, and server-tool
// blocks in history.
//
// In responses, Anthropic redacted_thinking and server-tool blocks have no
// OpenAI form and are left out; the cache-write token count has no OpenAI
// field and is only part of prompt_tokens; pause_turn becomes "stop". OpenAI
// cannot say which stop sequence matched, so Anthropic clients get end_turn
// rather than stop_sequence.
//
// # Reasoning
//
// The OpenAI chat-completions API has no field for a model's reasoning.
// Anthropic thinking is returned to OpenAI clients in `reasoning_content`
// on the message (and on stream deltas), the de-facto field several
// OpenAI-compatible servers use; it never goes into `content`. The reverse
// maps `reasoning_content` (or `reasoning`) from an OpenAI-compatible
// provider to an Anthropic `thinking` block, with an empty signature since
// the provider gave none.
//
// # Identifiers
//
// Message ids swap prefixes ("msg_abc" <-> "chatcmpl-abc") so that they map
// onto each other; tool call ids are kept as they are both ways, since both
// APIs accept any id in history.
//
// The package depends on sse for stream framing and on nothing else of ours.
package translate
