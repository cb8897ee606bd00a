package jsonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheckSyntax(t *testing.T) {
	tests := []struct {
		in      string
		ok      bool
		okDupes bool // when duplicate keys are refused; defaults to ok
		reason  string
	}{
		{in: `{}`, ok: true},
		{in: ` [1, -0.5e+3, "x", true, false, null, {"a": []}] `, ok: true},
		{in: `"\u00e9\ud83d\ude00\n\/"`, ok: true},
		{in: `"lone \ud800 surrogate"`, ok: true},
		{in: `0`, ok: true},
		{in: ``, reason: "unexpected end of input, want a value"},
		{in: `{"a":1,}`, reason: `unexpected '}' in an object, want a string key`},
		{in: `[1,]`, reason: `unexpected ']', want a value`},
		{in: `01`, reason: "1 bytes after the top-level value"},
		{in: `1.`, reason: "invalid number: want a digit after the decimal point"},
		{in: `-`, reason: "invalid number: want a digit"},
		{in: `1e`, reason: "invalid number: want a digit in the exponent"},
		{in: `tru`, reason: "invalid literal, want true"},
		{in: `"abc`, reason: "unterminated string"},
		{in: "\"a\tb\"", reason: "control character byte 0x09 in a string"},
		{in: `"\x"`, reason: `invalid escape 'x'`},
		{in: `"\u12g4"`, reason: `invalid \u escape`},
		{in: "\"\xff\"", reason: "string is not valid UTF-8"},
		{in: "\"a\\n\xc3\"", reason: "string is not valid UTF-8"},
		{in: `{"a" 1}`, reason: `unexpected '1' after an object key, want ':'`},
		{in: `{"a":1 "b":2}`, reason: `unexpected '"' in an object, want ',' or '}'`},
		{in: `[1 2]`, reason: `unexpected '2' in an array, want ',' or ']'`},
		{in: `{1:2}`, reason: `unexpected '1' in an object, want a string key`},
		{in: `{"a":1} {}`, reason: "2 bytes after the top-level value"},
		{in: `{"a":1,"a":2}`, ok: true, reason: `duplicate key "a"`},
		{in: `{"a":1,"\u0061":2}`, ok: true, reason: `duplicate key "a"`},
		{in: `{"a":{"a":1},"b":{"a":2}}`, ok: true, okDupes: true},
		{in: `[{"k":1},{"k":2}]`, ok: true, okDupes: true},
		{in: `{"\u00e9x":1,"y":{"\u00e9x":[1]},"éx":2}`, ok: true, reason: `duplicate key "éx"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			for _, dupes := range []bool{false, true} {
				wantOK := tt.ok
				if dupes && tt.reason != "" {
					wantOK = tt.okDupes
				}
				if dupes && tt.okDupes {
					wantOK = true
				}
				opts := SyntaxOptions{RejectDuplicateKeys: dupes}
				for _, decode := range []bool{false, true} {
					var err error
					if decode {
						_, err = Decode([]byte(tt.in), opts)
					} else {
						err = CheckSyntax([]byte(tt.in), opts)
					}
					if (err == nil) != wantOK {
						t.Fatalf("dupes %v decode %v: got %v, want ok %v", dupes, decode, err, wantOK)
					}
					var se *SyntaxError
					if err != nil && (!errors.As(err, &se) || se.Reason != tt.reason) {
						t.Errorf("dupes %v decode %v: got %v, want reason %q", dupes, decode, err, tt.reason)
					}
				}
			}
		})
	}
}

func TestManyKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 40 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strings.Repeat("x", i) + `":1`)
	}
	doc := b.String()
	opts := SyntaxOptions{RejectDuplicateKeys: true}
	if err := CheckSyntax([]byte(doc+"}"), opts); err != nil {
		t.Fatalf("40 distinct keys: %v", err)
	}
	for _, dup := range []string{`"k"`, `"kxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"`} {
		if err := CheckSyntax([]byte(doc+","+dup+":2}"), opts); err == nil {
			t.Errorf("repeating %s after 40 keys: no error", dup)
		}
	}
}

func TestNesting(t *testing.T) {
	deep := strings.Repeat("[", maxNesting+1) + strings.Repeat("]", maxNesting+1)
	if err := CheckSyntax([]byte(deep), SyntaxOptions{}); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("%d levels: %v", maxNesting+1, err)
	}
	ok := strings.Repeat("[", 100) + strings.Repeat("]", 100)
	if err := CheckSyntax([]byte(ok), SyntaxOptions{}); err != nil {
		t.Errorf("100 levels: %v", err)
	}
}

