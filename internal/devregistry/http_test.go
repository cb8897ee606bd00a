package devregistry_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/devregistry"
)

// These tests speak raw HTTP, to pin down what a client that is not
// franz-go's sees: status codes, error codes, content types and the exact
// members of each answer.

func TestErrorAnswers(t *testing.T) {
	s := start(t, devregistry.Options{MaxBodyBytes: 1 << 10})
	if r := do(t, s, "POST", "/subjects/s/versions", body(t, map[string]any{"schema": userV1})); r.status != 200 {
		t.Fatalf("registering: %d %s", r.status, r.body)
	}

	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		headers      []string
		status, code int
	}{
		{"unknown path", "GET", "/nothing/here", "", nil, 404, 404},
		{"wrong method", "PUT", "/subjects", "", nil, 405, 405},
		{"subject not found", "GET", "/subjects/nope/versions", "", nil, 404, 40401},
		{"version not found", "GET", "/subjects/s/versions/2", "", nil, 404, 40402},
		{"latest of an unknown subject", "GET", "/subjects/nope/versions/latest", "", nil, 404, 40401},
		{"schema id not found", "GET", "/schemas/ids/42", "", nil, 404, 40403},
		{"schema id not a number", "GET", "/schemas/ids/x", "", nil, 404, 40403},
		{"schema text id not found", "GET", "/schemas/ids/42/schema", "", nil, 404, 40403},
		{"version zero", "GET", "/subjects/s/versions/0", "", nil, 422, 42202},
		{"version not a number", "GET", "/subjects/s/versions/one", "", nil, 422, 42202},
		{"version below -1", "GET", "/subjects/s/versions/-2", "", nil, 422, 42202},
		{"version past 2^31-1", "GET", "/subjects/s/versions/2147483648", "", nil, 422, 42202},
		{"invalid version before unknown subject", "GET", "/subjects/nope/versions/0", "", nil, 422, 42202},
		{"delete invalid version", "DELETE", "/subjects/s/versions/x", "", nil, 422, 42202},
		{"subject compatibility not configured", "GET", "/config/s", "", nil, 404, 40408},
		{"delete unset subject compatibility", "DELETE", "/config/s", "", nil, 404, 40401},
		{"invalid compatibility level", "PUT", "/config", `{"compatibility":"SIDEWAYS"}`, nil, 422, 42203},
		{"subject mode not configured", "GET", "/mode/s", "", nil, 404, 40409},
		{"invalid mode", "PUT", "/mode", `{"mode":"IMPORT"}`, nil, 422, 42204},
		{"invalid schema", "POST", "/subjects/s/versions", `{"schema":"{\"type\":\"nope\"}"}`, nil, 422, 42201},
		{"missing schema", "POST", "/subjects/s/versions", `{"schemaType":"AVRO"}`, nil, 422, 42201},
		{"unknown schema type", "POST", "/subjects/s/versions", `{"schema":"{}","schemaType":"XML"}`, nil, 422, 42201},
		{"incompatible schema", "POST", "/subjects/s/versions", body(t, map[string]any{"schema": userNoDefault}), nil, 409, 409},
		{"id asked for", "POST", "/subjects/s/versions", body(t, map[string]any{"schema": userV2, "id": 77}), nil, 422, 42205},
		{"version asked for out of turn", "POST", "/subjects/s/versions", body(t, map[string]any{"schema": userV2, "version": 5}), nil, 422, 42202},
		{"invalid subject", "POST", "/subjects/a%01b/versions", body(t, map[string]any{"schema": userV1}), nil, 422, 42208},
		{"invalid subject config", "PUT", "/config/a%01b", `{"compatibility":"NONE"}`, nil, 422, 42208},
		{"malformed JSON", "POST", "/subjects/s/versions", `{"schema":`, nil, 400, 400},
		{"wrong JSON type", "POST", "/subjects/s/versions", `{"schema":5}`, nil, 422, 422},
		{"empty body", "POST", "/subjects/s/versions", "", nil, 422, 422},
		{"form content type", "POST", "/subjects/s/versions", `{"schema":"\"int\""}`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, 415},
		{"body too large", "POST", "/subjects/s/versions", `{"schema":"` + strings.Repeat(" ", 2<<10) + `\"int\""}`, nil, 413, 413},
		{"soft-deleted twice", "DELETE", "/subjects/nope", "", nil, 404, 40401},
		{"hard delete before soft", "DELETE", "/subjects/s?permanent=true", "", nil, 404, 40405},
		{"compatibility check, invalid version", "POST", "/compatibility/subjects/s/versions/0", body(t, map[string]any{"schema": userV2}), nil, 422, 42202},
		{"compatibility check, invalid schema", "POST", "/compatibility/subjects/s/versions/latest", `{"schema":"{"}`, nil, 422, 42201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, s, tc.method, tc.path, tc.body, tc.headers...)
			if r.status != tc.status {
				t.Errorf("status: got %d, want %d (body %s)", r.status, tc.status, r.body)
			}
			code, msg := r.errorBody(t)
			if code != tc.code {
				t.Errorf("error_code: got %d, want %d (%s)", code, tc.code, msg)
			}
			if msg == "" {
				t.Error("the error has no message")
			}
			if r.contentType != "application/vnd.schemaregistry.v1+json" {
				t.Errorf("content type: got %q", r.contentType)
			}
		})
	}

	if r := do(t, s, "PUT", "/subjects", ""); r.status != 405 || !strings.Contains(string(r.body), "405") {
		t.Errorf("405 answer: %d %s", r.status, r.body)
	}
}

