package cli_test

import (
	"strings"
	"testing"
)

// examples/validation.yaml validates on a fresh clone: building the
// record-validation filter reads its config and compiles nothing remote; it
// does not contact the registry.
func TestValidateValidationExample(t *testing.T) {
	const path = "../../examples/validation.yaml"
	code, stdout, stderr := run(t, "validate", "-c", path)
	if code != 0 {
		t.Fatalf("strait validate -c %s: exit %d, want 0; stderr:\n%s", path, code, stderr)
	}
	if !strings.Contains(stdout, "is valid") {
		t.Errorf("stdout %q does not say the config is valid", stdout)
	}
}
