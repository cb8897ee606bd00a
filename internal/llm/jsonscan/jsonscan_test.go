package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// reference is a realistic ~0.5 KB chat request, the body the benchmarks
// and fast-path tests use.
const reference = `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a terse assistant. Answer in one sentence."},` +
	`{"role":"user","content":"What is the capital of France, and what river runs through it? Please also mention one famous bridge."}],` +
	`"temperature":0.2,"max_tokens":256,"stream":true,"stream_options":{"include_usage":true},` +
	`"tools":[{"type":"function","function":{"name":"lookup","description":"Look a city up","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],` +
	`"user":"user-1234","metadata":{"trace":"abc\"def\\u0041"}}`

func TestScanRequest(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		wantModel  string
		wantStream bool
	}{
		{"reference", reference, "gpt-4o-mini", true},
		{"minimal", `{"model":"m"}`, "m", false},
		{"whitespace everywhere", " \r\n\t{ \"model\" :\t\"m\" , \"stream\" : false } \n", "m", false},
		{"stream null", `{"stream":null,"model":"m"}`, "m", false},
		{"model after nested model keys", `{"messages":[{"model":"inner"}],"x":{"model":"deep","stream":"no"},"model":"outer"}`, "outer", false},
		{"escaped model value", `{"model":"a\"b\u00e9\/c"}`, "a\"bé/c", false},
		{"escaped key", `{"mod\u0065l":"m","str\u0065am":true}`, "m", true},
		{"unicode model", `{"model":"模型"}`, "模型", false},
		{"numbers of every shape", `{"a":[0,-0,1.5,-2e10,3E+2,4e-3,123456789012345678901234567890],"model":"m"}`, "m", false},
		{"literals and empties", `{"a":[true,false,null,{},[],""],"model":"m","stream":true}`, "m", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := ScanRequest([]byte(tt.body))
			if err != nil {
				t.Fatalf("ScanRequest: %v", err)
			}
			if req.Model != tt.wantModel || req.Stream != tt.wantStream {
				t.Errorf("got model %q stream %v, want %q %v", req.Model, req.Stream, tt.wantModel, tt.wantStream)
			}
			var got string
			if err := json.Unmarshal([]byte(tt.body[req.ModelStart:req.ModelEnd]), &got); err != nil || got != tt.wantModel {
				t.Errorf("model span %d-%d holds %q (%v), want the model's JSON string", req.ModelStart, req.ModelEnd, tt.body[req.ModelStart:req.ModelEnd], err)
			}
		})
	}
}

func TestScanRequestErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string // substring of the message
		kind any    // *SyntaxError, *FieldError or ErrNotObject
	}{
		{"empty", ``, "empty", &SyntaxError{}},
		{"spaces only", "  \n", "empty", &SyntaxError{}},
		{"array", `[{"model":"m"}]`, "must be a JSON object", ErrNotObject},
		{"string", `"model"`, "must be a JSON object", ErrNotObject},
		{"truncated", `{"model":"m"`, "not closed", &SyntaxError{}},
		{"truncated string", `{"model":"m`, "not closed", &SyntaxError{}},
		{"trailing comma", `{"model":"m",}`, "member name", &SyntaxError{}},
		{"missing colon", `{"model" "m"}`, "':'", &SyntaxError{}},
		{"two objects", `{"model":"m"}{}`, "after the top-level object", &SyntaxError{}},
		{"garbage after", `{"model":"m"} x`, "after the top-level object", &SyntaxError{}},
		{"single quotes", `{'model':'m'}`, "member name", &SyntaxError{}},
		{"bad literal", `{"model":"m","stream":tru}`, "expected true", &SyntaxError{}},
		{"bad number", `{"model":"m","n":01}`, "expected ',' or '}'", &SyntaxError{}},
		{"bad fraction", `{"model":"m","n":1.}`, "after '.'", &SyntaxError{}},
		{"bad exponent", `{"model":"m","n":1e}`, "exponent", &SyntaxError{}},
		{"control char", "{\"model\":\"a\nb\"}", "control character", &SyntaxError{}},
		{"bad escape", `{"model":"a\qb"}`, `bad escape \q`, &SyntaxError{}},
		{"short unicode escape", `{"model":"\u12"}`, `\u`, &SyntaxError{}},
		{"nested unclosed", `{"model":"m","a":[1,2}`, `expected ',' or ']'`, &SyntaxError{}},
		{"missing model", `{"messages":[]}`, "model is required", &FieldError{}},
		{"empty model", `{"model":""}`, "must not be empty", &FieldError{}},
		{"model not a string", `{"model":42}`, "must be a string", &FieldError{}},
		{"model null", `{"model":null}`, "must be a string", &FieldError{}},
		{"model twice", `{"model":"a","model":"b"}`, "model is given twice", &FieldError{}},
		{"model twice via escape", `{"model":"a","mod\u0065l":"b"}`, "model is given twice", &FieldError{}},
		{"stream not bool", `{"model":"m","stream":"true"}`, "stream must be true or false", &FieldError{}},
		{"stream twice", `{"model":"m","stream":false,"stream":true}`, "stream is given twice", &FieldError{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ScanRequest([]byte(tt.body))
			if err == nil {
				t.Fatal("got no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			switch tt.kind.(type) {
			case *SyntaxError:
				var se *SyntaxError
				if !errors.As(err, &se) {
					t.Errorf("error %T, want *SyntaxError", err)
				}
			case *FieldError:
				var fe *FieldError
				if !errors.As(err, &fe) {
					t.Errorf("error %T, want *FieldError", err)
				}
			default:
				if !errors.Is(err, ErrNotObject) {
					t.Errorf("error %v, want ErrNotObject", err)
				}
			}
		})
	}
}

