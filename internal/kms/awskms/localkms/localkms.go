// Package localkms runs github.com/nsmithuk/local-kms, a local server of the AWS KMS JSON API, for tests: the
// AWS KMS backend is tested against a real KMS server through the official SDK, not against a mock of our
// own. test/interop/install-deps.sh installs it (go install); a test that needs it skips when it is missing,
// or fails under STRAIT_REQUIRE_INTEROP=1.
package localkms

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// Module is the local-kms version the tests are written against; install-deps.sh installs this one.
const Module = "github.com/nsmithuk/local-kms@v0.0.0-20260228092603-2a5e92d09ab6"

// Region and credentials the tests use. local-kms checks no signature, but the SDK signs every request.
const (
	Region    = "eu-west-2"
	AccessKey = "strait-test"
	SecretKey = "strait-test-secret"
)

// Credentials are static test credentials.
var Credentials = credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")

// Binary finds local-kms: $STRAIT_LOCAL_KMS, then PATH, then go install's directory.
func Binary() (string, error) {
	if p := os.Getenv("STRAIT_LOCAL_KMS"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("local-kms"); err == nil {
		return p, nil
	}
	gobin := os.Getenv("GOBIN")
	if gobin == "" {
		out, err := exec.Command("go", "env", "GOPATH").Output()
		if err == nil {
			gobin = filepath.Join(strings.TrimSpace(strings.Split(string(out), string(os.PathListSeparator))[0]), "bin")
		}
	}
	p := filepath.Join(gobin, "local-kms")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("local-kms is not installed (go install %s, or sh test/interop/install-deps.sh)", Module)
	}
	return p, nil
}

// Server is a running local-kms.
type Server struct {
	t        testing.TB
	bin, dir string
	port     string
	// Endpoint is the server's URL, http://127.0.0.1:PORT.
	Endpoint string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts local-kms on a free port with an empty data directory, stopped at cleanup. Without local-kms
// the test is skipped, or failed under STRAIT_REQUIRE_INTEROP=1.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("STRAIT_REQUIRE_INTEROP") == "1" {
			t.Fatalf("%v; STRAIT_REQUIRE_INTEROP=1 forbids skipping", err)
		}
		t.Skip(err)
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), port: "0"}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

var startedLine = regexp.MustCompile(`Local KMS started on [0-9.]+:([0-9]+)`)

// Restart starts the server again after Stop, on the same port and with the same keys.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.t.Fatal("localkms: Restart while running")
	}
	cmd := exec.Command(s.bin)
	cmd.Env = append(os.Environ(), "PORT="+s.port, "KMS_DATA_PATH="+s.dir, "KMS_REGION="+Region,
		"KMS_SEED_PATH="+filepath.Join(s.dir, "no-seed.yaml"))
	out, err := cmd.StderrPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("localkms: starting %s: %v", s.bin, err)
	}
	port := make(chan string, 1)
	done := make(chan struct{})
	var log strings.Builder
	var logMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			logMu.Lock()
			if log.Len() < 64<<10 {
				log.WriteString(sc.Text() + "\n")
			}
			logMu.Unlock()
			if m := startedLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case port <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case p := <-port:
		s.port = p
	case <-done:
		logMu.Lock()
		defer logMu.Unlock()
		s.t.Fatalf("localkms: %s exited before it listened:\n%s", s.bin, log.String())
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		s.t.Fatal("localkms: not listening after 20s")
	}
	s.cmd, s.done = cmd, done
	s.Endpoint = "http://127.0.0.1:" + s.port
}

// Stop stops the server (an outage); Restart brings it back.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Client is an SDK client of the server, for setting keys up.
func (s *Server) Client() *kms.Client {
	return kms.New(kms.Options{
		Region:       Region,
		Credentials:  Credentials,
		BaseEndpoint: aws.String(s.Endpoint),
	})
}

// CreateKEK creates a symmetric encryption key with the alias (alias/NAME) and returns its key ID.
func (s *Server) CreateKEK(alias string) string {
	s.t.Helper()
	return s.create(alias, &kms.CreateKeyInput{Description: aws.String("strait test KEK " + alias)})
}

// CreateHMACKey creates an HMAC_256 key with the alias and returns its key ID.
func (s *Server) CreateHMACKey(alias string) string {
	s.t.Helper()
	return s.create(alias, &kms.CreateKeyInput{
		Description: aws.String("strait test HMAC key " + alias),
		KeySpec:     types.KeySpecHmac256,
		KeyUsage:    types.KeyUsageTypeGenerateVerifyMac,
	})
}

func (s *Server) create(alias string, in *kms.CreateKeyInput) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := s.Client()
	out, err := c.CreateKey(ctx, in)
	if err != nil {
		s.t.Fatalf("localkms: CreateKey: %v", err)
	}
	if alias != "" {
		if _, err := c.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: out.KeyMetadata.KeyId}); err != nil {
			s.t.Fatalf("localkms: CreateAlias %s: %v", alias, err)
		}
	}
	return *out.KeyMetadata.KeyId
}
