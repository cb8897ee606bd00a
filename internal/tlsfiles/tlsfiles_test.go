package tlsfiles

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/testkit"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func serial(c *tls.Certificate) string { return c.Leaf.SerialNumber.String() }

// TestRotation: a changed pair is served from the next handshake after a
// look at the files; a broken one keeps the old certificate and is logged;
// several certificates are picked among by server name.
func TestRotation(t *testing.T) {
	ca := testkit.NewCA(t)
	dir := t.TempDir()
	a1, ak := testkit.WritePEM(t, dir, "a", ca.IssueServer(t, "kafka.example.com", "*.kafka.example.com"))
	b1, bk := testkit.WritePEM(t, dir, "b", ca.IssueServer(t, "other.example.org"))
	logs := &syncBuf{}
	c, err := Load([]Pair{{a1, ak}, {b1, bk}}, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c.now = func() time.Time { return now }
	get := func(name string) *tls.Certificate {
		cert, err := c.GetCertificate(&tls.ClientHelloInfo{ServerName: name, SupportedVersions: []uint16{tls.VersionTLS13},
			SignatureSchemes: []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256}})
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	first := serial(get("broker-3.kafka.example.com"))
	if got := get("other.example.org"); serial(got) == first {
		t.Error("the server name other.example.org got kafka.example.com's certificate")
	}
	if got := get("unknown.example.net"); serial(got) != first {
		t.Error("an unknown name did not get the first certificate")
	}

	// Rotate a: a new certificate and key.
	testkit.WritePEM(t, dir, "a", ca.IssueServer(t, "kafka.example.com", "*.kafka.example.com"))
	if serial(get("kafka.example.com")) != first {
		t.Error("the files were looked at again before a second passed")
	}
	now = now.Add(2 * time.Second)
	rotated := serial(get("kafka.example.com"))
	if rotated == first {
		t.Fatal("a rotated certificate was not served")
	}

	// A broken rotation: the key of another certificate.
	other := ca.IssueServer(t, "kafka.example.com")
	testkit.WritePEM(t, t.TempDir(), "x", other)
	certPEM, _ := os.ReadFile(b1)
	os.WriteFile(a1, certPEM, 0o600) // b's certificate with a's key: they do not match
	now = now.Add(2 * time.Second)
	if serial(get("kafka.example.com")) != rotated {
		t.Error("a broken new pair replaced the working certificate")
	}
	if !strings.Contains(logs.String(), "does not load; keeping the certificate in use") {
		t.Errorf("the broken pair was not logged:\n%s", logs)
	}
}
