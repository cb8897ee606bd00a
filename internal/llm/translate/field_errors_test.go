package translate

import (
	"errors"
	"strings"
	"testing"
)

// leaks are fragments of encoding/json's and Go's own wording that mean a
// client was told about the gateway's internals instead of its request.
var leaks = []string{"translate.", "[]", "json:", "cannot unmarshal", "Go struct", "Go value", "struct {", "*int", "float64", "map[", "RawMessage", "want "}

// checkClientMessage fails if msg reads like a Go decoding error.
func checkClientMessage(t *testing.T, msg string) {
	t.Helper()
	for _, l := range leaks {
		if strings.Contains(msg, l) {
			t.Errorf("message %q contains %q, which names Go internals instead of the API", msg, l)
		}
	}
}

// A request of the wrong shape is answered in the API's own terms: the
// JSON path of the field (with array indices), what it must be and what it
// is, in the client's dialect's vocabulary; never a Go type.
func TestRequestShapeErrorsNameTheField(t *testing.T) {
	const hi = `{"role":"user","content":"hi"}`
	for _, tt := range []struct {
		name           string
		client         Dialect
		body           string
		param, message string
	}{
		// OpenAI chat completions.
		{"content a number", OpenAI,
			`{"model":"m","messages":[` + hi + `,{"role":"assistant","content":"ok"},{"role":"user","content":7}]}`,
			"messages[2].content", "messages[2].content must be a string or an array of content parts, not a number"},
		{"content an object", OpenAI,
			`{"model":"m","messages":[{"role":"user","content":{"type":"text","text":"hi"}}]}`,
			"messages[0].content", "messages[0].content must be a string or an array of content parts, not an object"},
		{"system content a number", OpenAI,
			`{"model":"m","messages":[{"role":"system","content":5},` + hi + `]}`,
			"messages[0].content", "messages[0].content must be a string or an array of content parts, not a number"},
		{"tool content a boolean", OpenAI,
			`{"model":"m","messages":[` + hi + `,{"role":"tool","tool_call_id":"c","content":true}]}`,
			"messages[1].content", "messages[1].content must be a string or an array of content parts, not a boolean"},
		{"part text a number", OpenAI,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":5}]}]}`,
			"messages[0].content[1].text", "messages[0].content[1].text must be a string, not a number"},
		{"part not an object", OpenAI,
			`{"model":"m","messages":[{"role":"user","content":["hi"]}]}`,
			"messages[0].content[0]", "messages[0].content[0] must be an object, not a string"},
		{"image_url a string", OpenAI,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":"https://x/y.png"}]}]}`,
			"messages[0].content[0].image_url", "messages[0].content[0].image_url must be an object, not a string"},
		{"messages an object", OpenAI,
			`{"model":"m","messages":{"role":"user","content":"hi"}}`,
			"messages", "messages must be an array of messages, not an object"},
		{"message a string", OpenAI,
			`{"model":"m","messages":[` + hi + `,"hello"]}`,
			"messages[1]", "messages[1] must be an object, not a string"},
		{"role a number", OpenAI,
			`{"model":"m","messages":[` + hi + `,{"role":1,"content":"x"}]}`,
			"messages[1].role", "messages[1].role must be a string, not a number"},
		{"tool call name a number", OpenAI,
			`{"model":"m","messages":[` + hi + `,{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f"}},{"id":"c","function":{"name":7}}]}]}`,
			"messages[1].tool_calls[1].function.name", "messages[1].tool_calls[1].function.name must be a string, not a number"},
		{"tool_calls an object", OpenAI,
			`{"model":"m","messages":[` + hi + `,{"role":"assistant","tool_calls":{"id":"c"}}]}`,
			"messages[1].tool_calls", "messages[1].tool_calls must be an array of tool calls, not an object"},
		{"max_tokens a string", OpenAI,
			`{"model":"m","messages":[` + hi + `],"max_tokens":"100"}`,
			"max_tokens", "max_tokens must be an integer, not a string"},
		{"max_completion_tokens a fraction", OpenAI,
			`{"model":"m","messages":[` + hi + `],"max_completion_tokens":1.5}`,
			"max_completion_tokens", "max_completion_tokens must be an integer, not 1.5"},
		{"max_tokens out of range", OpenAI,
			`{"model":"m","messages":[` + hi + `],"max_tokens":1e99}`,
			"max_tokens", "max_tokens is 1e99, which is out of range for an integer"},
		{"n a string", OpenAI,
			`{"model":"m","messages":[` + hi + `],"n":"2"}`,
			"n", "n must be an integer, not a string"},
		{"temperature out of range", OpenAI,
			`{"model":"m","messages":[` + hi + `],"temperature":1e999}`,
			"temperature", "temperature is 1e999, which is out of range for a number"},
		{"temperature a string", OpenAI,
			`{"model":"m","messages":[` + hi + `],"temperature":"hot"}`,
			"temperature", "temperature must be a number, not a string"},
		{"stream a string", OpenAI,
			`{"model":"m","messages":[` + hi + `],"stream":"yes"}`,
			"stream", "stream must be a boolean, not a string"},
		{"stream_options.include_usage a string", OpenAI,
			`{"model":"m","messages":[` + hi + `],"stream":true,"stream_options":{"include_usage":"yes"}}`,
			"stream_options.include_usage", "stream_options.include_usage must be a boolean, not a string"},
		{"stop an object", OpenAI,
			`{"model":"m","messages":[` + hi + `],"stop":{"a":1}}`,
			"stop", "stop must be a string or an array of strings, not an object"},
		{"stop element a number", OpenAI,
			`{"model":"m","messages":[` + hi + `],"stop":["x",1]}`,
			"stop[1]", "stop[1] must be a string, not a number"},
		{"user a number", OpenAI,
			`{"model":"m","messages":[` + hi + `],"user":5}`,
			"user", "user must be a string, not a number"},
		{"parallel_tool_calls a string", OpenAI,
			`{"model":"m","messages":[` + hi + `],"parallel_tool_calls":"no"}`,
			"parallel_tool_calls", "parallel_tool_calls must be a boolean, not a string"},
		{"tools an object", OpenAI,
			`{"model":"m","messages":[` + hi + `],"tools":{"type":"function"}}`,
			"tools", "tools must be an array of tools, not an object"},
		{"tool function a string", OpenAI,
			`{"model":"m","messages":[` + hi + `],"tools":[{"type":"function","function":"f"}]}`,
			"tools[0].function", "tools[0].function must be an object, not a string"},
		{"tool parameters a string", OpenAI,
			`{"model":"m","messages":[` + hi + `],"tools":[{"type":"function","function":{"name":"f","parameters":"{}"}}]}`,
			"tools[0].function.parameters", "tools[0].function.parameters must be a JSON Schema object, not a string"},
		{"body an array", OpenAI, `[{"model":"m"}]`,
			"", "the request body must be a JSON object, not an array"},
		{"body cut short", OpenAI, `{"model": "gpt-4o", "messages": [`,
			"", "the request body is not valid JSON at byte 33: expected a value, found the end of the body"},
		{"body with a stray comma", OpenAI, `{"model":"m","messages":[` + hi + `,]}`,
			"", "the request body is not valid JSON at byte 56: expected a value, found ']'"},

		// Anthropic Messages.
		{"content a number", Anthropic,
			`{"model":"m","max_tokens":9,"messages":[` + hi + `,{"role":"assistant","content":"ok"},{"role":"user","content":7}]}`,
			"messages[2].content", "messages[2].content must be a string or an array of content blocks, not a number"},
		{"block text a number", Anthropic,
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":5}]}]}`,
			"messages[0].content[1].text", "messages[0].content[1].text must be a string, not a number"},
		{"block not an object", Anthropic,
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[1]}]}`,
			"messages[0].content[0]", "messages[0].content[0] must be an object, not a number"},
		{"image source a string", Anthropic,
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"image","source":"https://x/y.png"}]}]}`,
			"messages[0].content[0].source", "messages[0].content[0].source must be an object, not a string"},
		{"is_error a string", Anthropic,
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":"yes"}]}]}`,
			"messages[0].content[0].is_error", "messages[0].content[0].is_error must be a boolean, not a string"},
		{"tool_result content a number", Anthropic,
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":5}]}]}`,
			"messages[0].content[0].content", "messages[0].content[0].content must be a string or an array of content blocks, not a number"},
		{"tool_result inner text an object", Anthropic,
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":{}}]}]}]}`,
			"messages[0].content[0].content[0].text", "messages[0].content[0].content[0].text must be a string, not an object"},
		{"role a number", Anthropic,
			`{"model":"m","max_tokens":9,"messages":[{"role":1,"content":"x"}]}`,
			"messages[0].role", "messages[0].role must be a string, not a number"},
		{"messages a string", Anthropic,
			`{"model":"m","max_tokens":9,"messages":"hi"}`,
			"messages", "messages must be an array of messages, not a string"},
		{"system a number", Anthropic,
			`{"model":"m","max_tokens":9,"system":5,"messages":[` + hi + `]}`,
			"system", "system must be a string or an array of text blocks, not a number"},
		{"system block text a number", Anthropic,
			`{"model":"m","max_tokens":9,"system":[{"type":"text","text":1}],"messages":[` + hi + `]}`,
			"system[0].text", "system[0].text must be a string, not a number"},
		{"max_tokens a string", Anthropic,
			`{"model":"m","max_tokens":"9","messages":[` + hi + `]}`,
			"max_tokens", "max_tokens must be an integer, not a string"},
		{"top_p a string", Anthropic,
			`{"model":"m","max_tokens":9,"top_p":"high","messages":[` + hi + `]}`,
			"top_p", "top_p must be a number, not a string"},
		{"stop_sequences a string", Anthropic,
			`{"model":"m","max_tokens":9,"stop_sequences":"END","messages":[` + hi + `]}`,
			"stop_sequences", "stop_sequences must be an array of strings, not a string"},
		{"tool name a number", Anthropic,
			`{"model":"m","max_tokens":9,"messages":[` + hi + `],"tools":[{"name":1,"input_schema":{"type":"object"}}]}`,
			"tools[0].name", "tools[0].name must be a string, not a number"},
		{"tool input_schema a string", Anthropic,
			`{"model":"m","max_tokens":9,"messages":[` + hi + `],"tools":[{"name":"f","input_schema":"object"}]}`,
			"tools[0].input_schema", "tools[0].input_schema must be a JSON Schema object, not a string"},
		{"tool_choice a string", Anthropic,
			`{"model":"m","max_tokens":9,"messages":[` + hi + `],"tool_choice":"auto"}`,
			"tool_choice", "tool_choice must be an object with a type, not a string"},
		{"tool_choice type a number", Anthropic,
			`{"model":"m","max_tokens":9,"messages":[` + hi + `],"tool_choice":{"type":1}}`,
			"tool_choice.type", "tool_choice.type must be a string, not a number"},
		{"metadata a string", Anthropic,
			`{"model":"m","max_tokens":9,"messages":[` + hi + `],"metadata":"x"}`,
			"metadata", "metadata must be an object, not a string"},
		{"metadata.user_id a number", Anthropic,
			`{"model":"m","max_tokens":9,"messages":[` + hi + `],"metadata":{"user_id":5}}`,
			"metadata.user_id", "metadata.user_id must be a string, not a number"},
		{"body a string", Anthropic, `"hello"`,
			"", "the request body must be a JSON object, not a string"},
		{"body with a bad escape", Anthropic, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"a\qb"}]}`,
			"", `the request body is not valid JSON at byte 67: bad escape \q in a string`},
	} {
		t.Run(string(tt.client)+"/"+tt.name, func(t *testing.T) {
			provider := Anthropic
			if tt.client == Anthropic {
				provider = OpenAI
			}
			_, err := Request(tt.client, provider, []byte(tt.body), "up", Options{})
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v, want an *Error", err)
			}
			if e.Status != 400 || e.Kind != KindInvalidRequest {
				t.Errorf("status %d kind %q, want 400 %s", e.Status, e.Kind, KindInvalidRequest)
			}
			if e.Message != tt.message || e.Param != tt.param {
				t.Errorf("got param %q message\n  %q\nwant param %q message\n  %q", e.Param, e.Message, tt.param, tt.message)
			}
			checkClientMessage(t, e.Message)
		})
	}
}

// The same-dialect path reads only stream, and says so in the same terms.
func TestSameDialectShapeErrorsNameTheField(t *testing.T) {
	for _, d := range []Dialect{OpenAI, Anthropic} {
		_, err := Request(d, d, []byte(`{"model":"m","stream":"yes"}`), "up", Options{})
		var e *Error
		if !errors.As(err, &e) || e.Param != "stream" || e.Message != "stream must be a boolean, not a string" {
			t.Errorf("%s: %v, want stream must be a boolean, not a string", d, err)
		}
	}
}

// A provider response of the wrong shape is reported (502) with the path
// in the provider's response, never a Go type.
func TestResponseShapeErrorsNameTheField(t *testing.T) {
	for _, tt := range []struct {
		provider Dialect
		body     string
		message  string
	}{
		{OpenAI, `{"choices":[{"message":{"content":"a"}},{"message":{"content":5}}]}`,
			"the provider's response is not a valid OpenAI chat completion: choices[1].message.content must be a string, not a number"},
		{OpenAI, `{"choices":[{"message":{"content":"a"}}],"usage":{"prompt_tokens":"9"}}`,
			"the provider's response is not a valid OpenAI chat completion: usage.prompt_tokens must be an integer, not a string"},
		{OpenAI, `{"choices":{}}`,
			"the provider's response is not a valid OpenAI chat completion: choices must be an array of choices, not an object"},
		{OpenAI, `{"choices":[`,
			"the provider's response is not valid JSON at byte 12: expected a value, found the end of the body"},
		{Anthropic, `{"content":"hello"}`,
			"the provider's response is not a valid Anthropic message: content must be an array of content blocks, not a string"},
		{Anthropic, `{"content":[{"type":"text","text":1}]}`,
			"the provider's response is not a valid Anthropic message: content[0].text must be a string, not a number"},
		{Anthropic, `[]`,
			"the provider's response must be a JSON object, not an array"},
	} {
		client := OpenAI
		if tt.provider == OpenAI {
			client = Anthropic
		}
		_, err := Response(tt.provider, client, []byte(tt.body), "m")
		var e *Error
		if !errors.As(err, &e) || e.Status != 502 {
			t.Errorf("%s %s: error %v, want a 502 *Error", tt.provider, tt.body, err)
			continue
		}
		if e.Message != tt.message {
			t.Errorf("%s %s:\n got %q\nwant %q", tt.provider, tt.body, e.Message, tt.message)
		}
		checkClientMessage(t, e.Message)
	}
}
