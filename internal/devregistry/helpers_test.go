package devregistry_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/devregistry"
	"github.com/twmb/franz-go/pkg/sr"
)

// Schemas the tests register. userV2 adds a field with a default to userV1,
// which BACKWARD allows; userNoDefault adds one without, which it refuses.
const (
	userV1        = `{"type":"record","name":"User","namespace":"com.example","fields":[{"name":"name","type":"string"}]}`
	userV1Spaced  = "{\n  \"type\": \"record\",\n  \"name\": \"User\",\n  \"namespace\": \"com.example\",\n  \"fields\": [ {\"name\": \"name\", \"type\": \"string\"} ]\n}"
	userV2        = `{"type":"record","name":"User","namespace":"com.example","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","default":0}]}`
	userNoDefault = `{"type":"record","name":"User","namespace":"com.example","fields":[{"name":"name","type":"string"},{"name":"email","type":"string"}]}`
	jsonSchema    = `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`
	protoSchema   = "syntax = \"proto3\";\npackage demo;\n\n// An order.\nmessage Order {\n  string id = 1;\n  int64 cents = 2;\n}\n"
)

// start runs a registry on a free loopback port for the test.
func start(t *testing.T, opts devregistry.Options) *devregistry.Server {
	t.Helper()
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	s, err := devregistry.Start(opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// client is franz-go's registry client, configured for s.
func client(t *testing.T, s *devregistry.Server) *sr.Client {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(s.URL()))
	if err != nil {
		t.Fatalf("sr.NewClient: %v", err)
	}
	return cl
}

// wantCode fails unless err is the registry error with the given code.
func wantCode(t *testing.T, err error, code int) {
	t.Helper()
	var re *sr.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("got error %v, want a registry error with code %d", err, code)
	}
	if re.ErrorCode != code {
		t.Fatalf("got error code %d (%s), want %d", re.ErrorCode, re.Message, code)
	}
}

// response is a raw HTTP answer.
type response struct {
	status      int
	contentType string
	body        []byte
}

// errorBody decodes the registry's error format, failing if the body is not
// in it.
func (r response) errorBody(t *testing.T) (code int, msg string) {
	t.Helper()
	var e struct {
		ErrorCode *int   `json:"error_code"`
		Message   string `json:"message"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.ErrorCode == nil {
		t.Fatalf("body %q is not a registry error (%v)", r.body, err)
	}
	return *e.ErrorCode, e.Message
}

// do sends a raw request; body "" sends none. Headers come in pairs.
func do(t *testing.T, s *devregistry.Server, method, path, body string, headers ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header.Get("Content-Type"), b}
}

// body encodes a registration body.
func body(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
