package h2server

import (
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/straitgw/strait/internal/testkit"
)

// TestCurlAsClient: curl, whose HTTP/2 is nghttp2, decodes the server's
// header blocks (written without a dynamic table, the first on a
// connection opening with a table size update) and its trailers, and
// sends a body the handler reads. One request per connection: curl
// 7.88 fails to reuse a prior-knowledge connection for a second request
// against x/net's server as well as this one.
func TestCurlAsClient(t *testing.T) {
	curl := testkit.Tool(t, "curl", "apt-get install curl")
	if out, err := exec.Command(curl, "--version").Output(); err != nil || !strings.Contains(string(out), "nghttp2") {
		t.Fatalf("curl --version: %v, %s: want a curl built with nghttp2", err, out)
	}
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req-"+r.URL.Query().Get("n"))
		w.Header().Set("Trailer", "X-Total")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"got":"` + string(body) + `"}`))
		w.Header().Set("X-Total", "42")
	})}
	addr := serve(t, s)
	var got string
	for _, n := range []string{"1", "2"} {
		out, err := exec.Command(curl, "-sS", "--http2-prior-knowledge", "--max-time", "10", "-D", "-",
			"--data-binary", "body"+n, "http://"+addr+"/a?n="+n).CombinedOutput()
		if err != nil {
			t.Fatalf("curl: %v\n%s", err, out)
		}
		got += strings.ReplaceAll(string(out), "\r\n", "\n")
	}
	for _, want := range []string{
		"HTTP/2 201", "content-type: application/json\n", "trailer: X-Total\n", "x-request-id: req-1\n", "x-request-id: req-2\n",
		`{"got":"body1"}`, `{"got":"body2"}`, "x-total: 42\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("curl's output lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "HTTP/2 201"); n != 2 {
		t.Errorf("%d answers, want 2:\n%s", n, got)
	}
}
