package translate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/straitgw/strait/internal/llm/jsonscan"
)

// marshal is json.Marshal without HTML escaping, so "<" in a prompt stays
// "<" on the wire: how translated requests were written before
// appendOARequest and appendANRequest, kept as their reference.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// encoderEdgeCases are request bodies for what the hand-written writers
// must get exactly as encoding/json did: every escape, invalid UTF-8,
// U+2028, floats in and out of exponent form, whitespace inside raw
// values, nulls and empty values, every block and part kind.
var encoderEdgeCases = []struct {
	from Dialect
	body string
}{
	{OpenAI, `{"model":"m","messages":[{"role":"system","content":"a\b\f\n\r\t\u0001\u001f \"q\" \\ <>& \u2028\u2029 é 😀"},{"role":"user","content":"x\u007f\u00ff"}]}`},
	{OpenAI, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"bad \xff\xfe utf8 \xe2\x80\"}],\"user\":\"u\xc3\"}"},
	{OpenAI, `{"model":"m","temperature":1e-7,"top_p":0.000001,"messages":[{"role":"user","content":"x"}]}`},
	{OpenAI, `{"model":"m","temperature":0,"top_p":1e-300,"messages":[{"role":"user","content":"x"}]}`},
	{OpenAI, `{"model":"m","temperature":0.30000000000000004,"top_p":0.95,"max_tokens":7,"stop":"END","messages":[{"role":"user","content":"x"}]}`},
	{OpenAI, `{"model":"m","temperature":-0.0,"top_p":123456789012345678901234,"stop":["a","\n"],"messages":[{"role":"user","content":"x"}]}`},
	{OpenAI, `{"model":"m","stream":true,"stream_options":{"include_usage":true},"user":"me","messages":[
		{"role":"developer","content":[{"type":"text","text":"one"},{"type":"text","text":""},{"type":"text","text":"two"}]},
		{"role":"system","content":"three"},
		{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO","detail":"low"}},
			{"type":"image_url","image_url":{"url":"https://example.com/a.png"}},
			{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBE","filename":"a.pdf"}},
			{"type":"file","file":{"file_data":"data:text/plain;base64,aGVsbG8=","filename":"a.txt"}}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":" { \"a\" : [ 1 , \"x y\" ] } "}},
			{"id":"c2","function":{"name":"g","arguments":""}},{"id":"c3","function":{"name":"h","arguments":{"k": "v"}}}]},
		{"role":"tool","tool_call_id":"c1","content":"r1"},
		{"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"r2"}]},
		{"role":"tool","tool_call_id":"c3","content":""},
		{"role":"user","content":"after"},
		{"role":"assistant","content":[{"type":"refusal","refusal":"no"},{"type":"text","text":"yes"}]}],
		"tools":[{"type":"function","function":{"name":"f","description":"d <b>","parameters":{ "type" : "object",
			"properties" : { "a b" : { "type" : "string" } } },"strict":true}},{"type":"function","function":{"name":"g"}}],
		"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false}`},
	{OpenAI, `{"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"none","parallel_tool_calls":false}`},
	{OpenAI, `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":"required"}`},
	{OpenAI, `{"model":"m","messages":[{"role":"user","content":"x"}],"parallel_tool_calls":false}`},
	{OpenAI, `{"model":"m","messages":[{"role":"system","content":"only a system prompt"}]}`},
	{Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a\b\f\u0000\u2028 <>& \"\\"}],"system":"s\u2029"}`},
	{Anthropic, "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}],\"metadata\":{\"user_id\":\"\xc3(\"}}"},
	{Anthropic, `{"model":"m","max_tokens":1,"temperature":1e-9,"top_p":5e-324,"stop_sequences":["x","\u0007"],"messages":[{"role":"user","content":"x"}]}`},
	{Anthropic, `{"model":"m","max_tokens":1,"temperature":1e21,"top_p":2.5e+20,"messages":[{"role":"user","content":"x"}]}`},
	{Anthropic, `{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"}]}]}`},
	{Anthropic, `{"model":"m","max_tokens":64,"stream":true,"metadata":{"user_id":"u","x":1},"system":[{"type":"text","text":"s1","cache_control":{"type":"ephemeral"}},{"type":"text","text":""},{"type":"text","text":"s2"}],
		"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}},
			{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}},
			{"type":"document","title":"t.pdf","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"}},
			{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"}},
			{"type":"document","source":{"type":"text","media_type":"text/plain","data":"plain"}}]},
		{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"text","text":"y"},{"type":"tool_use","id":"t1","name":"f","input":{ "a" : 1 }},{"type":"tool_use","id":"t2","name":"g"}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok","is_error":true},
			{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"p"},{"type":"text","text":"q"}]},
			{"type":"tool_result","tool_use_id":"t3"},{"type":"tool_result","tool_use_id":"t4","content":[]},
			{"type":"tool_result","tool_use_id":"t5","content":[{"type":"text","text":"one"}]}]},
		{"role":"assistant","content":[]}],
		"tools":[{"name":"f","description":"d","input_schema":{ "type" : "object" }},{"name":"g","type":"custom","cache_control":{"type":"ephemeral"}}],
		"tool_choice":{"type":"tool","name":"f","disable_parallel_tool_use":true}}`},
	{Anthropic, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f"}],"tool_choice":{"type":"any"}}`},
	{Anthropic, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"none","disable_parallel_tool_use":true}}`},
	{Anthropic, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t"}]}]}`},
}

