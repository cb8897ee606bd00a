package translate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
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
	targets := []func() any{
		func() any { return new(oaRequestIn) },
		func() any { return new(anRequestIn) },
		func() any { return new(anResponse) },
		func() any { return new(oaResponse) },
		func() any { return new(oaChunk) },
		func() any { return new(anEvent) },
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
			// And unmarshal itself: the fast value, or encoding/json's error.
			got := newV()
			if err := unmarshal(body, got); (err == nil) != (errStd == nil) ||
				(err != nil && err.Error() != errStd.Error()) {
				t.Fatalf("%T: unmarshal returned %v, encoding/json %v", std, err, errStd)
			}
		}
	})
}
