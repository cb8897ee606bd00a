package fieldpath

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// jsonTargets makes targets of paths; a path ending in "?" is Optional.
func jsonTargets(t testing.TB, paths ...string) []Target {
	t.Helper()
	ts := make([]Target, len(paths))
	for i, s := range paths {
		opt := strings.HasSuffix(s, "?")
		p, err := Parse(strings.TrimSuffix(s, "?"))
		if err != nil {
			t.Fatal(err)
		}
		ts[i] = Target{Path: p, Optional: opt}
	}
	return ts
}

func compileJSON(t testing.TB, paths ...string) *JSONPlan {
	t.Helper()
	p, err := CompileJSON(jsonTargets(t, paths...))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// describeSpans renders f's spans as "path=content", checking what every
// JSON span must be: a string's content between its quotes.
func describeSpans(t *testing.T, p *JSONPlan, body []byte, f *Found) []string {
	t.Helper()
	var got []string
	for i, s := range f.Spans {
		if s.Len != NoLen || s.LenAt != s.Start || s.Bytes || s.Start < 1 || s.End >= len(body) ||
			body[s.Start-1] != '"' || body[s.End] != '"' || (i > 0 && s.Start <= f.Spans[i-1].End) {
			t.Fatalf("span %d %+v of %q is not a string's content in record order", i, s, body)
		}
		got = append(got, p.Targets()[s.Target].Path.Text+"="+string(body[s.Start:s.End]))
	}
	if len(f.Frames) != 0 {
		t.Fatalf("frames %+v in a JSON record", f.Frames)
	}
	return got
}

func TestLocateJSON(t *testing.T) {
	tests := []struct {
		name  string
		paths []string
		body  string
		want  []string
	}{
		{"one member", []string{"ssn"}, `{"ssn":"123"}`, []string{"ssn=123"}},
		{"others skipped", []string{"ssn"},
			`{"id":"x","n":-1.5e+3,"t":true,"f":false,"z":null,"o":{"ssn":"inner","a":[1,{"b":"}]\""}]},"a":[],"e":{},"ssn":"123","after":[[]]}`,
			[]string{"ssn=123"}},
		{"odd whitespace", []string{"customer.ssn"}, " \t\r\n{ \"customer\" \n:\t{\r\"ssn\"  :  \"1\" \n } , \"x\" : [ 1 , 2 ] }\n\t ", []string{"customer.ssn=1"}},
		{"escapes in the value as written", []string{"ssn"}, `{"ssn":"a\"b\\c\/\b\f\n\r\t\u00e9\uD83D\uDE00"}`, []string{`ssn=a\"b\\c\/\b\f\n\r\t\u00e9\uD83D\uDE00`}},
		{"a value that is all escapes", []string{"ssn"}, `{"ssn":"\\\\\"\\"}`, []string{`ssn=\\\\\"\\`}},
		{"an empty value", []string{"ssn"}, `{"ssn":""}`, []string{"ssn="}},
		{"unicode value and key", []string{"név", "ssn"}, `{"név":"Zoë 😀","ssn":"é"}`, []string{"név=Zoë 😀", "ssn=é"}},
		{"key with \\u escapes", []string{"ssn"}, `{"s\u0073n":"1"}`, []string{"ssn=1"}},
		{"key all escaped", []string{"ssn"}, `{"\u0073\u0053\u006e":"1","\u0073\u0073\u006E":"2"}`, []string{"ssn=2"}},
		{"key with an escaped quote and backslash", []string{`a"b\c`}, `{"a\"b\\c":"1"}`, []string{`a"b\c=1`}},
		{"key with one-letter escapes", []string{"a\tb\n/"}, `{"a\tb\n\/":"1"}`, []string{"a\tb\n/=1"}},
		{"key with a surrogate pair", []string{"😀"}, `{"\ud83d\ude00":"1"}`, []string{"😀=1"}},
		{"key with a lone surrogate reads as U+FFFD", []string{"a\uFFFDb", "c\uFFFD\uFFFD"}, `{"a\udc00b":"1","c\ud800\ud800":"2"}`, []string{"a\uFFFDb=1", "c\uFFFD\uFFFD=2"}},
		{"escaped key that is not wanted", []string{"ssn"}, `{"s\u0073x":"1","ssn":"2"}`, []string{"ssn=2"}},
		{"shared prefix, document order", []string{"customer.ssn", "customer.card"},
			`{"customer":{"card":"4111","name":"Ann","ssn":"123"}}`, []string{"customer.card=4111", "customer.ssn=123"}},
		{"array of objects", []string{"cards[*].number"},
			`{"cards":[{"number":"1"},{"cvv":"9","number":"2"},null,{"number":null}]}`, []string{"cards[*].number=1", "cards[*].number=2"}},
		{"array of strings", []string{"tags[*]"}, `{"tags":["a",null,"b"]}`, []string{"tags[*]=a", "tags[*]=b"}},
		{"nested arrays", []string{"m[*][*]"}, `{"m":[["a","b"],[],null,["c"]]}`, []string{"m[*][*]=a", "m[*][*]=b", "m[*][*]=c"}},
		{"[*] over an object's members", []string{"m[*]"}, `{"m":{"x":"1","y":null,"z":"2"}}`, []string{"m[*]=1", "m[*]=2"}},
		{"[*] over a map of objects", []string{"m[*].ssn"}, `{"m":{"a":{"ssn":"1"},"b":{"ssn":"2","x":[]}}}`, []string{"m[*].ssn=1", "m[*].ssn=2"}},
		{"[*] over a map with a key twice", []string{"m[*]"}, `{"m":{"k":"1","k":"2"}}`, []string{"m[*]=1", "m[*]=2"}},
		{"[N]", []string{"lines[1].sku"}, `{"lines":[{"sku":"a"},{"sku":"b"},{"sku":"c"}]}`, []string{"lines[1].sku=b"}},
		{"[N] of strings", []string{"l[0]", "l[2]"}, `{"l":["a",1,"c",4]}`, []string{"l[0]=a", "l[2]=c"}},
		{"[N] with [*]", []string{"l[*].x", "l[0].y"}, `{"l":[{"y":"y0","x":"x0"},{"x":"x1","y":"no"}]}`, []string{"l[0].y=y0", "l[*].x=x0", "l[*].x=x1"}},
		{"a name with [*]", []string{"m[*].x", "m.b.y"}, `{"m":{"a":{"x":"1","y":"no"},"b":{"y":"2","x":"3"}}}`, []string{"m[*].x=1", "m.b.y=2", "m[*].x=3"}},
		{"null target", []string{"ssn"}, `{"ssn":null}`, nil},
		{"null on the way", []string{"customer.ssn", "cards[*].number", "l[0]"}, `{"customer":null,"cards":null,"l":null}`, nil},
		{"null record", []string{"ssn"}, " null ", nil},
		{"optional missing", []string{"ssn?", "customer.card?", "l[3]?"}, `{"customer":{},"l":["a"]}`, nil},
		{"optional on the way, required below", []string{"customer.ssn", "customer.card?"}, `{"customer":{"ssn":"1"}}`, []string{"customer.ssn=1"}},
		{"duplicates of other names", []string{"ssn"}, `{"x":1,"x":2,"ssn":"1","o":{"ssn":1,"ssn":2}}`, []string{"ssn=1"}},
		{"deep nesting skipped", []string{"ssn"}, `{"deep":` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + `,"ssn":"1"}`, []string{"ssn=1"}},
		{"deep objects skipped", []string{"ssn"}, `{"deep":` + strings.Repeat(`{"a":`, 999) + "1" + strings.Repeat("}", 999) + `,"ssn":"1"}`, []string{"ssn=1"}},
		{"long strings", []string{"notes"}, `{"x":"` + strings.Repeat(`a\"`, 500) + `","notes":"` + strings.Repeat("n", 5000) + `"}`, []string{"notes=" + strings.Repeat("n", 5000)}},
		{"many names at one level", append(manyPaths(12, "?"), "f12.x?"), `{"f11":"b","x":"c","f0":"a","f12":{"no":"x"}}`, []string{"f11=b", "f0=a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := compileJSON(t, tc.paths...)
			var f Found
			f.Spans = append(f.Spans, Span{Target: 99}) // Locate starts afresh
			if err := p.Locate([]byte(tc.body), &f); err != nil {
				t.Fatalf("Locate: %v", err)
			}
			if got := describeSpans(t, p, []byte(tc.body), &f); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("spans %q, want %q", got, tc.want)
			}
		})
	}
}