func TestDecodeMatchesEncodingJSON(t *testing.T) {
	docs := []string{
		`{"a":[1,2.5,-3e2,{"b":null}],"c":"\u00e9\ud83d\ude00\ud800x","d":true,"a2":"\"\\\/\b\f\n\r\t"}`,
		`[]`, `""`, `123456789012345678901234567890`,
	}
	for _, d := range docs {
		got, err := Decode([]byte(d), SyntaxOptions{})
		if err != nil {
			t.Fatalf("Decode(%s): %v", d, err)
		}
		want := decodeStd(t, []byte(d))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Decode(%s) = %#v, want %#v", d, got, want)
		}
	}
}

func decodeStd(t testing.TB, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// FuzzSyntax compares the scanner with encoding/json, on whole inputs and
// on the two halves of a split one. Invariants: it never panics; it accepts
// exactly what encoding/json accepts, less invalid UTF-8; Decode returns
// what encoding/json decodes; refusing duplicate keys only ever refuses
// more; and the halves of a split document are never both accepted when
// one of them is an unclosed object or array.
func FuzzSyntax(f *testing.F) {
	f.Add([]byte(`{"a":[1,2,{"b":"c\u00e9"}],"d":-1.5e3}`), uint(5))
	f.Add([]byte(`{"a":1,"a":2}`), uint(3))
	f.Add([]byte(`["\ud83d\ude00", null, true]`), uint(9))
	f.Add([]byte("\"\xff\""), uint(1))
	f.Fuzz(func(t *testing.T, b []byte, cut uint) {
		err := CheckSyntax(b, SyntaxOptions{})
		stdOK := json.Valid(b) && utf8.Valid(b)
		if (err == nil) != stdOK {
			t.Fatalf("CheckSyntax(%q) = %v, encoding/json (and UTF-8) says ok %v", b, err, stdOK)
		}
		strictErr := CheckSyntax(b, SyntaxOptions{RejectDuplicateKeys: true})
		if err != nil && strictErr == nil {
			t.Fatalf("refusing duplicates accepts %q, which is not JSON", b)
		}
		_, decErr := Decode(b, SyntaxOptions{RejectDuplicateKeys: true})
		if (decErr == nil) != (strictErr == nil) {
			t.Fatalf("Decode and CheckSyntax disagree on %q: %v vs %v", b, decErr, strictErr)
		}
		if err == nil {
			got, _ := Decode(b, SyntaxOptions{})
			if want := decodeStd(t, b); !reflect.DeepEqual(got, want) {
				t.Fatalf("Decode(%q) = %#v, encoding/json gives %#v", b, got, want)
			}
		}
		if len(b) > 0 {
			k := int(cut % uint(len(b)))
			first := b[:k]
			if (bytes.Count(first, []byte("{")) > bytes.Count(first, []byte("}"))) &&
				!bytes.ContainsAny(first, `"\`) && CheckSyntax(first, SyntaxOptions{}) == nil {
				t.Fatalf("the unclosed first half %q validates", first)
			}
		}
	})
}

func BenchmarkCheckSyntax(b *testing.B) {
	doc := referenceJSON(b)
	for _, dupes := range []bool{false, true} {
		name := "dupes-allowed"
		if dupes {
			name = "dupes-refused"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				if err := CheckSyntax(doc, SyntaxOptions{RejectDuplicateKeys: dupes}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkJSONValid(b *testing.B) {
	doc := referenceJSON(b)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if !json.Valid(doc) {
			b.Fatal("invalid")
		}
	}
}
