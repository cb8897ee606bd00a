package translate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	fastjson "github.com/go-json-experiment/json/v1"
)

// FuzzFastDecode checks the premise of unmarshal: for every type this
// package decodes peers' JSON into, the fast decoder accepts exactly what
// encoding/json accepts and yields the same value. Where they disagree on
// validity, unmarshal would return a success encoding/json refuses, or an
// error for a body the gateway used to take.
func FuzzFastDecode(f *testing.F) {
	dirs, _ := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	for _, d := range dirs {
		if in, err := os.ReadFile(filepath.Join(d, "input")); err == nil {
			f.Add(in)
		}
	}
	f.Add([]byte(`{"model":"m","stop":"x","messages":[{"role":"user","content":"\xff\u00e9"}]}`))
	f.Add([]byte(`{"MODEL":"m","model":"n","max_tokens":1e3,"messages":null}`))
	f.Add([]byte(`{"choices":[{"delta":{"content":"hi"},"index":0}],"usage":{"prompt_tokens":1}}`))
	f.Add([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}`))
	for _, c := range encoderEdgeCases {
		f.Add([]byte(c.body))
	}
	for _, s := range handDecodeSeeds {
		f.Add([]byte(s))
	}
	targets := []func() any{
		func() any { return new(oaRequestIn) },
		func() any { return new(anRequestIn) },
		func() any { return new(anResponse) },
		func() any { return new(oaResponse) },
		func() any { return new(oaChunk) },
		func() any { return new(anEvent) },
		func() any { return new([]oaPart) },
		func() any { return new([]anBlockIn) },
		func() any { return new(string) },
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, newV := range targets {
			std, fast := newV(), newV()
			errStd := json.Unmarshal(body, std)
			errFast := fastjson.Unmarshal(body, fast)
			if (errStd == nil) != (errFast == nil) {
				t.Fatalf("%T: encoding/json says %v, the fast decoder %v, for %q", std, errStd, errFast, body)
			}
			if errStd == nil && !reflect.DeepEqual(std, fast) {
				t.Fatalf("%T: decoded differently from %q:\nencoding/json %+v\nfast          %+v", std, body, std, fast)
			}
			// The hand decoders: what they accept, encoding/json accepts
			// and decodes the same; what they give up on leaves v zero.
			hand := newV()
			if decodeByHand(body, hand) {
				if errStd != nil {
					t.Fatalf("%T: decoded by hand from %q, which encoding/json refuses: %v", std, body, errStd)
				}
				if !reflect.DeepEqual(std, hand) {
					t.Fatalf("%T: decoded by hand differently from %q:\nencoding/json %+v\nby hand       %+v", std, body, std, hand)
				}
			} else if !reflect.DeepEqual(hand, newV()) {
				t.Fatalf("%T: the hand decoder gave up on %q but left %+v", std, body, hand)
			}
			// And unmarshal itself: the fast value, or encoding/json's error.
			got := newV()
			if err := unmarshal(body, got); (err == nil) != (errStd == nil) ||
				(err != nil && err.Error() != errStd.Error()) {
				t.Fatalf("%T: unmarshal returned %v, encoding/json %v", std, err, errStd)
			}
		}
	})
}

// handDecodeSeeds are bodies for the hand decoders' edges: content arrays,
// escapes and surrogates, nulls everywhere a field may be, repeated and
// differently spelled keys, numbers an int field refuses, trailing data.
var handDecodeSeeds = []string{
	`[{"type":"text","text":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00"},{"type":"image_url","image_url":{"url":"https://x","detail":"high"}},null,{"type":"file","file":{"file_id":"f","filename":"n"}}]`,
	`[{"type":"text","text":"\ud83d"}]`,
	`[{"type":"text","text":"\udc00\ud83d"}]`,
	`[{"type":"text","text":"x","TEXT":"y"}]`,
	`[{"type":"text","text":"x","text":"y"}]`,
	`[{"type":"text","te_xt":"y"}]`,
	`[{"type":"text","text":null,"image_url":null,"file":null}]`,
	`[]`, `null`, `"str\u0041"`, `"a" "b"`, `"a",`, `[{"type":"text"}] x`,
	`[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"x"}],"is_error":true,"cache_control":{"type":"ephemeral"},"citations":null}]`,
	`[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA","content":[1,2.5e3,-0,true,false,null,{"a":{}}]}}]`,
	`[{"type":"image","source":null},{"type":"text","is_error":null}]`,
	`{"messages":[{"role":"user","content":"x","tool_calls":null,"name":null}],"max_tokens":1.0}`,
	`{"messages":[{"role":"user","content":"x"}],"max_tokens":1e2}`,
	`{"messages":[{"role":"user","content":"x"}],"max_tokens":-12345678901234567890}`,
	`{"messages":[{"role":"user","content":"x"}],"max_tokens":null,"temperature":null,"top_p":1e400}`,
	`{"messages":[null,{"role":"user","content":"x"}],"stop":null,"n":null,"tools":null,"user":null,"stream":null}`,
	`{"messages":[],"stop":[],"tools":[],"stream_options":{"include_usage":true,"x":1}}`,
	`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}},null]}],"stop":["a",null]}`,
	`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"},"strict":true}},null,{"type":"function","function":null}]}`,
	`{"messages":[{"role":"user","content":"x"}],"stream_options":null,"parallel_tool_calls":null,"tool_choice":null}`,
	`{"max_tokens":1,"messages":[{"role":"user","content":"x"}],"metadata":{"user_id":"u","a":null,"b":[1]},"stop_sequences":["s"],"system":[{"type":"text","text":"s"}]}`,
	`{"max_tokens":1,"messages":[{"role":"user","content":"x"}],"metadata":{"user_id":"u","user_id":"v"}}`,
	`{"max_tokens":1,"messages":[{"role":"user","content":"x"}],"metadata":null,"stop_sequences":null,"tools":[{"name":"t","input_schema":{"type":"object"},"cache_control":null},null]}`,
	`{"id":"msg_1","model":"m","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t","name":"f","input":{"a":1}},null,{"type":"thinking","thinking":"th"}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":2,"cache_creation_input_tokens":3,"cache_read_input_tokens":4}}`,
	`{"id":"msg_1","content":null,"usage":null,"stop_reason":null}`,
	`{"id":"c","model":"m","choices":[{"message":{"content":null,"refusal":"no","reasoning_content":"r","reasoning":"q","tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"},null],"usage":{"prompt_tokens":1,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1}}}`,
	`{"choices":[{"message":null,"finish_reason":null}],"usage":{"prompt_tokens_details":null,"prompt_tokens":null}}`,
	`{"choices":[{"message":{"content":"x","content":"y"}}]}`,
	"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}",
	"[{\"type\":\"text\",\"text\":\"\xc3\xa9\xe2\x80\xa8\"}]",
	`{"messages":[{"role":"user","content":"x"}],"seed":{"deep":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}}`,
	`{"messages":[{"role":"user","content":"x"}],"seed":{"bad":[1,]}}`,
	`{"messages":[{"role":"user","content":"x"}],"seed":"\u12"}`,
	`{"messages":[{"role":"user","content":"x"}],"seed":01}`,
	`{"messages":[{"role":"user","content":"x"}],"seed":-}`,
	`{"messages":[{"role":"user","content":"x"}],"seed":1.}`,
	`{"messages":[{"role":"user","content":"x"}],"seed":nul}`,
	`{"messages":[{"role":"user","content":"x"}]`,
	`{"messages":[{"role":"user","content":"x"}]}}`,
	`{"messages":[{"role":"user","content":"x"}],}`,
	`{"messages":[{"role":"user","content":"x"}] , "Stream":true}`,
}

// TestHandDecoderTakesGoldenInputs checks that the hand decoders are used:
// every golden request and response input that encoding/json decodes,
// they decode too (FuzzFastDecode checks they decode it the same way).
func TestHandDecoderTakesGoldenInputs(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden cases (%v)", err)
	}
	taken := 0
	for _, dir := range dirs {
		name := filepath.Base(dir)
		var newV func() any
		switch {
		case strings.HasPrefix(name, "request-openai-"):
			newV = func() any { return new(oaRequestIn) }
		case strings.HasPrefix(name, "request-anthropic-"):
			newV = func() any { return new(anRequestIn) }
		case strings.HasPrefix(name, "response-anthropic-"):
			newV = func() any { return new(anResponse) }
		case strings.HasPrefix(name, "response-openai-"):
			newV = func() any { return new(oaResponse) }
		default:
			continue
		}
		in, err := os.ReadFile(filepath.Join(dir, "input"))
		if err != nil {
			t.Fatal(err)
		}
		if json.Unmarshal(in, newV()) != nil {
			continue
		}
		if !decodeByHand(in, newV()) {
			t.Errorf("%s: the hand decoder gave up on an input encoding/json decodes", name)
		}
		taken++
	}
	if taken < 25 {
		t.Errorf("only %d golden inputs decoded by hand", taken)
	}
}

// TestHandDecodedRequestsNameDroppedFields checks that a body decoded by
// hand still has its unknown top-level fields looked for (and only the
// non-null ones named), as dropUnknown names them after a reflective
// decode.
func TestHandDecodedRequestsNameDroppedFields(t *testing.T) {
	for _, c := range []struct {
		from, to Dialect
		body     string
		want     []string
	}{
		{OpenAI, Anthropic, `{"model":"m","seed":1,"logit_bias":null,"messages":[{"role":"user","content":"x"}],"store":false}`, []string{"seed", "store"}},
		{OpenAI, Anthropic, `{"model":"m","seed":null,"messages":[{"role":"user","content":"x"}]}`, nil},
		{Anthropic, OpenAI, `{"model":"m","max_tokens":1,"top_k":5,"messages":[{"role":"user","content":"x"}]}`, []string{"top_k"}},
		{Anthropic, OpenAI, `{"max_tokens":1,"messages":[{"role":"user","content":"x"}],"model":"m","thinking":null}`, nil},
	} {
		if !decodeByHand([]byte(c.body), map[Dialect]any{OpenAI: new(oaRequestIn), Anthropic: new(anRequestIn)}[c.from]) {
			t.Fatalf("not decoded by hand, so this case checks nothing: %s", c.body)
		}
		tr, err := Request(c.from, c.to, []byte(c.body), "up", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(tr.Dropped, c.want) {
			t.Errorf("%s: dropped %q, want %q", c.body, tr.Dropped, c.want)
		}
	}
}

// TestHandDecoderGivesUpOnDeepNesting checks that a value nested past
// encoding/json's limit, which it refuses, is not accepted by hand.
func TestHandDecoderGivesUpOnDeepNesting(t *testing.T) {
	deep := `{"messages":[{"role":"user","content":"x"}],"seed":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + "}"
	if json.Unmarshal([]byte(deep), new(oaRequestIn)) == nil {
		t.Fatal("encoding/json took a value nested 10,001 deep; the premise of this test is gone")
	}
	if decodeByHand([]byte(deep), new(oaRequestIn)) {
		t.Error("the hand decoder took a value nested deeper than encoding/json allows")
	}
}
