package schema

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeRegistry answers the lookups of the Confluent Schema Registry REST
// API as its documentation describes them: the same paths, bodies, status
// codes and error codes (40401 subject not found, 40402 version not found,
// 40403 schema not found, 42202 invalid version, 50001 store error). AVRO
// schemas are served without schemaType, which the API defines as AVRO.
type fakeRegistry struct {
	srv *httptest.Server

	mu       sync.Mutex
	schemas  []fakeSchema     // id i+1
	subjects map[string][]int // subject → ids of versions 1, 2, ...
	requests map[string]int   // path → count
	auth     string           // Authorization header required, if set
	seenAuth []string         // Authorization headers received
	gate     chan struct{}    // when set, lookups wait for it to close
	down     atomic.Bool      // answer 500 / 50001
	total    atomic.Int64     // requests of any path
}

type fakeSchema struct {
	Schema     string      `json:"schema"`
	Type       string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
}

func newFakeRegistry(t *testing.T) *fakeRegistry {
	t.Helper()
	f := &fakeRegistry{subjects: map[string][]int{}, requests: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /schemas/ids/{id}", f.schemaByID)
	mux.HandleFunc("GET /schemas/ids/{id}/versions", f.versionsByID)
	mux.HandleFunc("GET /subjects/{subject}/versions/{version}", f.subjectVersion)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Unknown paths: the registry's generic 404, without a 404xx code.
		writeJSON(w, http.StatusNotFound, map[string]any{"error_code": 404, "message": "HTTP 404 Not Found"})
	})
	f.srv = httptest.NewUnstartedServer(f.wrap(mux))
	return f
}

func (f *fakeRegistry) start(t *testing.T) *fakeRegistry {
	t.Helper()
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeRegistry) url() string { return f.srv.URL }

func (f *fakeRegistry) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.total.Add(1)
		f.mu.Lock()
		f.requests[r.URL.Path]++
		f.seenAuth = append(f.seenAuth, r.Header.Get("Authorization"))
		auth, gate := f.auth, f.gate
		f.mu.Unlock()
		if gate != nil {
			<-gate
		}
		if f.down.Load() {
			writeJSON(w, http.StatusInternalServerError, map[string]any{"error_code": 50001, "message": "Error in the backend data store"})
			return
		}
		if auth != "" && r.Header.Get("Authorization") != auth {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error_code": 401, "message": "Unauthorized"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// register adds s under subject as its next version and returns its id;
// an identical schema registered before keeps its id, as in the registry.
func (f *fakeRegistry) register(subject string, s fakeSchema) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := 0
	for i, o := range f.schemas {
		if o.Schema == s.Schema && o.Type == s.Type {
			id = i + 1
		}
	}
	if id == 0 {
		f.schemas = append(f.schemas, s)
		id = len(f.schemas)
	}
	f.subjects[subject] = append(f.subjects[subject], id)
	return id
}

func (f *fakeRegistry) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[path]
}

func (f *fakeRegistry) schemaByID(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.Atoi(r.PathValue("id"))
	f.mu.Lock()
	defer f.mu.Unlock()
	if id < 1 || id > len(f.schemas) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error_code": 40403, "message": "Schema " + strconv.Itoa(id) + " not found"})
		return
	}
	writeJSON(w, http.StatusOK, f.schemas[id-1])
}

func (f *fakeRegistry) versionsByID(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.Atoi(r.PathValue("id"))
	f.mu.Lock()
	defer f.mu.Unlock()
	if id < 1 || id > len(f.schemas) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error_code": 40403, "message": "Schema " + strconv.Itoa(id) + " not found"})
		return
	}
	out := []SubjectVersion{}
	for subject, ids := range f.subjects {
		for v, sid := range ids {
			if sid == id {
				out = append(out, SubjectVersion{Subject: subject, Version: v + 1})
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (f *fakeRegistry) subjectVersion(w http.ResponseWriter, r *http.Request) {
	subject, vs := r.PathValue("subject"), r.PathValue("version")
	f.mu.Lock()
	defer f.mu.Unlock()
	ids, ok := f.subjects[subject]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"error_code": 40401, "message": "Subject '" + subject + "' not found."})
		return
	}
	v := len(ids)
	if vs != "latest" && vs != "-1" {
		n, err := strconv.Atoi(vs)
		if err != nil || n < 1 || n > 1<<31-1 {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"error_code": 42202, "message": "The specified version '" + vs + "' is not a valid version id."})
			return
		}
		v = n
	}
	if v > len(ids) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error_code": 40402, "message": "Version " + vs + " not found."})
		return
	}
	s := f.schemas[ids[v-1]-1]
	writeJSON(w, http.StatusOK, map[string]any{
		"subject": subject, "version": v, "id": ids[v-1],
		"schema": s.Schema, "schemaType": s.Type, "references": s.References,
	})
}

// waitFor polls cond until it holds or ten seconds pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// clock is a settable clock for the caches.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
