// Package archtest keeps Strait's architecture from drifting. It has no code
// of its own: its tests list the module's packages with `go list` and fail
// when a package imports one it must not (the layering rules are a table in
// archtest_test.go, explained in docs/architecture.md) or when a package
// under internal/ or cmd/ has no package comment.
//
// Nothing may import it.
package archtest
