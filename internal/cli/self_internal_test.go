package cli

import "testing"

func TestInvokedAs(t *testing.T) {
	for _, tt := range []struct{ argv0, want string }{
		// go run builds into a temporary directory it deletes on exit.
		{"/tmp/go-build1234567890/b001/exe/strait", "go run ./cmd/strait"},
		{"/home/u/.cache/gotmp/go-build42/b001/exe/strait", "go run ./cmd/strait"},
		// Go 1.24 and later: go run keeps the binary in the build cache.
		{"/root/.cache/go-build/62/622f4104bf14206755b668adecd93c883ab09c8438ec781420434f776e31d7ab-d/strait", "go run ./cmd/strait"},
		{"strait", "strait"},
		{"./strait", "./strait"},
		{"/usr/local/bin/strait", "/usr/local/bin/strait"},
		{"bin/strait", "bin/strait"},
		{"/opt/my tools/strait", "'/opt/my tools/strait'"},
		{"/opt/it's/strait", `'/opt/it'\''s/strait'`},
		// A binary someone built and keeps in a go-build directory of
		// their own is not a go run binary.
		{"/src/go-build-tools/strait", "/src/go-build-tools/strait"},
		{"", "strait"},
	} {
		if got := invokedAs(tt.argv0); got != tt.want {
			t.Errorf("invokedAs(%q) = %q, want %q", tt.argv0, got, tt.want)
		}
	}
}
