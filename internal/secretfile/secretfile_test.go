package secretfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecodeStrict(t *testing.T) {
	var v struct {
		Key string `json:"key"`
	}
	for in, says := range map[string]string{
		`{"key": "s3cret"} {}`:     "unexpected data after the JSON document",
		`{"key": "s3cret", "x":1}`: `unknown field "x"`,
		`{"key": 42}`:              `field "key" has the wrong type`,
		`{"key": "s3cret"`:         "truncated JSON",
		`{"key" "s3cret"}`:         "malformed JSON at byte",
	} {
		err := DecodeStrict([]byte(in), &v, "key file")
		if err == nil || !strings.Contains(err.Error(), says) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v, want an error saying %q and never the input", in, err, says)
		}
	}
}

// TestWriteAtomic: a new file is 0600; a file replaced keeps an owner-only
// mode, never a looser one.
func TestWriteAtomic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.json")
	if err := WriteAtomic(path, []byte("a")); err != nil {
		t.Fatal(err)
	}
	mode := func() os.FileMode { fi, _ := os.Stat(path); return fi.Mode().Perm() }
	if m := mode(); m != 0o600 {
		t.Errorf("new file mode %04o, want 0600", m)
	}
	os.Chmod(path, 0o400)
	WriteAtomic(path, []byte("b"))
	if m := mode(); m != 0o400 {
		t.Errorf("replaced 0400 file mode %04o, want it kept", m)
	}
	os.Chmod(path, 0o644)
	WriteAtomic(path, []byte("c"))
	if b, _ := os.ReadFile(path); string(b) != "c" || mode() != 0o600 {
		t.Errorf("replaced 0644 file: %q mode %04o, want c and 0600", b, mode())
	}
}