// manyPaths returns n paths "f0", "f1"... with suffix after each.
func manyPaths(n int, suffix string) []string {
	var ps []string
	for i := range n {
		ps = append(ps, "f"+strconv.Itoa(i)+suffix)
	}
	return ps
}

func TestLocateJSONFaults(t *testing.T) {
	tests := []struct {
		name   string
		paths  []string
		body   string
		field  string
		reason string
	}{
		{"number", []string{"customer.ssn"}, `{"customer":{"ssn":123456789}}`, "customer.ssn", "is a number, not a string"},
		{"negative number", []string{"ssn"}, `{"ssn":-1}`, "ssn", "is a number, not a string"},
		{"boolean", []string{"ssn"}, `{"ssn":true}`, "ssn", "is a boolean, not a string"},
		{"object", []string{"ssn"}, `{"ssn":{"a":"b"}}`, "ssn", "is an object, not a string"},
		{"array", []string{"ssn"}, `{"ssn":["123"]}`, "ssn", "is an array, not a string"},
		{"item of the wrong type", []string{"tags[*]"}, `{"tags":["a",7]}`, "tags[*]", "is a number, not a string"},
		{"string on the way", []string{"customer.ssn"}, `{"customer":"Ann"}`, "customer.ssn", `"customer" is a string, not an object`},
		{"array where the path names a member", []string{"customer.ssn"}, `{"customer":[{"ssn":"1"}]}`, "customer.ssn", `"customer" is an array, not an object`},
		{"object where the path names an item", []string{"l[0]"}, `{"l":{"0":"a"}}`, "l[0]", `"l" is an object, not an array`},
		{"number where [*] needs an array or object", []string{"cards[*].number"}, `{"cards":5}`, "cards[*].number", `"cards" is a number, not an object or array`},
		{"item on the way", []string{"cards[*].number"}, `{"cards":[{"number":"1"},"2"]}`, "cards[*].number", `"cards[*]" is a string, not an object`},
		{"record is an array", []string{"ssn"}, ` [{"ssn":"1"}]`, "ssn", "the record is an array, not an object"},
		{"record is a string", []string{"ssn", "x"}, `"ssn"`, "ssn", "the record is a string, not an object"},
		{"record is a number", []string{"ssn"}, `12`, "ssn", "the record is a number, not an object"},
		{"missing", []string{"ssn"}, `{"id":"1"}`, "ssn", "is missing"},
		{"missing from an empty object", []string{"ssn"}, `{}`, "ssn", "is missing"},
		{"missing on the way", []string{"customer.ssn"}, `{"id":"1"}`, "customer.ssn", `"customer" is missing`},
		{"missing below", []string{"a.b.c"}, `{"a":{"x":{}}}`, "a.b.c", `"a.b" is missing`},
		{"missing one of two", []string{"customer.card?", "customer.ssn"}, `{"customer":{"card":"1"}}`, "customer.ssn", "is missing"},
		{"optional then required below", []string{"customer.card?", "customer.ssn"}, `{}`, "customer.ssn", `"customer" is missing`},
		{"missing in an item", []string{"cards[*].number"}, `{"cards":[{"number":"1"},{}]}`, "cards[*].number", "is missing"},
		{"past the end", []string{"lines[2].sku"}, `{"lines":[{"sku":"a"},{"sku":"b"}]}`, "lines[2].sku", `"lines[2]" is missing`},
		{"past the end of an empty array", []string{"l[0]"}, `{"l":[]}`, "l[0]", "is missing"},
		{"twice", []string{"ssn"}, `{"ssn":"1","ssn":"2"}`, "ssn", "appears twice in one object"},
		{"twice with a null", []string{"ssn"}, `{"ssn":null,"ssn":"2"}`, "ssn", "appears twice in one object"},
		{"twice, spelled apart", []string{"ssn"}, `{"ssn":"1","s\u0073n":"2"}`, "ssn", "appears twice in one object"},
		{"twice on the way", []string{"customer.ssn"}, `{"customer":{"ssn":"1"},"customer":{"ssn":"2"}}`, "customer.ssn", `"customer" appears twice in one object`},
		{"twice in an item", []string{"cards[*].number"}, `{"cards":[{"number":"1"},{"number":"1","number":"2"}]}`, "cards[*].number", "appears twice in one object"},
		{"twice among many", manyPaths(10, ""), `{"f3":"a","f9":"b","f3":"c"}`, "f3", "appears twice in one object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := compileJSON(t, tc.paths...)
			var f Found
			err := p.Locate([]byte(tc.body), &f)
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("Locate: %v, want an *Error", err)
			}
			if fe.Field != tc.field || fe.Reason != tc.reason {
				t.Errorf("error %q, want field %q: %s", err, tc.field, tc.reason)
			}
			if len(f.Spans) != 0 {
				t.Errorf("spans %+v after an error", f.Spans)
			}
		})
	}
}

