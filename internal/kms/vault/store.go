package vault

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/straitgw/strait/internal/secretfile"
)

// store is where a vault's keys live: a directory with one file per KEK, or a single file.
type store struct {
	path   string // absolute
	single bool   // a single file rather than a directory
}

// newStore resolves path. An existing path is a directory vault or a single-file vault according to what it
// is; a missing path is a single-file vault if it ends in ".json", a directory vault otherwise.
func newStore(path string) (store, error) {
	if path == "" {
		return store{}, errors.New("no vault path given")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return store{}, fmt.Errorf("vault path %s: %w", path, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case err == nil:
		if !fi.IsDir() && !fi.Mode().IsRegular() {
			return store{}, fmt.Errorf("vault %s is neither a directory nor a regular file (mode %v)", abs, fi.Mode())
		}
		return store{path: abs, single: !fi.IsDir()}, nil
	case errors.Is(err, fs.ErrNotExist):
		return store{path: abs, single: strings.HasSuffix(abs, fileExt)}, nil
	default:
		return store{}, fmt.Errorf("vault %s: %w", abs, err)
	}
}

func (s store) kind() string {
	if s.single {
		return "vault file"
	}
	return "vault directory"
}

// fileOf is the file that holds the KEK name.
func (s store) fileOf(name string) string {
	if s.single {
		return s.path
	}
	return filepath.Join(s.path, name+fileExt)
}

// checkPerm refuses a vault directory or file that anyone but its owner may read, write or (for a directory)
// search: it holds the keys to all encrypted data. Windows has no such mode bits; its ACLs are not checked.
func checkPerm(path string, fi fs.FileInfo) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	perm := fi.Mode().Perm()
	if perm&0o077 == 0 {
		return nil
	}
	what, want := "file", "600"
	if fi.IsDir() {
		what, want = "directory", "700"
	}
	return fmt.Errorf("vault %s %s has mode %04o: group or others may access it, and it holds encryption keys; fix it with: chmod %s %s",
		what, path, perm, want, path)
}

// snapshotFile is one file as last read: what identifies its content, and the KEKs parsed from it.
type snapshotFile struct {
	info fs.FileInfo
	keks []storedKEK
}

// unchanged reports whether a file now described by fi is the one read before, by identity, size and mtime.
// Writes replace files by rename, so a new version is a new file even within one mtime tick.
func (f *snapshotFile) unchanged(fi fs.FileInfo) bool {
	return f != nil && os.SameFile(f.info, fi) && f.info.Size() == fi.Size() &&
		f.info.ModTime().Equal(fi.ModTime()) && f.info.Mode() == fi.Mode()
}

// load reads every KEK of the store. prev (may be nil) is the previous result: files unchanged since are not
// read again. The returned map is by file name (the store's path for a single file).
func (s store) load(prev map[string]*snapshotFile) (map[string]*snapshotFile, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s %s does not exist: create a key with `strait keys create --vault %s NAME`", s.kind(), s.path, s.path)
		}
		return nil, fmt.Errorf("%s %s: %w", s.kind(), s.path, err)
	}
	if fi.IsDir() == s.single {
		return nil, fmt.Errorf("vault %s changed from a %s to a %s", s.path, kindOf(s.single), kindOf(!fi.IsDir()))
	}
	if err := checkPerm(s.path, fi); err != nil {
		return nil, err
	}
	if s.single {
		sf, err := s.loadFile(s.path, fi, prev[s.path], parseVaultFile)
		if err != nil {
			return nil, err
		}
		return map[string]*snapshotFile{s.path: sf}, nil
	}
	entries, err := os.ReadDir(s.path)
	if err != nil {
		return nil, fmt.Errorf("vault directory %s: %w", s.path, err)
	}
	files := map[string]*snapshotFile{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), fileExt)
		if !ok || ValidName(name) != nil {
			continue // not a KEK file: the lock file, a temporary file, or something an operator keeps there
		}
		path := filepath.Join(s.path, e.Name())
		fi, err := os.Stat(path) // follows symbolic links: the target is what is read
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("vault file %s: %w", path, err)
		}
		if fi.IsDir() {
			continue
		}
		sf, err := s.loadFile(path, fi, prev[path], func(data []byte) ([]storedKEK, error) {
			k, err := parseKEKFile(data)
			if err != nil {
				return nil, err
			}
			if k.name != name {
				return nil, fmt.Errorf("it holds key %q, but the file name says %q", k.name, name)
			}
			return []storedKEK{k}, nil
		})
		if err != nil {
			return nil, err
		}
		files[path] = sf
	}
	return files, nil
}

func kindOf(single bool) string {
	if single {
		return "file"
	}
	return "directory"
}

// loadFile reads and parses one file, unless prev shows it unchanged.
func (s store) loadFile(path string, fi fs.FileInfo, prev *snapshotFile, parse func([]byte) ([]storedKEK, error)) (*snapshotFile, error) {
	if err := checkPerm(path, fi); err != nil {
		return nil, err
	}
	if prev.unchanged(fi) {
		return prev, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vault file %s: %w", path, err)
	}
	defer f.Close()
	// Identity and mode come from the open file, so that they describe what is read even if the file is
	// replaced meanwhile.
	if fi, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("vault file %s: %w", path, err)
	}
	if err := checkPerm(path, fi); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("vault file %s: %w", path, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("vault file %s is larger than %d MiB: not a key file", path, maxFileSize>>20)
	}
	keks, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("vault file %s: %w", path, err)
	}
	return &snapshotFile{info: fi, keks: keks}, nil
}

// allKEKs returns all KEKs of a load, sorted by name.
func allKEKs(files map[string]*snapshotFile) []storedKEK {
	var out []storedKEK
	for _, f := range files {
		out = append(out, f.keks...)
	}
	slices.SortFunc(out, func(a, b storedKEK) int { return strings.Compare(a.name, b.name) })
	return out
}

// write stores k, replacing the file that held it (or, for a single file, every KEK: all is the full new set).
func (s store) write(k storedKEK, all []storedKEK) error {
	if s.single {
		return secretfile.WriteAtomic(s.path, encodeVaultFile(all))
	}
	return secretfile.WriteAtomic(s.fileOf(k.name), encodeKEKFile(k))
}
