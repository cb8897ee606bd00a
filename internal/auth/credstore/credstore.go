// Package credstore keeps the users the gateway authenticates with SASL PLAIN and SCRAM: one file holding,
// per user and per SCRAM mechanism (SCRAM-SHA-256, SCRAM-SHA-512), the salt, the iteration count, StoredKey
// and ServerKey of RFC 5802, never a password. The file is readable by its owner only; a running Store
// notices when `strait users` (or a deployment) replaces it, without a restart. Store is what the SASL
// mechanisms (internal/auth/sasl) look users up in; AddUser, RemoveUser and ListUsers are `strait users`. It
// imports nothing of ours. docs/security.md describes the file.
package credstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultReloadInterval is how often, at most, a Store in use looks at its file for changes.
const DefaultReloadInterval = time.Second

// Options configure a Store. The zero value takes the defaults.
type Options struct {
	// ReloadInterval is how often, at most, a Store in use looks for a changed file. Default 1 s.
	ReloadInterval time.Duration
	// Logger gets a line for every reload and every file that cannot be loaded. Default slog.Default().
	Logger *slog.Logger
}

// Store is a credential store file opened for use by a running gateway. It is safe for concurrent use.
type Store struct {
	path     string // absolute
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time // replaced in tests

	state   atomic.Pointer[state]
	checked atomic.Int64 // when the file was last looked at, in Unix nanoseconds of now()

	reloadMu sync.Mutex  // one reload at a time; guards failed
	failed   fs.FileInfo // the file last refused, so that it is not read and reported again until it changes
	err      atomic.Pointer[error]
}

// state is what a Store knows of its file at one time. It is replaced whole, never changed.
type state struct {
	info  fs.FileInfo // of the file read; nil for the empty state
	users map[string]*user
	// phantomIterations is, per mechanism, the iteration count unknown users get: the one most users have,
	// so that an unknown name looks like most known ones.
	phantomIterations [len(mechanisms)]int
}