// TestLocateJSONFaultsHideValues checks that no message quotes the record:
// its values are secrets.
func TestLocateJSONFaultsHideValues(t *testing.T) {
	p := compileJSON(t, "customer.ssn", "tags[*]")
	for _, body := range []string{
		`{"customer":{"ssn":987654321}}`,
		`{"customer":"SECRET"}`,
		`{"customer":{"ssn":"SECRET","ssn":"SECRET"}}`,
		`{"customer":{"ssn":"SECRET"},"tags":[SECRET]}`,
		`{"customer":{"ssn":"SECRET"},"tags":["a"] SECRET}`,
		`{"customer":{"ssn":"SECRET"},"tags":"SECRET"}`,
		`{"customer":{"ssn":"SECRET"},"tags":["\SECRET"]}`,
		`{"customer":{"ssn":"SECRET"},"tags":[-SECRET]}`,
	} {
		err := p.Locate([]byte(body), new(Found))
		if err == nil {
			t.Fatalf("%s: no error", body)
		}
		if msg := err.Error(); strings.Contains(msg, "SECRET") || strings.Contains(msg, "987") {
			t.Errorf("%s: message %q quotes the record", body, msg)
		}
	}
}

func TestLocateJSONNotJSON(t *testing.T) {
	p := compileJSON(t, "ssn", "a[*].b?")
	tests := []struct{ body, reason string }{
		{``, "unexpected end at byte 0"},
		{`   `, "unexpected end at byte 3"},
		{`{`, "unexpected end at byte 1"},
		{`{"ssn":"1"`, "unexpected end at byte 10"},
		{`{"ssn":"1"}}`, "text after the value at byte 11"},
		{`{"ssn":"1"} x`, "text after the value at byte 12"},
		{`{"ssn":"1"}{}`, "text after the value at byte 11"},
		{`{ssn:"1"}`, "want a member name at byte 1"},
		{`{'ssn':"1"}`, "want a member name at byte 1"},
		{`{"ssn":"1",}`, "want a member name at byte 11"},
		{`{,"ssn":"1"}`, "want a member name at byte 1"},
		{`{"ssn" "1"}`, "want ':' at byte 7"},
		{`{"ssn"="1"}`, "want ':' at byte 6"},
		{`{"ssn":"1" "x":1}`, "want ',' or '}' at byte 11"},
		{`{"ssn":"1"]`, "want ',' or '}' at byte 10"},
		{`{"ssn":"1","a":[{"b":"1"} {}]}`, "want ',' or ']' at byte 26"},
		{`{"ssn":"1","x":[1 2]}`, "want ',' or ']' at byte 18"},
		{`{"ssn":"1","x":{"a":1 "b":2}}`, "want ',' or '}' at byte 22"},
		{`{"ssn":"1","x":[1,]}`, "want a value at byte 18"},
		{`{"ssn":"1","x":[,1]}`, "want a value at byte 16"},
		{`{"ssn":"1","x":}`, "want a value at byte 15"},
		{`{"ssn":'1'}`, "want a value at byte 7"},
		{`{"x":+1,"ssn":"1"}`, "want a value at byte 5"},
		{`{"x":01,"ssn":"1"}`, "want ',' or '}' at byte 6"},
		{`{"x":1.,"ssn":"1"}`, "bad number at byte 7"},
		{`{"x":.5,"ssn":"1"}`, "want a value at byte 5"},
		{`{"x":1e,"ssn":"1"}`, "bad number at byte 7"},
		{`{"x":1e+,"ssn":"1"}`, "bad number at byte 8"},
		{`{"x":-,"ssn":"1"}`, "bad number at byte 6"},
		{`{"x":-a,"ssn":"1"}`, "bad number at byte 6"},
		{`{"x":0x1,"ssn":"1"}`, "want ',' or '}' at byte 6"},
		{`{"x":NaN,"ssn":"1"}`, "want a value at byte 5"},
		{`{"x":tru,"ssn":"1"}`, "bad literal at byte 5"},
		{`{"x":nul}`, "bad literal at byte 5"},
		{`{"x":True,"ssn":"1"}`, "want a value at byte 5"},
		{`{"x":"\x","ssn":"1"}`, "bad escape at byte 6"},
		{`{"x":"\u12G4","ssn":"1"}`, "bad escape at byte 6"},
		{`{"x":"\U1234","ssn":"1"}`, "bad escape at byte 6"},
		{`{"x":"\u12"}`, "bad escape at byte 6"},
		{`{"ssn":"\'"}`, "bad escape at byte 8"},
		{`{"s\sn":"1"}`, "bad escape at byte 3"},
		{`{"ssn":"1","a":"\q"}`, "bad escape at byte 16"},
		{`{"ssn":"1","a":[{"\q":1}]}`, "bad escape at byte 18"},
		{`{"ssn":"1}`, "unexpected end at byte 10"},
		{`{"ssn":"1","x":"`, "unexpected end at byte 16"},
		{"{\"ssn\":\"1\",\"x\":\x00}", "want a value at byte 15"},
		{"\xef\xbb\xbf{\"ssn\":\"1\"}", "want a value at byte 0"},
	}
	for _, tc := range tests {
		var f Found
		err := p.Locate([]byte(tc.body), &f)
		var fe *Error
		if !errors.As(err, &fe) || fe.Field != "" || fe.Reason != "not JSON: "+tc.reason {
			t.Errorf("%q: error %v, want not JSON: %s", tc.body, err, tc.reason)
		}
	}
}

