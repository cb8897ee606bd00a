package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/llm/translate"
)

// Provider keys shaped like real ones. The second is a base64 token, with
// the '/', '+' and '=' that JSON and URL escaping change.
const (
	leakyOpenAIKey    = "sk-proj-Q9vX2mTq7LwZ4cRb8NfY1hKd6PsJ3uEa5GoI0tVy"
	leakyAnthropicKey = "tok/Zk7+Qm3vW9xR2bT5yN8cL1pF4hJ6sD0g=="
)

// echoKey is a provider error message, as the text of a JSON string (its
// escapes already written), that gives away key in every way a provider,
// or a proxy in front of one, has been seen to or plausibly could.
func echoKey(key string) string {
	var b strings.Builder
	b.WriteString("Incorrect API key provided: Bearer " + key + ".")
	b.WriteString(" As JSON escapes: ")
	for _, c := range key {
		fmt.Fprintf(&b, `\u%04x`, c)
	}
	b.WriteString(". With escaped slashes: " + strings.ReplaceAll(key, "/", `\/`))
	b.WriteString(". Shown in part: " + key[:10] + "****" + key[len(key)-10:])
	b.WriteString(". Cut short: " + key[:len(key)-6])
	b.WriteString(". Its end: ..." + key[len(key)-12:])
	b.WriteString(". In a URL: https://example.test/?key=" + url.QueryEscape(key))
	b.WriteString(" and byte by byte: ")
	for i := 0; i < len(key); i++ {
		fmt.Fprintf(&b, "%%%02X", key[i])
	}
	b.WriteString(". Escaped twice (JSON in JSON): ")
	for _, c := range key {
		fmt.Fprintf(&b, `\\u%04x`, c)
	}
	b.WriteString(". In quoted JSON: {\\\"api_key\\\":\\\"" + strings.ReplaceAll(key, "/", `\\\/`) + "\\\"}")
	return b.String()
}

var (
	jsonEscape = regexp.MustCompile(`\\u([0-9a-fA-F]{4})|\\(.)`)
	urlEscape  = regexp.MustCompile(`%([0-9a-fA-F]{2})`)
)

func unJSON(s string) string {
	return jsonEscape.ReplaceAllStringFunc(s, func(m string) string {
		if len(m) == 6 {
			n, _ := strconv.ParseUint(m[2:], 16, 32)
			return string(rune(n))
		}
		return m[1:]
	})
}

func unURL(s string) string {
	return urlEscape.ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.ParseUint(m[1:], 16, 8)
		return string([]byte{byte(n)})
	})
}

// leaks reports whether text shows key or a piece of it (its first or last
// eight characters), as it is or once escapes are undone. It is written
// apart from the gateway's own search, so as not to share its blind spots.
func leaks(text, key string) bool {
	j := unJSON(text)
	for _, t := range []string{text, j, unJSON(j), unURL(text), unURL(j), unJSON(unURL(text)), unURL(unJSON(j))} {
		if strings.Contains(t, key[:8]) || strings.Contains(t, key[len(key)-8:]) {
			return true
		}
	}
	return false
}

// sentKey is the credential a provider of dialect d received.
func sentKey(d translate.Dialect, r *http.Request) string {
	if d == translate.Anthropic {
		return r.Header.Get("X-Api-Key")
	}
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// errorJSON is dialect d's error body with message msg (JSON string text).
// The OpenAI one also echoes the key in param, where the fast path
// forwards it.
func errorJSON(d translate.Dialect, msg, key string) string {
	if d == translate.Anthropic {
		return `{"type":"error","error":{"type":"authentication_error","message":"` + msg + `"}}`
	}
	return `{"error":{"message":"` + msg + `","type":"invalid_request_error","param":"` + strings.ReplaceAll(key, "/", `\/`) + `","code":"invalid_api_key"}}`
}

// leakyStream is a stream that goes well, carries the key in a content
// delta (where only a provider echoing request headers would put it), then
// fails with an error event echoing the key, then carries on with the key.
func leakyStream(d translate.Dialect, key string, openAIEventName bool) []string {
	msg := echoKey(key)
	if d == translate.Anthropic {
		events := anthropicEvents("claude-x")
		ev := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
		return append(events[:3:3],
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"your key is `+key+`"}}`),
			ev("error", errorJSON(d, msg, key)),
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+key+`"}}`),
			events[len(events)-1])
	}
	events := openAIEvents("gpt-4o")
	errEv := "data: " + errorJSON(d, msg, key) + "\n\n"
	if openAIEventName {
		errEv = "event: error\n" + errEv
	}
	return append(events[:1:1],
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"your key is `+key+`"},"finish_reason":null}]}`+"\n\n",
		errEv,
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"`+key+`"},"finish_reason":null}]}`+"\n\n",
		"data: [DONE]\n\n")
}

// writeSplit writes events a few bytes at a time, flushing each piece, so
// that a key falls across reads.
func writeSplit(w http.ResponseWriter, events []string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	all := strings.Join(events, "")
	for i := 0; i < len(all); i += 7 {
		io.WriteString(w, all[i:min(i+7, len(all))])
		w.(http.Flusher).Flush()
	}
}