// checkRequestEncoders translates body from either dialect into the
// request struct and checks that the hand-written writer's bytes are
// encoding/json's. Bodies the translation refuses have nothing to write.
func checkRequestEncoders(t *testing.T, body []byte) (checked int) {
	t.Helper()
	for _, opt := range []Options{{}, {MaxTokensCap: 1000}} {
		tr := &reqTranslation{opt: opt}
		if an, err := tr.anthropicRequest(body, "the-model\u2028<"); err == nil {
			want, werr := marshal(an)
			got, gerr := appendANRequest(nil, an)
			if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
				t.Errorf("Anthropic request written differently from encoding/json\ninput: %q\ngot:  %s (%v)\nwant: %s (%v)", body, got, gerr, want, werr)
			}
			checked++
		}
		if oa, err := tr.openAIRequest(body, "the-model\u2028<"); err == nil {
			want, werr := marshal(oa)
			got, gerr := appendOARequest(nil, oa)
			if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
				t.Errorf("OpenAI request written differently from encoding/json\ninput: %q\ngot:  %s (%v)\nwant: %s (%v)", body, got, gerr, want, werr)
			}
			checked++
		}
	}
	return checked
}

// requestEncoderInputs are the golden request inputs (which are also the
// FuzzRequest seed corpus) and the edge cases above.
func requestEncoderInputs(t testing.TB) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "request-*", "input"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden request inputs (%v)", err)
	}
	var inputs [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, b)
	}
	for _, c := range encoderEdgeCases {
		inputs = append(inputs, []byte(c.body))
	}
	return inputs
}

func TestRequestEncoderMatchesMarshal(t *testing.T) {
	inputs := requestEncoderInputs(t)
	checked := 0
	for _, in := range inputs {
		checked += checkRequestEncoders(t, in)
	}
	// Each edge case must be a request its dialect translates, or the
	// case checks nothing.
	for _, c := range encoderEdgeCases {
		tr := &reqTranslation{}
		var err error
		if c.from == OpenAI {
			_, err = tr.anthropicRequest([]byte(c.body), "m")
		} else {
			_, err = tr.openAIRequest([]byte(c.body), "m")
		}
		if err != nil {
			t.Errorf("edge case refused, so it checks nothing: %v\n%s", err, c.body)
		}
	}
	t.Logf("%d translated requests compared", checked)
}

// FuzzRequestEncoder compares the hand-written request writers with
// encoding/json on any body the translation accepts:
//
//	go test ./internal/llm/translate/ -run '^$' -fuzz FuzzRequestEncoder -fuzztime 60s
func FuzzRequestEncoder(f *testing.F) {
	for _, in := range requestEncoderInputs(f) {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkRequestEncoders(t, body)
	})
}

func TestAppendStringMatchesMarshal(t *testing.T) {
	var all []byte
	for c := range 256 {
		all = append(all, byte(c))
	}
	for _, s := range []string{"", string(all), "\u2028\u2029\ufffd", "a\xe2\x80", "\xed\xa0\x80", "\U0010ffff", "<script>&amp;"} {
		want, err := marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonscan.AppendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("jsonscan.AppendString(%q) = %s, encoding/json wrote %s", s, got, want)
		}
	}
}

func TestAppendRawMatchesMarshal(t *testing.T) {
	if got, err := appendRaw(nil, nil); err != nil || string(got) != "null" {
		t.Errorf("appendRaw(nil) = %s (%v), want null", got, err)
	}
	for _, raw := range []string{"null", ` { "a" : [ 1 , 2 ] , "b c" : " x y " } `, "\t[\n]\r", `"\" \\ "`, `{"<":"\u2028"}`} {
		want, err := marshal(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendRaw(nil, json.RawMessage(raw))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("appendRaw(%q) = %s (%v), encoding/json wrote %s", raw, got, err, want)
		}
	}
	if _, err := appendRaw(nil, json.RawMessage{}); err == nil {
		t.Error("appendRaw wrote an empty raw value instead of failing")
	}
}