// TestLocateJSONStringContents pins what Locate leaves unchecked: string
// contents are copied as they are, so neither their UTF-8 nor raw control
// characters are its business; only their escapes are.
func TestLocateJSONStringContents(t *testing.T) {
	p := compileJSON(t, "ssn")
	body := "{\"x\":\"\xff\xfe\t\x01\",\"ssn\":\"\xc3\x28\n\"}"
	var f Found
	if err := p.Locate([]byte(body), &f); err != nil {
		t.Fatal(err)
	}
	if got := describeSpans(t, p, []byte(body), &f); !reflect.DeepEqual(got, []string{"ssn=\xc3\x28\n"}) {
		t.Errorf("spans %q", got)
	}
}

func TestLocateJSONDepth(t *testing.T) {
	p := compileJSON(t, "ssn", "a[*].b.c?")
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		body string
		ok   bool
	}{
		{`{"ssn":"1","x":` + deep(999) + `}`, true},
		{`{"ssn":"1","x":` + deep(1000) + `}`, false},
		{`{"ssn":"1","x":` + deep(100000) + `}`, false},
		{`{"ssn":"1","a":[{"b":{"x":` + deep(996) + `}}]}`, true},
		{`{"ssn":"1","a":[{"b":{"x":` + deep(997) + `}}]}`, false},
	}
	for i, tc := range tests {
		err := p.Locate([]byte(tc.body), new(Found))
		if tc.ok {
			if err != nil {
				t.Errorf("%d: %v", i, err)
			}
			continue
		}
		var fe *Error
		if !errors.As(err, &fe) || fe.Field != "" || !strings.HasPrefix(fe.Reason, "nested deeper than 1000 levels at byte ") {
			t.Errorf("%d: error %v, want nested deeper than 1000 levels", i, err)
		}
	}
}

