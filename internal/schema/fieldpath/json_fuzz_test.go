package fieldpath

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzLocateJSON feeds arbitrary bytes to two plans, one whose targets are
// all optional and one that requires its fields. Invariants: Locate never
// panics; what it accepts encoding/json accepts (but for raw control
// characters in strings, which Locate leaves unchecked), and what
// encoding/json accepts is never refused as not JSON; its spans are string
// contents, in order; replacing each value with its base64url and locating
// again finds as many spans, and splicing the originals back gives the
// input byte for byte; a record cut at split is refused if the whole was
// accepted.
func FuzzLocateJSON(f *testing.F) {
	for _, rec := range validJSONRecords {
		f.Add([]byte(rec), uint16(len(rec)/2))
	}
	f.Add(referenceJSONRecord(), uint16(60))
	f.Add([]byte(`{"ssn":"1","customer":{"card":"2"},"l":["a","b"]}`), uint16(20))
	f.Add([]byte(`{"s\u0073n":"\"","customer":{"card":null,"c\u0061rd":"x"},"l":[1,"\ud83d\ude00"]}`), uint16(9))
	f.Add([]byte(`{"cards":[{"number":"1","number":"2"}],"ssn":"x"}`), uint16(3))
	f.Add([]byte(`{"m":{"a":"1","b":[1,2,{"c":"\\"}]},"ssn":"x"}`), uint16(30))
	f.Add([]byte(`{"ssn":"1","x":`+strings.Repeat("[", 1001)+strings.Repeat("]", 1001)+`}`), uint16(1000))
	f.Add([]byte(`{"ssn":1.5e-7}`), uint16(0))
	f.Add([]byte(` null `), uint16(3))
	f.Add([]byte(`[]`), uint16(1))
	f.Add([]byte{}, uint16(0))

	plans := []*JSONPlan{
		compileJSON(f, validJSONPaths...),
		compileJSON(f, "ssn", "customer.card", "l[1]", "cards[*].number?"),
	}
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		var fd Found
		for _, p := range plans {
			err := p.Locate(data, &fd)
			checkAgainstEncodingJSON(t, data, err)
			cut := data[:int(split)%(len(data)+1)]
			cutErr := p.Locate(cut, new(Found))
			if err != nil {
				continue
			}
			if cutErr == nil && len(cut) < len(bytes.TrimRight(data, " \t\r\n")) {
				t.Fatalf("the first %d bytes of %q locate", len(cut), data)
			}
			checkSpans(t, data, &fd, len(p.Targets()))
			out, err := Splice(nil, data, &fd, func(dst []byte, _ *Span, val []byte) ([]byte, error) {
				return base64.RawURLEncoding.AppendEncode(dst, val), nil
			})
			if err != nil {
				t.Fatalf("splicing %q: %v", data, err)
			}
			if back := spliceBack(t, p, data, &fd, out); !bytes.Equal(back, data) {
				t.Fatalf("%q spliced to %q and back to %q", data, out, back)
			}
		}
	})
}

func checkAgainstEncodingJSON(t *testing.T, data []byte, err error) {
	t.Helper()
	if err == nil {
		// Locate copies string contents as they are; encoding/json refuses
		// raw control characters in them.
		clean := bytes.Map(func(r rune) rune {
			if r < 0x20 {
				return ' '
			}
			return r
		}, data)
		if !json.Valid(clean) {
			t.Fatalf("Locate accepts %q, encoding/json refuses it", data)
		}
		return
	}
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("%q: error %v is not an *Error", data, err)
	}
	if strings.HasPrefix(fe.Reason, "not JSON") && json.Valid(data) {
		t.Fatalf("%q: %v, but encoding/json accepts it", data, err)
	}
}

// checkSpans checks f's spans of body: the contents of strings, in record
// order, naming targets the plan has.
func checkSpans(t *testing.T, body []byte, f *Found, targets int) {
	t.Helper()
	end := 0
	for _, s := range f.Spans {
		if s.Target < 0 || s.Target >= targets || s.Len != NoLen || s.Bytes || s.LenAt != s.Start ||
			s.Start < end+1 || s.End < s.Start || s.End >= len(body) || body[s.Start-1] != '"' || body[s.End] != '"' {
			t.Fatalf("span %+v of %q", s, body)
		}
		end = s.End + 1
	}
	if len(f.Frames) != 0 {
		t.Fatalf("frames in %q", body)
	}
}
