package localkms

import (
	"os"
	"strings"
	"testing"
)

// CI installs the local-kms the tests are written against.
func TestInstalledByInteropDeps(t *testing.T) {
	b, err := os.ReadFile("../../../../test/interop/install-deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "go install "+Module+"\n") {
		t.Errorf("test/interop/install-deps.sh does not go install %s", Module)
	}
}