// validJSONRecords are records that the plan of validJSONPaths locates in.
var validJSONRecords = []string{
	`{"id":"a","ssn":"123-45-6789","customer":{"card":"4111","ssn":"\u0031\"2"},"cards":[{"number":"1"},{"number":null},{"x":1}],"m":{"k":"v","n":null},"l":[["a","b"],[]],"n":-0.5e-3,"t":[true,false,null]}`,
	" {\n \"s\\u0073n\" : \"\" , \"customer\" : { } , \"m\" : [ \"x\" , \"y\" ] } \n",
	`{"ssn":null,"cards":[],"l":null}`,
	`{"ssn":"é😀\\","x":{"ssn":"not this"},"y":[{"ssn":"nor this"}]}`,
}

var validJSONPaths = []string{"ssn", "customer.ssn?", "customer.card?", "cards[*].number?", "m[*]?", "l[*][0]?"}

// TestLocateJSONCut cuts valid records at every byte: each part must be
// refused as a record that ends early, without a panic.
func TestLocateJSONCut(t *testing.T) {
	p := compileJSON(t, validJSONPaths...)
	var f Found
	for _, rec := range validJSONRecords {
		body := []byte(rec)
		if err := p.Locate(body, &f); err != nil {
			t.Fatalf("%s: %v", rec, err)
		}
		whole := len(bytes.TrimRight(body, " \t\r\n"))
		for n := range whole {
			err := p.Locate(body[:n], &f)
			want := "not JSON: unexpected end at byte " + strconv.Itoa(n)
			var fe *Error
			if !errors.As(err, &fe) || fe.Reason != want {
				t.Errorf("%q: error %v, want %s", body[:n], err, want)
			}
		}
	}
}

