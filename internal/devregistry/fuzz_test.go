package devregistry

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// serve sends one request straight to the registry's handler.
func serve(r *Registry, method, target, contentType string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://registry/", bytes.NewReader(body))
	// Set the target after NewRequest, which panics on what it cannot
	// parse; a client can still send such paths, escaped.
	req.URL.Path = target
	req.URL.RawPath = ""
	if i := strings.IndexByte(target, '?'); i >= 0 {
		req.URL.Path, req.URL.RawQuery = target[:i], target[i+1:]
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	return w
}

// seeded returns a registry holding an Avro schema, a reference to it, a
// JSON schema and a Protobuf schema, one of them soft-deleted.
func seeded(tb testing.TB) *Registry {
	tb.Helper()
	r, err := New(Options{})
	if err != nil {
		tb.Fatal(err)
	}
	for _, reg := range []struct{ subject, body string }{
		{"address", `{"schema":"{\"type\":\"record\",\"name\":\"A\",\"fields\":[{\"name\":\"c\",\"type\":\"string\"}]}"}`},
		{"customer", `{"schema":"{\"type\":\"record\",\"name\":\"C\",\"fields\":[{\"name\":\"a\",\"type\":\"A\"}]}","references":[{"name":"A","subject":"address","version":1}]}`},
		{"events", `{"schemaType":"JSON","schema":"{\"type\":\"object\"}"}`},
		{"orders", `{"schemaType":"PROTOBUF","schema":"syntax = \"proto3\"; message O { int64 id = 1; }"}`},
		{"old", `{"schema":"\"int\""}`},
	} {
		if w := serve(r, "POST", "/subjects/"+reg.subject+"/versions", "", []byte(reg.body)); w.Code != 200 {
			tb.Fatalf("seeding %s: %d %s", reg.subject, w.Code, w.Body)
		}
	}
	if w := serve(r, "DELETE", "/subjects/old", "", nil); w.Code != 200 {
		tb.Fatalf("seeding a soft delete: %d %s", w.Code, w.Body)
	}
	return r
}

// statuses a request can be answered with; 500 is not among them, as no
// input may make the registry fail.
var statuses = map[int]bool{200: true, 400: true, 404: true, 405: true, 409: true, 413: true, 415: true, 422: true}

// checkAnswer states what every answer must be: an expected status, and for
// an error the registry's error format with a code belonging to the status.
func checkAnswer(t *testing.T, method, target string, w *httptest.ResponseRecorder) {
	t.Helper()
	if !statuses[w.Code] {
		t.Fatalf("%s %q: status %d: %s", method, target, w.Code, w.Body)
	}
	if w.Code == 200 {
		if method != "HEAD" && !strings.HasSuffix(strings.SplitN(target, "?", 2)[0], "/schema") && !json.Valid(w.Body.Bytes()) {
			t.Fatalf("%s %q: 200 with a body that is not JSON: %q", method, target, w.Body)
		}
		return
	}
	if method == "HEAD" {
		return
	}
	var e struct {
		ErrorCode int    `json:"error_code"`
		Message   string `json:"message"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Message == "" {
		t.Fatalf("%s %q: error body %q is not the registry's format (%v)", method, target, w.Body, err)
	}
	if e.ErrorCode != w.Code && e.ErrorCode/100 != w.Code {
		t.Fatalf("%s %q: error_code %d does not belong to status %d", method, target, e.ErrorCode, w.Code)
	}
}

var fuzzMethods = []string{"GET", "POST", "PUT", "DELETE", "HEAD", "PATCH"}

// FuzzHandler sends arbitrary requests to a registry with some state and
// checks that each gets a well-formed answer and never a failure.
func FuzzHandler(f *testing.F) {
	for _, seed := range []struct {
		method     byte
		target, ct string
		body       string
	}{
		{0, "/subjects", "", ""},
		{0, "/subjects/customer/versions/latest", "", ""},
		{0, "/subjects/old/versions/1?deleted=true", "", ""},
		{0, "/schemas/ids/2", "", ""},
		{0, "/schemas/ids/1/versions?deleted=true", "", ""},
		{0, "/subjects/address/versions/1/referencedby", "", ""},
		{1, "/subjects/address/versions", "application/json", `{"schema":"{\"type\":\"record\",\"name\":\"A\",\"fields\":[{\"name\":\"c\",\"type\":\"string\"},{\"name\":\"d\",\"type\":\"int\",\"default\":1}]}"}`},
		{1, "/subjects/address", "", `{"schema":"{\"type\":\"record\",\"name\":\"A\",\"fields\":[{\"name\":\"c\",\"type\":\"string\"}]}"}`},
		{1, "/subjects/x/versions", "", `{"schema":"{\"type\":\"record\",\"name\":\"B\",\"fields\":[{\"name\":\"a\",\"type\":\"A\"}]}","references":[{"name":"A","subject":"address","version":-1}]}`},
		{1, "/subjects/p/versions", "", `{"schemaType":"PROTOBUF","schema":"message M { oneof x { int32 a = 1; } }"}`},
		{1, "/compatibility/subjects/address/versions?verbose=true", "", `{"schema":"\"string\""}`},
		{2, "/config/address", "", `{"compatibility":"FULL_TRANSITIVE"}`},
		{3, "/subjects/old?permanent=true", "", ""},
		{3, "/subjects/address/versions/1", "", ""},
		{3, "/config", "", ""},
		{1, "/subjects/x/versions", "text/plain", `{}`},
		{1, "/subjects/x/versions", "", `{"schema":null,"references":[{}]}`},
		{5, "/subjects", "", ""},
	} {
		f.Add(seed.method, seed.target, seed.ct, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, m byte, target, contentType string, body []byte) {
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		r := seeded(t)
		r.maxBody = 1 << 12
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		checkAnswer(t, method, target, serve(r, method, target, contentType, body))
		// Whatever the request did, the state must still be one that
		// persists and loads back the same.
		r.mu.RLock()
		defer r.mu.RUnlock()
		roundTrip(t, r.st)
	})
}

// roundTrip encodes st as the state file and decodes it back, failing
// unless the result equals st.
func roundTrip(t *testing.T, st *state) {
	t.Helper()
	data, err := encodeState(st)
	if err != nil {
		t.Fatalf("encoding the state: %v", err)
	}
	back, err := decodeState(data)
	if err != nil {
		t.Fatalf("decoding the state back: %v", err)
	}
	if !reflect.DeepEqual(normalized(back), normalized(st)) {
		t.Fatalf("the state changed through an encode and a decode:\n%+v\n%+v", back, st)
	}
}

// normalized makes empty and nil slices compare equal.
func normalized(st *state) *state {
	c := st.clone()
	for id, rec := range c.schemas {
		if len(rec.References) == 0 {
			rec.References = nil
			c.schemas[id] = rec
		}
	}
	return c
}

// FuzzRegister registers arbitrary schemas and checks the registry's promises
// about the ones it accepts: registering again returns the same id without a
// new version, a lookup finds the schema, and the text it serves by id
// registers to the same id.
func FuzzRegister(f *testing.F) {
	for _, seed := range []struct{ typ, schema string }{
		{"", `{"type":"record","name":"R","fields":[{"name":"a","type":["null","string"],"default":null}]}`},
		{"AVRO", `{"type":"enum","name":"E","symbols":["A","B"]}`},
		{"avro", `{"type":"array","items":{"type":"map","values":"long"}}`},
		{"", `{"type":"fixed","name":"F","size":16}`},
		{"", `["null","int"]`},
		{"", `{"type":"int","logicalType":"date"}`},
		{"", `{"type":"record","name":"N","fields":[{"name":"n","type":["null","N"]}]}`},
		{"JSON", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`},
		{"JSON", `true`},
		{"PROTOBUF", "syntax = \"proto3\";\nmessage A { repeated string s = 1; }"},
		{"PROTOBUF", "enum E { X = 0; }"},
		{"", `{"type":"record","name":"X"}`},
		{"XML", `<a/>`},
	} {
		f.Add(seed.typ, seed.schema)
	}
	f.Fuzz(func(t *testing.T, typ, schema string) {
		r := seeded(t)
		reg := func(subject, text string) *httptest.ResponseRecorder {
			b, _ := json.Marshal(map[string]string{"schemaType": typ, "schema": text})
			return serve(r, "POST", "/subjects/"+subject+"/versions", "", b)
		}
		w := reg("fuzz", schema)
		checkAnswer(t, "POST", "/subjects/fuzz/versions", w)
		if w.Code != 200 {
			if w.Code != 422 {
				t.Fatalf("a schema was refused with %d, not 422: %s", w.Code, w.Body)
			}
			return
		}
		var got struct{ ID int }
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.ID < 1 {
			t.Fatalf("registration answer %q", w.Body)
		}
		if w := reg("fuzz", schema); w.Code != 200 || !strings.Contains(w.Body.String(), `"id":`+strconv.Itoa(got.ID)+"}") {
			t.Fatalf("registering again: %d %s, want id %d", w.Code, w.Body, got.ID)
		}
		if w := serve(r, "GET", "/subjects/fuzz/versions", "", nil); w.Body.String() != "[1]" {
			t.Fatalf("registering again made a version: %s", w.Body)
		}
		b, _ := json.Marshal(map[string]string{"schemaType": typ, "schema": schema})
		if w := serve(r, "POST", "/subjects/fuzz", "", b); w.Code != 200 {
			t.Fatalf("lookup: %d %s", w.Code, w.Body)
		}
		text := serve(r, "GET", "/schemas/ids/"+strconv.Itoa(got.ID)+"/schema", "", nil)
		if w := reg("other", text.Body.String()); w.Code != 200 || !strings.Contains(w.Body.String(), `"id":`+strconv.Itoa(got.ID)+"}") {
			t.Fatalf("the served text %q registered as %d %s, want id %d", text.Body, w.Code, w.Body, got.ID)
		}
	})
}