// TestProviderSecretsNeverShown: a provider that echoes the key the gateway
// sent it, in every form echoKey knows, in its error bodies, its error
// events, its headers and even its answers, through both dialects, the fast
// and the translated path, JSON and streams, on 400, 401 and 500. Neither
// what a client receives nor the gateway's log may show the key or a piece
// of it.
func TestProviderSecretsNeverShown(t *testing.T) {
	h := newHarness(t, harnessConfig{edit: func(o *Options) {
		o.Providers[0].APIKey = leakyOpenAIKey
		o.Providers[1].APIKey = leakyAnthropicKey
	}})
	c := client(false)
	keys := []string{leakyOpenAIKey, leakyAnthropicKey}
	check := func(t *testing.T, where, text string) {
		t.Helper()
		for _, k := range keys {
			if leaks(text, k) {
				t.Errorf("%s shows a provider key (%s…):\n%s", where, k[:8], text)
			}
		}
	}
	checkReply := func(t *testing.T, rp reply) {
		t.Helper()
		check(t, "the body", string(rp.raw))
		for name, vs := range rp.header {
			check(t, "header "+name, strings.Join(vs, "\n"))
		}
		for name, vs := range rp.trailer {
			check(t, "trailer "+name, strings.Join(vs, "\n"))
		}
	}
	echoHeaders := func(w http.ResponseWriter, key string) {
		w.Header().Set("Request-Id", key)
		w.Header().Set("X-Request-Id", "req_"+url.QueryEscape(key))
		w.Header().Set("Retry-After", key)
	}

	type tcase struct {
		name    string
		stream  bool
		status  map[translate.Dialect]int // what the client gets, by the provider's dialect; 0: the provider's status
		handler func(pd translate.Dialect) func(w http.ResponseWriter, r *http.Request, _ []byte)
	}
	var cases []tcase
	for _, status := range []int{400, 401, 500} {
		want := status
		if status == 401 {
			want = 502 // the gateway's own key was refused
		}
		for _, stream := range []bool{false, true} {
			cases = append(cases, tcase{
				name: fmt.Sprintf("%d JSON error/stream=%v", status, stream), stream: stream,
				status: map[translate.Dialect]int{translate.OpenAI: want, translate.Anthropic: want},
				handler: func(pd translate.Dialect) func(w http.ResponseWriter, r *http.Request, _ []byte) {
					return func(w http.ResponseWriter, r *http.Request, _ []byte) {
						key := sentKey(pd, r)
						echoHeaders(w, key)
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(status)
						io.WriteString(w, errorJSON(pd, echoKey(key), key))
					}
				},
			})
		}
		cases = append(cases, tcase{
			name:   fmt.Sprintf("%d text error", status),
			status: map[translate.Dialect]int{translate.OpenAI: want, translate.Anthropic: want},
			handler: func(pd translate.Dialect) func(w http.ResponseWriter, r *http.Request, _ []byte) {
				return func(w http.ResponseWriter, r *http.Request, _ []byte) {
					key := sentKey(pd, r)
					echoHeaders(w, key)
					w.Header().Set("Content-Type", "text/html")
					w.WriteHeader(status)
					io.WriteString(w, "<html><body>"+echoKey(key)+" Authorization: Bearer "+key+"</body></html>")
				}
			},
		})
	}
	cases = append(cases, tcase{
		name:   "answer with the key",
		status: map[translate.Dialect]int{translate.OpenAI: 200, translate.Anthropic: 200},
		handler: func(pd translate.Dialect) func(w http.ResponseWriter, r *http.Request, _ []byte) {
			return func(w http.ResponseWriter, r *http.Request, _ []byte) {
				key := sentKey(pd, r)
				echoHeaders(w, key)
				w.Header().Set("Content-Type", "application/json; key="+key)
				body := openAIJSON("gpt-4o")
				if pd == translate.Anthropic {
					body = anthropicJSON("claude-x")
				}
				io.WriteString(w, strings.Replace(body, "Paris.", "your key is "+key, 1))
			}
		},
	})
	for _, variant := range []string{"whole", "split", "openai event: error"} {
		cases = append(cases, tcase{
			name: "error event mid-stream/" + variant, stream: true,
			status: map[translate.Dialect]int{translate.OpenAI: 200, translate.Anthropic: 200},
			handler: func(pd translate.Dialect) func(w http.ResponseWriter, r *http.Request, _ []byte) {
				return func(w http.ResponseWriter, r *http.Request, _ []byte) {
					key := sentKey(pd, r)
					echoHeaders(w, key)
					events := leakyStream(pd, key, variant == "openai event: error")
					if variant == "split" {
						writeSplit(w, events)
					} else {
						writeEvents(w, events)
					}
				}
			},
		})
	}

	for _, tc := range cases {
		for _, pd := range dialects {
			fp, model := h.openai, "gpt-4o"
			if pd == translate.Anthropic {
				fp, model = h.anthropic, "claude-x"
			}
			fp.setHandler(tc.handler(pd))
			for _, cd := range dialects {
				path := "fast"
				if cd != pd {
					path = "translated"
				}
				t.Run(tc.name+"/"+string(pd)+"-provider/"+path, func(t *testing.T) {
					rp := read(t, cd, h.post(t, c, cd, endpoint(cd), requestBody(cd, model, tc.stream)))
					if rp.status != tc.status[pd] {
						t.Errorf("status %d, want %d\n%s", rp.status, tc.status[pd], rp.raw)
					}
					checkReply(t, rp)
					// The provider's words still reach the client, with
					// the key masked: the scrubbing hid only the key.
					if !strings.Contains(string(rp.raw), RedactedMark) {
						t.Errorf("the client did not get the provider's message, masked:\n%s", rp.raw)
					}
				})
			}
		}
	}
	h.openai.setHandler(nil)
	h.anthropic.setHandler(nil)
	check(t, "the gateway's log", h.logs.String())
	if !strings.Contains(h.logs.String(), RedactedMark) {
		t.Errorf("the log has no masked provider message:\n%s", h.logs.String())
	}
}
