// Package mockllm is a mock LLM provider for tests and benchmarks: one HTTP
// server that speaks both the OpenAI chat completions dialect
// (POST /v1/chat/completions) and the Anthropic Messages dialect
// (POST /v1/messages, POST /v1/messages/count_tokens), and lists models at
// GET /v1/models, over HTTP/1.1, cleartext HTTP/2 (prior knowledge and
// Upgrade: h2c) and TLS (HTTP/2 by ALPN).
//
// It is the fixed point of every LLM measurement, so it is exact where a
// client can tell: each dialect's JSON objects, stream events and their
// order, error shapes and statuses, and usage counts that agree between a
// stream and the JSON answer to the same request. Answers are synthetic and
// deterministic: a fixed text (or, when the request offers tools and the
// user spoke last, a call of one tool with arguments generated from its
// JSON schema), after a configured latency, with optional jitter, latency
// spikes, injected errors and windows of 429s.
//
// The text is whole words ending in a full stop. max_tokens cuts it at the
// end of a word (finish_reason length, stop_reason max_tokens; only a first
// word longer than the budget is cut inside), and the first stop sequence
// found in it cuts it before the sequence; tool calls are never cut.
//
// Token counts are estimates, deterministic and the same in both dialects
// for the same conversation: a quarter of the bytes of the message text
// (system prompt, text content, tool results, tool-call names and
// arguments), rounded up, at least 1. Tool definitions are not counted.
//
// Not modelled: n > 1 (there is one choice), parallel tool calls (one call
// at most), thinking blocks, logprobs, response_format (the text is not
// JSON), prompt caching (cache counts are 0), and the anthropic-version
// header (not required). Images and documents count no tokens.
//
// It is built to outlast the gateway in front of it: the reply text and its
// stream deltas are rendered once, at New; counters are atomics, and
// nothing on a request's path takes a lock shared with other requests.
// Prior-knowledge h2c, what load generators speak, is served by a lean
// HTTP/2 engine of its own (lean.go): one goroutine for every connection,
// polling them every 2 ms while anything is in flight, which answers a
// plain chat completion or message without a goroutine or timer of its
// own and runs the ordinary handler for everything else.
//
// It imports nothing of Strait's. Only tests, benchmarks and the CLI's
// `strait mock llm` may import it; no gateway package may
// (internal/archtest enforces that).
package mockllm
