// Package llmsdk holds the LLM gateway's interoperability tests with the
// official Go SDKs of both dialects (github.com/openai/openai-go and
// github.com/anthropics/anthropic-sdk-go) as its clients.
//
// Each test starts a gateway in process, in front of a provider of either
// dialect on 127.0.0.1, and drives it only through an SDK: every
// client/provider pair (OpenAI or Anthropic on each side), JSON and
// streaming read with the SDKs' own accumulators, tool calls and tool
// results, images, system prompts, stop reasons, usage, errors, and HTTP/1.1
// and h2c on both hops. The SDKs are the judges: if one of them parses an
// answer into what the provider meant, the gateway spoke its dialect.
//
// Providers are the mock provider (internal/mockllm), which is exact about
// each dialect, and, for what it does not do (parallel tool calls, fixed
// stop reasons and usage, a stream that ends early but cleanly), small
// scripted providers that record each request and answer fixed JSON or
// events in the dialect of the path they were called on.
//
// The package holds tests only.
package llmsdk