func TestMaxDepth(t *testing.T) {
	deep := func(n int) []byte {
		return []byte(`{"model":"m","a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`)
	}
	if _, err := ScanRequest(deep(MaxDepth)); err != nil {
		t.Errorf("depth %d: %v, want accepted", MaxDepth, err)
	}
	if _, err := ScanRequest(deep(MaxDepth + 1)); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("depth %d: got %v, want a nesting error", MaxDepth+1, err)
	}
	if json.Valid(deep(MaxDepth+1)) || !json.Valid(deep(MaxDepth)) {
		t.Error("MaxDepth no longer matches encoding/json's limit")
	}
}

func TestSplice(t *testing.T) {
	body := []byte(reference)
	req, err := ScanRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"claude-sonnet-4-5", "", `quo"te\back`, "tab\there", "é模型", "bad\xffutf8"} {
		out := Splice(body, req.ModelStart, req.ModelEnd, model)
		got, err := ScanRequest(out)
		switch {
		case model == "":
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("splice %q: got %v, want an empty-model error", model, err)
			}
			continue
		case err != nil:
			t.Fatalf("splice %q: result does not scan: %v\n%s", model, err, out)
		}
		want := strings.ToValidUTF8(model, "\uFFFD")
		if got.Model != want {
			t.Errorf("splice %q: model reads back as %q, want %q", model, got.Model, want)
		}
		if !bytes.Equal(out[:req.ModelStart], body[:req.ModelStart]) || !bytes.Equal(out[got.ModelEnd:], body[req.ModelEnd:]) {
			t.Errorf("splice %q changed bytes outside the model value", model)
		}
	}
	if string(body) != reference {
		t.Error("Splice modified its input")
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "a\"b\\c", "\x00\x01\x1f", "é模型", "bad\xff", "<html>&"} {
		var back string
		if err := json.Unmarshal(AppendString(nil, s), &back); err != nil {
			t.Errorf("AppendString(%q) is not valid JSON: %v", s, err)
			continue
		}
		if want := strings.ToValidUTF8(s, "\uFFFD"); back != want {
			t.Errorf("AppendString(%q) decodes to %q, want %q", s, back, want)
		}
	}
}

