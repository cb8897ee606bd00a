package devregistry

import (
	"strconv"
	"testing"
)

// BenchmarkSchemaByID is the request every consumer's deserializer makes for
// an id it has not seen.
func BenchmarkSchemaByID(b *testing.B) {
	r := seeded(b)
	b.ReportAllocs()
	for b.Loop() {
		if w := serve(r, "GET", "/schemas/ids/2", "", nil); w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}

// BenchmarkRegisterKnown is the registration every producer's serializer
// makes at start for a schema the registry already holds: it parses the
// schema (with its reference) and answers the existing id.
func BenchmarkRegisterKnown(b *testing.B) {
	r := seeded(b)
	body := []byte(`{"schema":"{\"type\":\"record\",\"name\":\"C\",\"fields\":[{\"name\":\"a\",\"type\":\"A\"}]}","references":[{"name":"A","subject":"address","version":1}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if w := serve(r, "POST", "/subjects/customer/versions", "", body); w.Code != 200 {
			b.Fatal(w.Code, w.Body)
		}
	}
}

// BenchmarkRegisterNewPersisted registers a new version per iteration with
// a data directory: the whole state is rewritten and synced each time.
func BenchmarkRegisterNewPersisted(b *testing.B) {
	r, err := New(Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	if w := serve(r, "PUT", "/config", "", []byte(`{"compatibility":"NONE"}`)); w.Code != 200 {
		b.Fatal(w.Code)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		body := []byte(`{"schema":"{\"type\":\"fixed\",\"name\":\"F\",\"size\":` + strconv.Itoa(i) + `}"}`)
		if w := serve(r, "POST", "/subjects/s/versions", "", body); w.Code != 200 {
			b.Fatal(w.Code, w.Body)
		}
	}
}
