package gateway

import (
	"net/http"
	"testing"
)

// The provider's request id reaches clients of either dialect: Anthropic
// SDKs read request-id, OpenAI SDKs x-request-id.
func TestCopyResponseIDsUnderBothNames(t *testing.T) {
	for _, from := range []string{"Request-Id", "X-Request-Id"} {
		src, dst := http.Header{}, http.Header{}
		src.Set(from, "req_123")
		copyResponseIDs(dst, src, nil)
		if dst.Get("Request-Id") != "req_123" || dst.Get("X-Request-Id") != "req_123" {
			t.Errorf("from %s: got %v", from, dst)
		}
	}
	dst := http.Header{}
	copyResponseIDs(dst, http.Header{}, nil)
	if len(dst) != 0 {
		t.Errorf("no id: got %v", dst)
	}
}