// FuzzCheckProto feeds the Protobuf check arbitrary text, whole and in two
// parts, and checks what it promises about appending: a comment never
// changes a verdict on valid text, and a stray } always makes it invalid.
func FuzzCheckProto(f *testing.F) {
	for _, seed := range []string{
		"syntax = \"proto3\";\nmessage A { string b = 1; }",
		"message A { string b = 1 [default = \"}{\"]; } /* c */",
		"edition = \"2023\"; enum E { X = 0; }",
		"service S { rpc M(A) returns (stream B) {} }",
		"message A { \"\\",
		"/*",
		"{}",
	} {
		f.Add(seed, uint(len(seed)/2))
	}
	f.Fuzz(func(t *testing.T, text string, cut uint) {
		cut %= uint(len(text) + 1)
		_ = checkProto(text[:cut]) // a prefix, as a truncated upload would be
		err := checkProto(text)
		if err != nil {
			return
		}
		if err := checkProto(text + "\n// trailing comment\n"); err != nil {
			t.Fatalf("a trailing comment made valid text invalid: %v", err)
		}
		if checkProto(text+"\n}") == nil {
			t.Fatal("a stray } was accepted")
		}
	})
}

// FuzzDecodeState feeds the state loader arbitrary files: it must refuse or
// load them, and what it loads must write and read back unchanged.
func FuzzDecodeState(f *testing.F) {
	f.Add([]byte(`{"format":1,"next_id":3,"compatibility":"BACKWARD","subject_compatibility":{"s":"none"},"schemas":[{"id":1,"schemaType":"AVRO","schema":"\"int\""},{"id":2,"schemaType":"AVRO","schema":"\"long\"","references":[{"name":"x","subject":"s","version":1}]}],"subjects":{"s":[{"version":1,"id":1},{"version":3,"id":2,"deleted":true}]}}`))
	f.Add([]byte(`{"format":1,"next_id":1,"compatibility":"NONE","schemas":[],"subjects":{}}`))
	f.Add([]byte(`{"format":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := decodeState(data)
		if err != nil {
			return
		}
		roundTrip(t, st)
	})
}