func TestCompileJSONRefuses(t *testing.T) {
	manual := func(text string, steps ...Step) Target { return Target{Path: Path{Text: text, Steps: steps}} }
	tests := []struct {
		name    string
		targets []Target
		want    []string // in the message
	}{
		{"none", nil, []string{"no field paths"}},
		{"prefix", jsonTargets(t, "a", "a.b"), []string{`"a"`, `"a.b"`, "prefix"}},
		{"prefix, longer first", jsonTargets(t, "a.b.c", "a.b"), []string{`"a.b"`, `"a.b.c"`, "prefix"}},
		{"prefix through [*]", jsonTargets(t, "a[*].b", "a[*]"), []string{`"a[*]"`, `"a[*].b"`, "prefix"}},
		{"twice", jsonTargets(t, "x", "a.b", "a.b?"), []string{`"a.b"`, "same field"}},
		{"index first", []Target{manual("[0]", Step{Index: 0})}, []string{`"[0]"`, "starts with an index"}},
		{"no steps", []Target{manual("")}, []string{`"" has 0 steps`}},
		{"too many steps", []Target{manual("long", slices.Repeat([]Step{{Name: "a"}}, 65)...)}, []string{`"long" has 65 steps`}},
		{"negative index", []Target{manual("a[-2]", Step{Name: "a"}, Step{Index: -2})}, []string{`"a[-2]"`, "negative index"}},
		{"[*] and [N] name one value", jsonTargets(t, "a[*]", "a[0]"), []string{`"a[*]"`, `"a[0]"`, `both name "a[0]"`}},
		{"[*] and a name name one value", jsonTargets(t, "a.b.c", "a[*].c"), []string{`"a.b.c"`, `"a[*].c"`, `both name "a.b.c"`}},
		{"string and holder through [*]", jsonTargets(t, "a[*].x", "a[0]"), []string{`"a[*].x"`, `"a[0]"`, `"a[0]" cannot be both a string and hold another field`}},
		{"object and array", jsonTargets(t, "a.b", "a[0]"), []string{`"a.b"`, `"a[0]"`, `"a" cannot be both an object and an array`}},
		{"object and array below [*]", jsonTargets(t, "x[*].b", "x[*][1]"), []string{`"x[*].b"`, `"x[*][1]"`, `"x[*]" cannot be both an object and an array`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := CompileJSON(tc.targets)
			if err == nil {
				t.Fatalf("compiled %v", p.Targets())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %s", err, w)
				}
			}
		})
	}
}

