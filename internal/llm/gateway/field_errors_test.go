package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/llm/translate"
)

// A request of the wrong shape reaches the client as a 400
// invalid_request_error in its own dialect, naming the field by its JSON
// path, whether the gateway's scanner or the translation found it; nothing
// reaches a provider, and no Go type names leak.
func TestShapeErrorsReachTheClientInItsDialect(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	c := client(false)
	for _, tt := range []struct {
		client       translate.Dialect
		body         string
		param, msgIs string
	}{
		// Translated (the claude-* route is an Anthropic provider).
		{translate.OpenAI, `{"model":"claude-x","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"ok"},{"role":"user","content":7}]}`,
			"messages[2].content", "messages[2].content must be a string or an array of content parts, not a number"},
		{translate.OpenAI, `{"model":"claude-x","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":"{}"}}]}`,
			"tools[0].function.parameters", "tools[0].function.parameters must be a JSON Schema object, not a string"},
		{translate.Anthropic, `{"model":"gpt-x","max_tokens":9,"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`,
			"messages[0].content[0].text", "messages[0].content[0].text must be a string, not a number"},
		{translate.Anthropic, `{"model":"gpt-x","max_tokens":"9","messages":[{"role":"user","content":"hi"}]}`,
			"max_tokens", "max_tokens must be an integer, not a string"},
		// Found by the gateway's scanner, before routing.
		{translate.OpenAI, `{"model":"gpt-x","messages":[`,
			"", "the request body is not valid JSON at byte 29: expected a value, found the end of the body"},
		{translate.Anthropic, `{"model":"claude-x","max_tokens":9,"messages":[{"role":"user","content":"a\qb"}]}`,
			"", `the request body is not valid JSON at byte 74: bad escape \q in a string`},
	} {
		before := h.openai.count() + h.anthropic.count()
		resp := h.post(t, c, tt.client, endpoint(tt.client), tt.body)
		rp := read(t, tt.client, resp)
		if rp.status != 400 || rp.errType != "invalid_request_error" || rp.errMsg != tt.msgIs {
			t.Errorf("%s %s:\n got %d %q %q\nwant 400 invalid_request_error %q", tt.client, tt.body, rp.status, rp.errType, rp.errMsg, tt.msgIs)
		}
		if tt.client == translate.OpenAI {
			var e struct {
				Error struct {
					Param *string `json:"param"`
				} `json:"error"`
			}
			_ = json.Unmarshal(rp.raw, &e)
			if got := e.Error.Param; (tt.param == "") != (got == nil) || got != nil && *got != tt.param {
				t.Errorf("%s: param %v, want %q", tt.body, got, tt.param)
			}
		}
		for _, leak := range []string{"translate.", "[]", "json:", "cannot unmarshal"} {
			if strings.Contains(rp.errMsg, leak) {
				t.Errorf("%s: message %q names Go internals (%q)", tt.body, rp.errMsg, leak)
			}
		}
		if h.openai.count()+h.anthropic.count() != before {
			t.Errorf("%s: a request of the wrong shape reached a provider", tt.body)
		}
	}
}