// Open opens the credential store at path and reads it. It fails, saying what to do, if the file is missing,
// if group or others may access it, or if it cannot be parsed.
func Open(path string, opt Options) (*Store, error) {
	abs, err := absPath(path)
	if err != nil {
		return nil, err
	}
	if opt.ReloadInterval <= 0 {
		opt.ReloadInterval = DefaultReloadInterval
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	st, err := load(abs)
	if err != nil {
		return nil, err
	}
	s := &Store{path: abs, interval: opt.ReloadInterval, log: opt.Logger, now: time.Now}
	s.state.Store(st)
	s.checked.Store(s.now().UnixNano())
	return s, nil
}

// Path is the store's file, absolute.
func (s *Store) Path() string { return s.path }

// Len is the number of users in the store.
func (s *Store) Len() int { return len(s.current().users) }

// Lookup returns user's credentials for mechanism (SCRAM-SHA-256 or SCRAM-SHA-512) and true. For a user the
// store does not have (or who has no credentials for mechanism) it returns phantom credentials and false:
// a salt and keys derived from the name under a secret of this process, so that the same unknown name gets
// the same salt every time, with the iteration count most users have. A SCRAM server challenges with them
// as with real ones, and no client proof verifies against them. It does the same work either way.
func (s *Store) Lookup(user, mechanism string) (SCRAMCredentials, bool) {
	i := mechanismIndex(mechanism)
	known := i >= 0
	if !known {
		i = 0 // no user has a mechanism the store does not know: answer as for an unknown user
	}
	st := s.current()
	phantom := mechanisms[i].phantom(user, st.phantomIterations[i]) // for everyone, so that both cases cost the same
	if u := st.users[user]; known && u != nil && u.scram[i] != nil {
		return *u.scram[i], true
	}
	return *phantom, false
}

// VerifyPlain reports whether password is user's password, for SASL PLAIN: it derives SaltedPassword with
// the user's SCRAM-SHA-256 salt and iteration count (SCRAM-SHA-512's for a user without SCRAM-SHA-256) and
// compares the StoredKey it gives with the stored one in constant time. For an unknown user it does the same
// work against phantom credentials and returns false.
func (s *Store) VerifyPlain(user, password string) bool {
	st := s.current()
	i, creds, found := 0, mechanisms[0].phantom(user, st.phantomIterations[0]), false
	if u := st.users[user]; u != nil {
		found = true
		if u.scram[0] == nil {
			i = 1
		}
		creds = u.scram[i]
	}
	ok := mechanisms[i].verify(creds, password)
	return ok && found
}

// Err is the error of the last look at the file, or nil if it was read (or unchanged). While it is set the
// Store keeps answering with the users it loaded last.
func (s *Store) Err() error {
	if p := s.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Reload looks at the file now, and reads it if it changed. A file that cannot be read or parsed leaves the
// users loaded before in place; the error is returned, logged once per version of the file, and kept for Err.
func (s *Store) Reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	s.checked.Store(s.now().UnixNano())
	return s.reload()
}

// current returns the state, after looking at the file again if it was last looked at ReloadInterval or
// longer ago. A look is skipped while another goroutine is reloading: the current state is returned at once.
func (s *Store) current() *state {
	st := s.state.Load()
	if s.now().UnixNano()-s.checked.Load() < int64(s.interval) || !s.reloadMu.TryLock() {
		return st
	}
	defer s.reloadMu.Unlock()
	now := s.now().UnixNano()
	if now-s.checked.Load() >= int64(s.interval) {
		s.checked.Store(now)
		s.reload()
	}
	return s.state.Load()
}

// reload is Reload with reloadMu held.
func (s *Store) reload() error {
	fi, err := os.Stat(s.path)
	if err != nil {
		return s.refuse(nil, describeStatError(s.path, err))
	}
	if unchanged(s.state.Load().info, fi) {
		s.err.Store(nil)
		return nil
	}
	if unchanged(s.failed, fi) {
		return s.Err() // refused already, and not changed since
	}
	st, err := load(s.path)
	if err != nil {
		return s.refuse(fi, err)
	}
	s.state.Store(st)
	s.failed = nil
	s.err.Store(nil)
	s.log.Info("credential store reloaded", "path", s.path, "users", len(st.users))
	return nil
}

// refuse records that the file (described by fi, nil if it could not be looked at) cannot be loaded, and
// logs it unless it was already refused for the same reason.
func (s *Store) refuse(fi fs.FileInfo, err error) error {
	if prev := s.Err(); prev == nil || prev.Error() != err.Error() || fi != nil {
		s.log.Error("credential store cannot be loaded; the users loaded before stay in use", "path", s.path, "error", err)
	}
	s.failed = fi
	s.err.Store(&err)
	return err
}

// unchanged reports whether a file now described by fi is the one described by prev, by identity, size,
// mtime and mode. Writes replace the file by rename, so a new version is a new file even within one mtime
// tick.
func unchanged(prev, fi fs.FileInfo) bool {
	return prev != nil && os.SameFile(prev, fi) && prev.Size() == fi.Size() &&
		prev.ModTime().Equal(fi.ModTime()) && prev.Mode() == fi.Mode()
}

// load reads, checks and parses the file at path into a state.
func load(path string) (*state, error) {
	users, fi, err := readUsers(path)
	if err != nil {
		return nil, err
	}
	st := &state{info: fi, users: make(map[string]*user, len(users))}
	for _, u := range users {
		st.users[u.name] = u
	}
	for i := range mechanisms {
		st.phantomIterations[i] = mostCommonIterations(users, i)
	}
	return st, nil
}

// mostCommonIterations is the iteration count most users have for the mechanism at index i (the larger of
// two as common), DefaultIterations when none has it.
func mostCommonIterations(users []*user, i int) int {
	count := map[int]int{}
	best, bestN := DefaultIterations, 0
	for _, u := range users {
		if c := u.scram[i]; c != nil {
			count[c.Iterations]++
			if n := count[c.Iterations]; n > bestN || (n == bestN && c.Iterations > best) {
				best, bestN = c.Iterations, n
			}
		}
	}
	return best
}

// readUsers reads the file at path: its users and what it was when read. A missing file, one that group or
// others may access, and one that cannot be parsed are errors that say what to do.
func readUsers(path string) ([]*user, fs.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, describeStatError(path, err)
	}
	defer f.Close()
	// Identity and mode come from the open file, so that they describe what is read even if the file is
	// replaced meanwhile.
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("credential store %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("credential store %s is not a regular file (mode %v)", path, fi.Mode())
	}
	if err := checkPerm(path, fi); err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("credential store %s: %w", path, err)
	}
	if len(data) > maxFileSize {
		return nil, nil, fmt.Errorf("credential store %s is larger than %d MiB: not a credential store", path, maxFileSize>>20)
	}
	users, err := parseFile(data)
	if err != nil {
		return nil, nil, fmt.Errorf("credential store %s: %w", path, err)
	}
	return users, fi, nil
}

func describeStatError(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return notExistError{path}
	}
	return fmt.Errorf("credential store %s: %w", path, err)
}

// notExistError is a missing store: it says how to make one, and is fs.ErrNotExist to errors.Is.
type notExistError struct{ path string }

func (e notExistError) Error() string {
	return fmt.Sprintf("credential store %s does not exist: add a user with `strait users add --store %s NAME`", e.path, e.path)
}

func (e notExistError) Is(target error) bool { return target == fs.ErrNotExist }

// checkPerm refuses a file that anyone but its owner may read or write: it holds what a SCRAM server needs to
// pass as the gateway, and what an offline guesser needs. Windows has no such mode bits; its ACLs are not
// checked.
func checkPerm(path string, fi fs.FileInfo) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("credential store %s has mode %04o: group or others may access it, and it holds password verifiers; "+
			"fix it with: chmod 600 %s", path, perm, path)
	}
	return nil
}

func absPath(path string) (string, error) {
	if path == "" {
		return "", errors.New("no credential store path given")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("credential store path %s: %w", path, err)
	}
	return abs, nil
}
