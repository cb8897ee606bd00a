package oauth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// keySource gives the keys tokens are checked with.
type keySource interface {
	// keys returns the keys to use now, reading them first if there are
	// none yet.
	keys(ctx context.Context) (*keySet, error)
	// refetch is called when a token names a key id that seen lacks: it
	// reads the keys again if its rules allow it now, and returns the
	// keys to use (seen itself when they were not read again).
	refetch(ctx context.Context, seen *keySet) (*keySet, error)
}

// fetched is a key set and when it was read. It is replaced whole, never
// changed.
type fetched struct {
	set *keySet
	at  time.Time
}

// urlSource reads the key set from the issuer's JWKS URL.
//
// Keys older than refresh are read again in the background, when a token
// is checked; tokens go on being checked with the old keys meanwhile. A
// token whose kid is unknown makes the caller wait for a new reading. Any
// reading but the first waits until minGap has passed since the one
// before, so neither made-up key ids nor an issuer that is down make the
// gateway fetch more often than that. A reading that fails keeps the keys
// there are: an issuer that is down for a while does not lock everyone
// out.
type urlSource struct {
	url      string
	client   *http.Client
	timeout  time.Duration
	maxBytes int
	refresh  time.Duration
	minGap   time.Duration
	log      *slog.Logger
	now      func() time.Time

	current     atomic.Pointer[fetched] // nil until a reading succeeds
	lastAttempt atomic.Int64            // Unix nanoseconds of now() at the last reading; 0: none yet
	refreshing  atomic.Bool             // a background reading is on its way

	// mu makes readings one at a time, and callers that need one wait
	// for it rather than start their own. It guards lastErr.
	mu      sync.Mutex
	lastErr error
}

func newURLSource(cfg Config, client *http.Client, log *slog.Logger, now func() time.Time) *urlSource {
	// A redirect is refused rather than followed: it could lead from
	// https to http, or to a host the config never named.
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error {
		return errors.New("the server redirects: set jwks_url to the address the redirect leads to")
	}
	return &urlSource{
		url: cfg.JWKSURL, client: &c, timeout: cfg.FetchTimeout, maxBytes: cfg.MaxJWKSBytes,
		refresh: cfg.RefreshInterval, minGap: cfg.MinRefetchInterval, log: log, now: now,
	}
}

func (s *urlSource) keys(ctx context.Context) (*keySet, error) {
	cur := s.current.Load()
	if cur == nil {
		return s.readIfAllowed(ctx, nil)
	}
	if now := s.now(); now.Sub(cur.at) >= s.refresh && s.mayRead(now) {
		s.readInBackground()
	}
	return cur.set, nil
}

func (s *urlSource) refetch(ctx context.Context, seen *keySet) (*keySet, error) {
	return s.readIfAllowed(ctx, seen)
}

// mayRead reports whether minGap has passed since the last reading.
func (s *urlSource) mayRead(now time.Time) bool {
	last := s.lastAttempt.Load()
	return last == 0 || now.Sub(time.Unix(0, last)) >= s.minGap
}

// readIfAllowed reads the set now, unless a set other than seen is there
// already (read while this caller waited for mu) or the last reading was
// less than minGap ago; then it returns what there is, or the last
// reading's error if it failed.
func (s *urlSource) readIfAllowed(ctx context.Context, seen *keySet) (*keySet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.current.Load()
	if cur != nil && cur.set != seen {
		return cur.set, nil
	}
	if !s.mayRead(s.now()) {
		// The last reading failed: the keys a token names may be among
		// those that could not be read, so it cannot be checked now.
		if s.lastErr != nil || cur == nil {
			return nil, cmp.Or(s.lastErr, error(ErrJWKSUnavailable))
		}
		return cur.set, nil
	}
	// The reading is for every caller waiting on mu, not this one only: a
	// caller that gives up must not make it fail for the others, and for
	// min_refetch_interval. fetch_timeout bounds it.
	return s.readLocked(context.WithoutCancel(ctx))
}

// readInBackground starts a reading that no caller waits for.
func (s *urlSource) readInBackground() {
	if !s.refreshing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.refreshing.Store(false)
		s.mu.Lock()
		defer s.mu.Unlock()
		now := s.now()
		if cur := s.current.Load(); (cur != nil && now.Sub(cur.at) < s.refresh) || !s.mayRead(now) {
			return // read meanwhile
		}
		// Detached from any caller: the reading is for all of them.
		_, _ = s.readLocked(context.Background())
	}()
}

