package cli_test

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/testkit"
)

// `strait registry --data-dir` serves the Confluent REST API, and a schema
// registered before a restart is found by its id after it.
func TestRegistryCommand(t *testing.T) {
	needBinary(t)
	t.Parallel()
	dir := t.TempDir()
	var port int
	var args []string
	r := startOnFreePorts(t, func() (*proc, error) {
		port = testkit.PortBlock(t, 1)
		args = []string{"registry", "--listen", addr(port), "--data-dir", dir}
		p := startStrait(t, args...)
		return p, p.listening(addr(port))
	})
	r.waitOutput(r.stdout, "serving http://"+addr(port), readyTimeout)

	base := "http://" + addr(port)
	body := `{"schema":"{\"type\":\"record\",\"name\":\"Order\",\"fields\":[{\"name\":\"id\",\"type\":\"string\"}]}"}`
	resp, err := http.Post(base+"/subjects/orders-value/versions", "application/vnd.schemaregistry.v1+json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("register: HTTP %d, want 200", resp.StatusCode)
	}
	r.signalAndWait(syscall.SIGTERM, 20*time.Second)

	r2 := startStrait(t, args...)
	r2.waitListening(addr(port))
	code, got, err := httpGet(base + "/subjects/orders-value/versions/latest")
	if err != nil || code != 200 || !strings.Contains(got, `"id":1`) || !strings.Contains(got, "Order") {
		t.Fatalf("after a restart on the same --data-dir, GET latest: %d %s %v", code, got, err)
	}
	code, got, _ = httpGet(base + "/subjects/missing-value/versions/latest")
	if code != 404 || !strings.Contains(got, "40401") {
		t.Errorf("unknown subject: %d %s, want 404 with error_code 40401", code, got)
	}
}
