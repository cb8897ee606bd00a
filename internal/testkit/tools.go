package testkit

import (
	"os"
	"os/exec"
	"testing"
)

// RequireInterop is the environment variable that makes a missing
// interop peer (a client, a server, a tool) fail the test instead of
// skipping it; CI sets it, since CI must run those tests.
const RequireInterop = "STRAIT_REQUIRE_INTEROP"

// Tool returns the path of the program name, or, if it is not on the
// PATH, skips the test (fails it under STRAIT_REQUIRE_INTEROP=1) with
// install, how to get it, in the message.
func Tool(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name+" is not installed ("+install+"): "+err.Error())
	}
	return p
}

// Missing skips the test for the interop peer msg describes, or fails it
// under STRAIT_REQUIRE_INTEROP=1.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv(RequireInterop) == "1" {
		t.Fatal(msg + "; " + RequireInterop + "=1 forbids skipping")
	}
	t.Skip(msg)
}