// readLocked fetches and parses the set, and keeps it if it is good. s.mu
// is held.
func (s *urlSource) readLocked(ctx context.Context) (*keySet, error) {
	now := s.now()
	s.lastAttempt.Store(now.UnixNano())
	set, err := s.fetch(ctx)
	if err != nil {
		s.lastErr = fmt.Errorf("%w: jwks_url: %v", ErrJWKSUnavailable, err)
		s.log.Warn("oauth: cannot read the JWKS; tokens are checked with the keys read before, if any", "jwks_url", s.url, "error", err)
		return nil, s.lastErr
	}
	s.lastErr = nil
	s.current.Store(&fetched{set: set, at: now})
	s.log.Info("oauth: JWKS read", "jwks_url", s.url, "keys", len(set.all))
	return set, nil
}

func (s *urlSource) fetch(ctx context.Context) (*keySet, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		// The URL is the config's, and the caller names the setting:
		// keep the cause only.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the server answered %s", resp.Status)
	}
	data, err := readBounded(resp.Body, s.maxBytes)
	if err != nil {
		return nil, err
	}
	return parseKeySet(data)
}

// readBounded reads r to its end, or fails once it has more than max
// bytes.
func readBounded(r io.Reader, max int) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > max {
		return nil, fmt.Errorf("the key set is larger than max_jwks_bytes (%d): raise max_jwks_bytes if it is right", max)
	}
	return data, nil
}

// fileCheckInterval is how often, at most, the key file is looked at for
// a change: a look is a stat, cheap, but not free on every connection.
const fileCheckInterval = time.Second

// fileSource reads the key set from a file, and again whenever the file
// changes (its size or modification time). A changed file that cannot be
// read leaves the keys read before in use, and is not read again until it
// changes again.
type fileSource struct {
	path     string
	maxBytes int
	log      *slog.Logger
	now      func() time.Time

	current atomic.Pointer[fileState]
	checked atomic.Int64 // Unix nanoseconds of now() at the last look at the file

	mu sync.Mutex // one look at a time
}

// fileState is what a fileSource knows of its file at one time. It is
// replaced whole, never changed.
type fileState struct {
	info fs.FileInfo // of the file last read, good or not
	set  *keySet     // the last good set; nil: none yet
	err  error       // why there is no set
}

func newFileSource(cfg Config, log *slog.Logger, now func() time.Time) *fileSource {
	return &fileSource{path: cfg.JWKSFile, maxBytes: cfg.MaxJWKSBytes, log: log, now: now}
}

func (s *fileSource) keys(context.Context) (*keySet, error) {
	now := s.now()
	if st := s.current.Load(); st != nil && now.Sub(time.Unix(0, s.checked.Load())) < fileCheckInterval {
		return st.result()
	}
	return s.look(now).result()
}

// refetch looks at the file at once: a file is no server to spare, and a
// new key is most likely written there just now.
func (s *fileSource) refetch(context.Context, *keySet) (*keySet, error) {
	return s.look(s.now()).result()
}

func (st *fileState) result() (*keySet, error) {
	if st.set == nil {
		return nil, st.err
	}
	return st.set, nil
}

// look reads the file if it changed since it was last read.
func (s *fileSource) look(now time.Time) *fileState {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checked.Store(now.UnixNano())
	old := s.current.Load()
	info, err := os.Stat(s.path)
	if err != nil {
		return s.keep(old, nil, err)
	}
	if old != nil && old.info != nil && sameFile(old.info, info) {
		return old
	}
	set, err := s.read()
	if err != nil {
		return s.keep(old, info, err)
	}
	st := &fileState{info: info, set: set}
	s.current.Store(st)
	s.log.Info("oauth: JWKS file read", "jwks_file", s.path, "keys", len(set.all))
	return st
}

// keep records a failure to read the file: the keys read before stay in
// use.
func (s *fileSource) keep(old *fileState, info fs.FileInfo, err error) *fileState {
	err = fmt.Errorf("%w: jwks_file: %v", ErrJWKSUnavailable, err)
	st := &fileState{info: info, err: err}
	if old != nil {
		st.set = old.set
	}
	if old == nil || old.err == nil || old.err.Error() != err.Error() {
		s.log.Warn("oauth: cannot read the JWKS file; tokens are checked with the keys read before, if any", "jwks_file", s.path, "error", err)
	}
	s.current.Store(st)
	return st
}

func (s *fileSource) read() (*keySet, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := readBounded(f, s.maxBytes)
	if err != nil {
		return nil, err
	}
	return parseKeySet(data)
}

func sameFile(a, b fs.FileInfo) bool {
	return a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

var (
	_ keySource = (*urlSource)(nil)
	_ keySource = (*fileSource)(nil)
)