// TestCompileJSONBoundsMerging: paths that mix [*] and [N] at many levels
// would make a plan node for every combination; the plan refuses them
// rather than grow without bound.
func TestCompileJSONBoundsMerging(t *testing.T) {
	var paths []string
	for i := range 20 {
		steps := "a"
		for j := range 20 {
			if i == j {
				steps += "[0]"
			} else {
				steps += "[*]"
			}
		}
		paths = append(paths, steps+".x"+strconv.Itoa(i))
	}
	_, err := CompileJSON(jsonTargets(t, paths...))
	if err == nil || !strings.Contains(err.Error(), "too many levels") {
		t.Fatalf("error %v, want a refusal", err)
	}
	if _, err := CompileJSON(jsonTargets(t, paths[:3]...)); err != nil {
		t.Fatalf("three of them: %v", err)
	}
}

func TestJSONPlanTargets(t *testing.T) {
	ts := jsonTargets(t, "b.c", "a?")
	p, err := CompileJSON(ts)
	if err != nil {
		t.Fatal(err)
	}
	ts[0].Path.Text = "changed"
	if got := p.Targets(); len(got) != 2 || got[0].Path.Text != "b.c" || got[1].Path.Text != "a" || !got[1].Optional {
		t.Errorf("Targets() = %+v", got)
	}
}

// rewriteJSONValue is the replacement of the round trips: the base64url of
// the value's decoded text.
func rewriteJSONValue(dst []byte, _ *Span, val []byte) ([]byte, error) {
	var s string
	if err := json.Unmarshal(append(append([]byte{'"'}, val...), '"'), &s); err != nil {
		return dst, err
	}
	return base64.RawURLEncoding.AppendEncode(dst, []byte(s)), nil
}

// TestLocateJSONSpliceRoundTrip replaces every located value with another
// of a different length, checks that the result is JSON holding the new
// values where the paths say and nothing else changed, then locates again
// and puts the originals back: the record must come back byte for byte.
func TestLocateJSONSpliceRoundTrip(t *testing.T) {
	p := compileJSON(t, validJSONPaths...)
	for _, rec := range validJSONRecords {
		body := []byte(rec)
		var f Found
		if err := p.Locate(body, &f); err != nil {
			t.Fatal(err)
		}
		out, err := Splice(nil, body, &f, rewriteJSONValue)
		if err != nil {
			t.Fatal(err)
		}
		want := decodeJSON(t, body)
		for _, tg := range p.Targets() {
			want = mapPath(want, tg.Path.Steps, func(s string) any {
				return base64.RawURLEncoding.EncodeToString([]byte(s))
			})
		}
		if got := decodeJSON(t, out); !reflect.DeepEqual(got, want) {
			t.Errorf("%s\nspliced to %s\ndecodes to %v\nwant %v", body, out, got, want)
		}
		if back := spliceBack(t, p, body, &f, out); !bytes.Equal(back, body) {
			t.Errorf("%s\ncame back as\n%s", body, back)
		}
	}
}