func TestMembers(t *testing.T) {
	var keys []string
	var vals []string
	err := Members([]byte(`{"a":1,"b\u0021":{"c":[2]},"d":"x"}`), func(k, v []byte) bool {
		keys = append(keys, string(k))
		vals = append(vals, string(v))
		return string(k) != "b!"
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(keys, ",") != "a,b!" || strings.Join(vals, ",") != `1,{"c":[2]}` {
		t.Errorf("got keys %q values %q; want the calls to stop after b!", keys, vals)
	}
	if err := Members([]byte(`{"a":1} junk`), func(k, v []byte) bool { return false }); err == nil {
		t.Error("Members accepted trailing junk after fn stopped the calls")
	}
}

// FuzzScanRequest checks the scanner against encoding/json: it accepts
// exactly the objects encoding/json accepts, finds the same model and
// stream, and a splice changes nothing but the model. The committed corpus
// is under testdata/fuzz/FuzzScanRequest.
func FuzzScanRequest(f *testing.F) {
	for _, s := range []string{
		reference, `{"model":"m"}`, `{"model":"a\u0041","stream":true}`, `[]`, `{`, `{"model":1}`,
		`{"a":[1,{"b":null}],"model":"x","stream":null}`, `{"model":"m","model":"n"}`, "{\"model\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		membersErr := Members(body, func(k, v []byte) bool { return true })
		trimmed := bytes.TrimLeft(body, " \t\r\n")
		isObject := json.Valid(body) && len(trimmed) > 0 && trimmed[0] == '{'
		if (membersErr == nil) != isObject {
			t.Fatalf("Members error %v, but encoding/json says valid object = %v", membersErr, isObject)
		}
		req, err := ScanRequest(body)
		if err != nil {
			return
		}
		if !isObject {
			t.Fatal("ScanRequest accepted what encoding/json rejects")
		}
		// Keys of a map are matched exactly, as the providers' parsers do
		// (struct fields would match case-insensitively).
		var members map[string]json.RawMessage
		if err := json.Unmarshal(body, &members); err != nil {
			t.Fatalf("encoding/json cannot decode an accepted object: %v", err)
		}
		var model string
		if err := json.Unmarshal(members["model"], &model); err != nil || model != req.Model {
			t.Fatalf("model %q, encoding/json reads %q (%v)", req.Model, model, err)
		}
		if wantStream := string(members["stream"]) == "true"; req.Stream != wantStream {
			t.Fatalf("stream %v, encoding/json reads %s", req.Stream, members["stream"])
		}
		out := Splice(body, req.ModelStart, req.ModelEnd, "spliced-model")
		again, err := ScanRequest(out)
		if err != nil || again.Model != "spliced-model" || again.Stream != req.Stream {
			t.Fatalf("after splice: %+v, %v", again, err)
		}
		if !bytes.Equal(out[:req.ModelStart], body[:req.ModelStart]) || !bytes.Equal(out[again.ModelEnd:], body[req.ModelEnd:]) {
			t.Fatal("splice changed bytes outside the model value")
		}
	})
}

func BenchmarkScanRequest(b *testing.B) {
	body := []byte(reference)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ScanRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJSONValidForComparison(b *testing.B) {
	body := []byte(reference)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if !json.Valid(body) {
			b.Fatal("invalid")
		}
	}
}

func TestPathAt(t *testing.T) {
	const doc = `{"model":"m", "messages":[{"role":"user","content":"hi"},{"role":"user","content":[{"type":"text","text":5}]}],` +
		`"a\u002eb":{"x\"y":[[1,[2]]]}}`
	for _, tt := range []struct {
		at   string // the first occurrence of at in doc, or "" for offset 0
		path string
	}{
		{"", ""},
		{`"m"`, "model"},
		{`"hi"`, "messages[0].content"},
		{`{"role":"user","content":"hi"}`, "messages[0]"},
		{`5}`, "messages[1].content[0].text"},
		{`[{"type"`, "messages[1].content"},
		{`:[{"role"`, ""}, // the colon is the top-level object's own
		{`2]`, `a.b.x"y[0][1][0]`},
	} {
		off := strings.Index(doc, tt.at)
		if off < 0 {
			t.Fatalf("%q is not in the document", tt.at)
		}
		if got := PathAt([]byte(doc), off); got != tt.path {
			t.Errorf("PathAt at %q (byte %d) = %q, want %q", tt.at, off, got, tt.path)
		}
	}
	// Past the end, and in broken JSON, the path so far.
	if got := PathAt([]byte(doc), len(doc)+5); got != "" {
		t.Errorf("past the end: %q", got)
	}
	if got := PathAt([]byte(`{"a":[1,{"b":2}],"c":`), 13); got != "a[1].b" {
		t.Errorf("in JSON broken after the offset: %q, want a[1].b", got)
	}
	if got := PathAt([]byte(`{"a":[1,{"b":`), 12); got != "" {
		t.Errorf("in a value that is not closed: %q, want the path so far, \"\"", got)
	}
}

func TestWholeNumber(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		good bool
	}{{"0", 0, true}, {"42", 42, true}, {"null", 0, true}, {"999999999999999", 999999999999999, true},
		{"1000000000000000", 0, false}, {"-1", 0, false}, {"1.5", 0, false}, {"1e3", 0, false}, {`"7"`, 0, false}, {"", 0, false}} {
		if n, good := WholeNumber([]byte(tc.in)); n != tc.n || good != tc.good {
			t.Errorf("WholeNumber(%q) = %d, %v; want %d, %v", tc.in, n, good, tc.n, tc.good)
		}
	}
}
