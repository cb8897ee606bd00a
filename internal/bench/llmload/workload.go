// Package llmload is the LLM load generator behind `strait bench llm`: an
// open-loop schedule of chat requests in the OpenAI or Anthropic dialect,
// over HTTP/1.1 (a connection per request in flight) or h2c (over a fixed
// number of connections), with latency measured from each request's
// intended send time and streams timed to their first and final events.
package llmload

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Dialects.
const (
	OpenAI    = "openai"
	Anthropic = "anthropic"
)

// Workload describes one run. It is written, whole, into the result (the
// API key is not).
type Workload struct {
	// URL is the base URL (scheme, host, port): the gateway or the
	// provider. Requests go to URL + /v1/chat/completions or /v1/messages.
	URL     string `json:"url"`
	APIKey  string `json:"-"`
	Dialect string `json:"dialect"`
	Model   string `json:"model"`
	// Rate is the measured rate in requests per second.
	Rate float64 `json:"target_rate"`
	// RampFrom is the rate the warm-up starts at; it climbs linearly to
	// Rate over Warmup. 0 or Rate means no ramp.
	RampFrom float64       `json:"ramp_from"`
	Warmup   time.Duration `json:"warmup_ns"`
	Duration time.Duration `json:"duration_ns"`
	// Timeout bounds each request, from when it is sent.
	Timeout time.Duration `json:"timeout_ns"`
	Stream  bool          `json:"stream"`
	// H2C speaks HTTP/2 without TLS over Conns connections; otherwise
	// HTTP/1.1 with a connection per request in flight.
	H2C   bool `json:"h2c"`
	Conns int  `json:"conns"`
	// RequestBytes is the approximate size of each request body.
	RequestBytes int `json:"request_bytes"`
	MaxTokens    int `json:"max_tokens"`
	// MaxInflight caps requests outstanding at once; a request due while
	// the cap is reached is not sent, and counted as due but unsent.
	MaxInflight int           `json:"max_inflight"`
	Window      time.Duration `json:"window_ns"`
	// Insecure skips TLS certificate verification for https URLs.
	Insecure bool `json:"insecure,omitempty"`
}

// DefaultWorkload is 100 requests a second of about 0.5 KB, JSON answers,
// HTTP/1.1, for 30 s after a 5 s warm-up.
func DefaultWorkload() Workload {
	return Workload{
		URL: "http://127.0.0.1:8080", Dialect: OpenAI, Model: "gpt-4o-mini", Rate: 100,
		Warmup: 5 * time.Second, Duration: 30 * time.Second, Timeout: 30 * time.Second,
		Conns: 4, RequestBytes: 512, MaxTokens: 256, MaxInflight: 50000, Window: 10 * time.Second,
	}
}

// Validate reports every bad setting at once, naming the flag.
func (w Workload) Validate() error {
	var errs []error
	bad := func(flag, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, args...)))
	}
	if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("url", "%q: want http://host:port or https://host:port", w.URL)
	} else if w.H2C && u.Scheme != "http" {
		bad("h2c", "is HTTP/2 without TLS: use an http:// URL (https:// negotiates HTTP/2 by itself)")
	}
	if w.Dialect != OpenAI && w.Dialect != Anthropic {
		bad("dialect", "%q: use openai or anthropic", w.Dialect)
	}
	if strings.TrimSpace(w.Model) == "" {
		bad("model", "give the model to ask for")
	}
	if w.Rate <= 0 {
		bad("rate", "must be above 0 requests per second")
	}
	if w.RampFrom < 0 {
		bad("ramp-from", "must not be negative")
	}
	if w.Warmup < 0 {
		bad("warmup", "must not be negative")
	}
	if w.Duration <= 0 {
		bad("duration", "must be positive")
	}
	if w.Timeout <= 0 {
		bad("timeout", "must be positive")
	}
	if w.H2C && w.Conns < 1 {
		bad("conns", "h2c needs at least one connection")
	}
	if w.RequestBytes < 0 || w.RequestBytes > 16<<20 {
		bad("request-bytes", "must be between 0 and 16 MiB")
	}
	if w.MaxTokens < 1 {
		bad("max-tokens", "must be at least 1")
	}
	if w.MaxInflight < 1 {
		bad("max-inflight", "must be at least 1")
	}
	if w.Window <= 0 {
		bad("window", "must be positive")
	}
	return errors.Join(errs...)
}