// spliceBack locates p's targets in out, which f's spans of body were
// spliced into, and puts body's values back.
func spliceBack(t testing.TB, p *JSONPlan, body []byte, f *Found, out []byte) []byte {
	t.Helper()
	var originals [][]byte
	for _, s := range f.Spans {
		originals = append(originals, body[s.Start:s.End])
	}
	var g Found
	if err := p.Locate(out, &g); err != nil {
		t.Fatalf("locating in %q: %v", out, err)
	}
	if len(g.Spans) != len(originals) {
		t.Fatalf("%d spans in %q, %d in the record it came from", len(g.Spans), out, len(originals))
	}
	i := 0
	back, err := Splice(nil, out, &g, func(dst []byte, _ *Span, _ []byte) ([]byte, error) {
		i++
		return append(dst, originals[i-1]...), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return back
}

func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

// mapPath applies fn to the strings that steps name in v, as encoding/json
// decodes a record, and returns v.
func mapPath(v any, steps []Step, fn func(string) any) any {
	if len(steps) == 0 {
		if s, ok := v.(string); ok {
			return fn(s)
		}
		return v
	}
	s, rest := steps[0], steps[1:]
	switch c := v.(type) {
	case map[string]any:
		for k, item := range c {
			if k == s.Name || s.IsIndex() && s.Index == Any {
				c[k] = mapPath(item, rest, fn)
			}
		}
	case []any:
		for i, item := range c {
			if s.Index == Any || s.IsIndex() && s.Index == i {
				c[i] = mapPath(item, rest, fn)
			}
		}
	}
	return v
}

func TestLocateJSONAllocs(t *testing.T) {
	rec := referenceJSONRecord()
	p := compileJSON(t, "ssn")
	many := compileJSON(t, append(manyPaths(12, "?"), validJSONPaths[1:]...)...)
	var f Found
	for _, tc := range []struct {
		p    *JSONPlan
		body []byte
	}{
		{p, rec},
		{many, []byte(validJSONRecords[0])},
		{many, []byte(`{"f1":"a","f\u0031\u0031":"b","customer":{"\u0073sn":"c"},"m":{"a":"1","b":"2","c":"3"}}`)},
	} {
		if err := tc.p.Locate(tc.body, &f); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() {
			if err := tc.p.Locate(tc.body, &f); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%d allocations per Locate of %s", int(n), tc.body)
		}
	}
}

// TestLocateJSONSharesFoundWithSplice: Locate borrows Splice's working
// memory in Found for its own, so one Found must serve both in turn.
func TestLocateJSONSharesFoundWithSplice(t *testing.T) {
	p := compileJSON(t, append(manyPaths(12, "?"), "customer.ssn")...)
	body := []byte(`{"f\u0031":"a","customer":{"x":{"ssn":1},"\u0073sn":"b"},"f11":"c","f2":null}`)
	want := `{"f\u0031":"YQ","customer":{"x":{"ssn":1},"\u0073sn":"Yg"},"f11":"Yw","f2":null}`
	var f Found
	for range 3 {
		if err := p.Locate(body, &f); err != nil {
			t.Fatal(err)
		}
		out, err := Splice(nil, body, &f, rewriteJSONValue)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != want {
			t.Fatalf("spliced to %s, want %s", out, want)
		}
	}
}

// TestJSONPlanConcurrent runs one plan on several goroutines, for the race
// detector: Locate must not write to the plan.
func TestJSONPlanConcurrent(t *testing.T) {
	p := compileJSON(t, append(manyPaths(12, "?"), validJSONPaths...)...)
	done := make(chan error)
	for _, rec := range validJSONRecords {
		go func() {
			var f Found
			var err error
			for range 50 {
				if err = p.Locate([]byte(rec), &f); err != nil {
					break
				}
			}
			done <- err
		}()
	}
	for range validJSONRecords {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// referenceJSONRecord is the benchmark's 1 KiB reference record.
func referenceJSONRecord() []byte {
	return []byte(`{"id":"` + "3f2b9c1e-8d4a-4e6b-9a7c-5d1e2f3a4b5c" + `","status":"ACTIVE","ssn":"123-45-6789","notes":"` +
		strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 17)[:930] + `"}`)
}

func BenchmarkLocateJSON(b *testing.B) {
	rec := referenceJSONRecord()
	p := compileJSON(b, "ssn")
	var f Found
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Locate(rec, &f); err != nil {
			b.Fatal(err)
		}
	}
	if len(f.Spans) != 1 {
		b.Fatalf("%d spans", len(f.Spans))
	}
}