func TestAnswerShapes(t *testing.T) {
	s := start(t, devregistry.Options{})

	// A plain application/json client is answered in plain JSON.
	r := do(t, s, "POST", "/subjects/avro/versions", body(t, map[string]any{"schema": userV1Spaced}),
		"Content-Type", "application/json", "Accept", "application/json")
	if r.status != 200 || string(r.body) != `{"id":1}` || r.contentType != "application/json" {
		t.Fatalf("register: got %d %q %s", r.status, r.contentType, r.body)
	}
	r = do(t, s, "POST", "/subjects/proto/versions", body(t, map[string]any{"schema": protoSchema, "schemaType": "protobuf"}))
	if r.status != 200 || string(r.body) != `{"id":2}` {
		t.Fatalf("register protobuf: got %d %s", r.status, r.body)
	}

	for _, tc := range []struct {
		path string
		want any
	}{
		// schemaType is left out for Avro, references when there are
		// none; the Avro text is stored compact.
		{"/schemas/ids/1", map[string]any{"schema": userV1}},
		{"/schemas/ids/2", map[string]any{"schema": protoSchema, "schemaType": "PROTOBUF"}},
		{"/subjects/avro/versions/1", map[string]any{"subject": "avro", "version": 1.0, "id": 1.0, "schema": userV1}},
		{"/subjects/proto/versions/latest", map[string]any{"subject": "proto", "version": 1.0, "id": 2.0, "schemaType": "PROTOBUF", "schema": protoSchema}},
		{"/subjects", []any{"avro", "proto"}},
		{"/subjects?subjectPrefix=pr", []any{"proto"}},
		{"/subjects/avro/versions", []any{1.0}},
		{"/schemas/ids/1/versions", []any{map[string]any{"subject": "avro", "version": 1.0}}},
		{"/schemas/ids/2/subjects", []any{"proto"}},
		{"/schemas/types", []any{"JSON", "PROTOBUF", "AVRO"}},
		{"/subjects/avro/versions/1/referencedby", []any{}},
		{"/config", map[string]any{"compatibilityLevel": "BACKWARD"}},
		{"/config/avro?defaultToGlobal=true", map[string]any{"compatibilityLevel": "BACKWARD"}},
		{"/mode", map[string]any{"mode": "READWRITE"}},
		{"/", map[string]any{}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r := do(t, s, "GET", tc.path, "")
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			var got any
			if err := json.Unmarshal(r.body, &got); err != nil {
				t.Fatalf("body %q: %v", r.body, err)
			}
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(tc.want)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("got %s, want %s", gotJSON, wantJSON)
			}
			if r.contentType != "application/vnd.schemaregistry.v1+json" {
				t.Errorf("content type: got %q", r.contentType)
			}
		})
	}

	// The .../schema endpoints answer with the schema text itself.
	if r := do(t, s, "GET", "/subjects/proto/versions/1/schema", ""); r.status != 200 || string(r.body) != protoSchema {
		t.Errorf("schema text by version: got %d %q", r.status, r.body)
	}
	if r := do(t, s, "GET", "/schemas/ids/1/schema", ""); r.status != 200 || string(r.body) != userV1 {
		t.Errorf("schema text by id: got %d %q", r.status, r.body)
	}

	// A subject holding a slash is one path segment when escaped.
	if r := do(t, s, "POST", "/subjects/team%2Forders/versions", body(t, map[string]any{"schema": `"string"`})); r.status != 200 {
		t.Errorf("subject with a slash: %d %s", r.status, r.body)
	}
	if r := do(t, s, "GET", "/subjects/team%2Forders/versions/1", ""); r.status != 200 || !strings.Contains(string(r.body), `"subject":"team/orders"`) {
		t.Errorf("fetching it: %d %s", r.status, r.body)
	}

	// PUT /config answers with the key it was sent; DELETE with the one
	// GET uses, holding the level it replaced.
	if r := do(t, s, "PUT", "/config/avro", `{"compatibility":"full"}`); string(r.body) != `{"compatibility":"FULL"}` {
		t.Errorf("PUT /config/avro: got %s", r.body)
	}
	if r := do(t, s, "DELETE", "/config/avro", ""); string(r.body) != `{"compatibilityLevel":"FULL"}` {
		t.Errorf("DELETE /config/avro: got %s", r.body)
	}
	do(t, s, "PUT", "/config", `{"compatibility":"NONE"}`)
	if r := do(t, s, "DELETE", "/config", ""); string(r.body) != `{"compatibilityLevel":"NONE"}` {
		t.Errorf("DELETE /config: got %s", r.body)
	}
	if r := do(t, s, "GET", "/config", ""); string(r.body) != `{"compatibilityLevel":"BACKWARD"}` {
		t.Errorf("GET /config after DELETE: got %s", r.body)
	}

	// Compatibility answers: is_compatible alone, messages with verbose.
	r = do(t, s, "POST", "/compatibility/subjects/avro/versions/latest", body(t, map[string]any{"schema": userV2}))
	if string(r.body) != `{"is_compatible":true}` {
		t.Errorf("compatibility: got %s", r.body)
	}
	r = do(t, s, "POST", "/compatibility/subjects/avro/versions/latest?verbose=true", body(t, map[string]any{"schema": userV2}))
	if string(r.body) != `{"is_compatible":true,"messages":[]}` {
		t.Errorf("verbose compatibility: got %s", r.body)
	}

	// Deletes answer with the version numbers.
	if r := do(t, s, "DELETE", "/subjects/avro/versions/latest", ""); r.status != 200 || string(r.body) != "1" {
		t.Errorf("delete latest: got %d %s", r.status, r.body)
	}
	if r := do(t, s, "DELETE", "/subjects/proto", ""); r.status != 200 || string(r.body) != "[1]" {
		t.Errorf("delete subject: got %d %s", r.status, r.body)
	}
	if r := do(t, s, "GET", "/subjects?deletedOnly=true", ""); string(r.body) != `["avro","proto"]` {
		t.Errorf("deletedOnly subjects: got %s", r.body)
	}
	if r := do(t, s, "HEAD", "/subjects", ""); r.status != 200 || len(r.body) != 0 {
		t.Errorf("HEAD: got %d with %d bytes", r.status, len(r.body))
	}
	if r := do(t, s, "GET", "/subjects/avro/versions/1", ""); r.status != http.StatusNotFound {
		t.Errorf("a soft-deleted version: got %d", r.status)
	}
	if r := do(t, s, "GET", "/subjects/avro/versions/1?deleted=true", ""); r.status != 200 {
		t.Errorf("a soft-deleted version with deleted=true: got %d", r.status)
	}
}
