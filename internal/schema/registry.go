package schema

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// Options tune a Registry's caching. The zero value means the defaults.
type Options struct {
	// NotFoundTTL is how long an answer that something does not exist (an
	// unknown id, a schema that does not compile, an id not registered
	// under a subject) is remembered before the source is asked again.
	// Default 10 s.
	NotFoundTTL time.Duration
	// RefreshInterval is how long the subjects of an id and a subject's
	// latest version are used before the source is asked again; the old
	// answer keeps serving while the new one is fetched, and through an
	// outage. Default 1 min. Schemas by id are never refreshed: ids are
	// immutable.
	RefreshInterval time.Duration
	// FetchTimeout bounds one lookup, reference resolution and compiling
	// included. Default 30 s.
	FetchTimeout time.Duration
	// MaxNotFound bounds how many negative answers are remembered, so that
	// a stream of random ids cannot grow memory. Default 10000.
	MaxNotFound int
	// Now is the clock; nil means time.Now. For tests.
	Now func() time.Time
}

// Defaults of Options.
const (
	DefaultNotFoundTTL     = 10 * time.Second
	DefaultRefreshInterval = time.Minute
	DefaultFetchTimeout    = 30 * time.Second
	DefaultMaxNotFound     = 10000
)

// maxReferences bounds the schemas one schema may pull in through
// references, directly or not, and maxReferenceDepth their nesting.
const (
	maxReferences     = 256
	maxReferenceDepth = 32
)

// Registry resolves schema ids and subjects to compiled schemas through a
// Source, with caches in front:
//
//   - schemas by id, kept for good once compiled (ids are immutable);
//   - the subjects each id is registered under, and subjects' versions,
//     refreshed every RefreshInterval and kept through an outage;
//   - negative answers for NotFoundTTL.
//
// Concurrent lookups of the same uncached key share one request to the
// source. A lookup's context bounds how long its caller waits, not the
// request, so one caller giving up does not fail the others.
//
// A Registry is safe for concurrent use.
type Registry struct {
	src  Source
	opts Options

	// schemas maps id → *Schema. It is copied on write, so the hot path
	// is one atomic load and a map lookup, with no lock and no allocation.
	schemas atomic.Pointer[map[int]*Schema]
	// subjects maps id → the subjects it is registered under; copied on
	// write too.
	subjects atomic.Pointer[map[int]*subjectsEntry]
	writeMu  sync.Mutex // serialises copy-on-write updates of both maps

	mu        sync.Mutex
	notFound  map[string]negative      // "id:12", "subj:s:v" → error and expiry
	versions  map[string]*versionEntry // "s:v" → definition by subject and version
	flight    singleflight.Group
	refreshes sync.WaitGroup // background refreshes, for tests
	// waiting counts callers waiting on a fetch, so that tests can see
	// when concurrent lookups have all joined one.
	waiting atomic.Int64
}

type subjectsEntry struct {
	list    []SubjectVersion
	fetched time.Time
	refresh refreshGate
}

type versionEntry struct {
	def     Definition
	fetched time.Time
	refresh refreshGate
}

// refreshGate lets one background refresh of a stale entry start per
// NotFoundTTL: while the source is down, records keep using the old answer
// without each of them starting a request.
type refreshGate struct{ next atomic.Int64 }

func (g *refreshGate) try(now time.Time, every time.Duration) bool {
	next := g.next.Load()
	return now.UnixNano() >= next && g.next.CompareAndSwap(next, now.Add(every).UnixNano())
}

type negative struct {
	err     error
	expires time.Time
}

// NewRegistry returns a Registry in front of src.
func NewRegistry(src Source, opts Options) *Registry {
	if opts.NotFoundTTL <= 0 {
		opts.NotFoundTTL = DefaultNotFoundTTL
	}
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = DefaultRefreshInterval
	}
	if opts.FetchTimeout <= 0 {
		opts.FetchTimeout = DefaultFetchTimeout
	}
	if opts.MaxNotFound <= 0 {
		opts.MaxNotFound = DefaultMaxNotFound
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Registry{src: src, opts: opts, notFound: map[string]negative{}, versions: map[string]*versionEntry{}}
	r.schemas.Store(&map[int]*Schema{})
	r.subjects.Store(&map[int]*subjectsEntry{})
	return r
}

// Cached returns the schema with the given id if it is cached, without
// asking the source.
func (r *Registry) Cached(id int) (*Schema, bool) {
	s, ok := (*r.schemas.Load())[id]
	return s, ok
}

// SchemaByID returns the compiled schema with the given id. Errors match
// ErrNotFound (the source does not know the id), ErrInvalidSchema (it does
// not compile, or a reference is missing) or ErrUnavailable.
func (r *Registry) SchemaByID(ctx context.Context, id int) (*Schema, error) {
	if s, ok := (*r.schemas.Load())[id]; ok {
		return s, nil
	}
	if id <= 0 {
		// Registries number schemas from 1; a payload claiming 0 or a
		// negative id is not worth a request.
		return nil, newError(ErrNotFound, "schema id "+strconv.Itoa(id)+" not found", nil)
	}
	key := "id:" + strconv.Itoa(id)
	if err := r.negative(key); err != nil {
		return nil, err
	}
	v, err := r.fetch(ctx, key, func(ctx context.Context) (any, error) {
		if s, ok := (*r.schemas.Load())[id]; ok {
			return s, nil
		}
		def, err := r.src.SchemaByID(ctx, id)
		if err != nil {
			return nil, err
		}
		def.ID = id
		return r.compile(ctx, def)
	})
	if err != nil {
		r.remember(key, err)
		return nil, err
	}
	s := v.(*Schema)
	r.storeSchema(s)
	return s, nil
}

// SchemaByVersion returns a subject's schema at version, or its newest for
// Latest. The answer is refreshed every RefreshInterval, and an old answer
// serves through an outage.
func (r *Registry) SchemaByVersion(ctx context.Context, subject string, version int) (*Schema, error) {
	def, err := r.definition(ctx, subject, version)
	if err != nil {
		return nil, err
	}
	if def.ID != 0 {
		if s, ok := (*r.schemas.Load())[def.ID]; ok {
			return s, nil
		}
	}
	key := "compile:" + subject + ":" + strconv.Itoa(def.Version) + ":" + strconv.Itoa(def.ID)
	if err := r.negative(key); err != nil {
		return nil, err
	}
	v, err := r.fetch(ctx, key, func(ctx context.Context) (any, error) { return r.compile(ctx, def) })
	if err != nil {
		r.remember(key, err)
		return nil, err
	}
	s := v.(*Schema)
	if s.ID != 0 {
		r.storeSchema(s)
	}
	return s, nil
}

// definition returns a subject's definition at version through the
// versions cache.
func (r *Registry) definition(ctx context.Context, subject string, version int) (Definition, error) {
	key := subject + ":" + strconv.Itoa(version)
	r.mu.Lock()
	e := r.versions[key]
	r.mu.Unlock()
	now := r.opts.Now()
	if e != nil {
		if now.Sub(e.fetched) >= r.opts.RefreshInterval && e.refresh.try(now, r.opts.NotFoundTTL) {
			r.refreshInBackground("subj:"+key, func(ctx context.Context) error {
				_, err := r.fetchDefinition(ctx, subject, version, key)
				return err
			})
		}
		return e.def, nil
	}
	if err := r.negative("subj:" + key); err != nil {
		return Definition{}, err
	}
	v, err := r.fetch(ctx, "subj:"+key, func(ctx context.Context) (any, error) {
		return r.fetchDefinition(ctx, subject, version, key)
	})
	if err != nil {
		r.remember("subj:"+key, err)
		return Definition{}, err
	}
	return v.(Definition), nil
}

func (r *Registry) fetchDefinition(ctx context.Context, subject string, version int, key string) (Definition, error) {
	def, err := r.src.SchemaByVersion(ctx, subject, version)
	if err != nil {
		return Definition{}, err
	}
	if def.Subject == "" {
		def.Subject = subject
	}
	r.mu.Lock()
	r.versions[key] = &versionEntry{def: def, fetched: r.opts.Now()}
	r.mu.Unlock()
	return def, nil
}

// Registered reports whether the schema with the given id is registered
// under subject (in any version). A yes is kept and refreshed in the
// background; a no is asked again after NotFoundTTL. While the source is
// unavailable a cached yes stands, and a no the cache cannot confirm is
// ErrUnavailable.
func (r *Registry) Registered(ctx context.Context, id int, subject string) (bool, error) {
	return r.registered(ctx, id, func(s string) bool { return s == subject })
}

func (r *Registry) registered(ctx context.Context, id int, match func(string) bool) (bool, error) {
	now := r.opts.Now()
	e := (*r.subjects.Load())[id]
	if e != nil {
		if e.has(match) {
			if now.Sub(e.fetched) >= r.opts.RefreshInterval && e.refresh.try(now, r.opts.NotFoundTTL) {
				r.refreshInBackground("ids:"+strconv.Itoa(id), func(ctx context.Context) error {
					_, err := r.fetchSubjects(ctx, id)
					return err
				})
			}
			return true, nil
		}
		// A no is asked again after a second, not only after NotFoundTTL:
		// registries give an identical schema one id across subjects, so
		// an id cached with its subjects may since have been registered
		// under this one, and a producer that just registered it must not
		// be refused for long. Asking at most once a second per id keeps
		// a flood of bad records from becoming a flood of lookups.
		if now.Sub(e.fetched) < min(r.opts.NotFoundTTL, recheckNo) {
			return false, nil
		}
	}
	key := "ids:" + strconv.Itoa(id)
	if err := r.negative(key); err != nil {
		if e != nil && now.Sub(e.fetched) < r.opts.NotFoundTTL {
			return false, nil // the registry cannot confirm; keep the cached answer
		}
		return false, err
	}
	v, err := r.fetch(ctx, key, func(ctx context.Context) (any, error) { return r.fetchSubjects(ctx, id) })
	if err != nil {
		r.remember(key, err)
		if e != nil && now.Sub(e.fetched) < r.opts.NotFoundTTL && errors.Is(err, ErrUnavailable) {
			return false, nil
		}
		return false, err
	}
	return v.(*subjectsEntry).has(match), nil
}

// recheckNo is how soon a cached "not registered under this subject" is
// asked again (see registered).
const recheckNo = time.Second

func (e *subjectsEntry) has(match func(string) bool) bool {
	for _, sv := range e.list {
		if match(sv.Subject) {
			return true
		}
	}
	return false
}

func (r *Registry) fetchSubjects(ctx context.Context, id int) (*subjectsEntry, error) {
	list, err := r.src.SubjectVersionsByID(ctx, id)
	if err != nil {
		return nil, err
	}
	e := &subjectsEntry{list: list, fetched: r.opts.Now()}
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	m := maps.Clone(*r.subjects.Load())
	m[id] = e
	r.subjects.Store(&m)
	return e, nil
}

func (r *Registry) storeSchema(s *Schema) {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	old := *r.schemas.Load()
	if _, ok := old[s.ID]; ok {
		return
	}
	m := maps.Clone(old)
	m[s.ID] = s
	r.schemas.Store(&m)
}

// fetch runs fn once for all concurrent callers with the same key, under a
// context that keeps ctx's values but not its cancellation, bounded by
// FetchTimeout. Each caller waits until the result or its own ctx is done.
func (r *Registry) fetch(ctx context.Context, key string, fn func(context.Context) (any, error)) (any, error) {
	ch := r.flight.DoChan(key, func() (v any, err error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.FetchTimeout)
		defer cancel()
		// singleflight re-panics a panic in a goroutine of its own, which
		// would end the process; a schema that trips a codec is an invalid
		// schema, not a crash.
		defer func() {
			if p := recover(); p != nil {
				v, err = nil, newError(ErrInvalidSchema, "looking up "+key, fmt.Errorf("panic: %v", p))
			}
		}()
		return fn(fctx)
	})
	r.waiting.Add(1)
	defer r.waiting.Add(-1)
	select {
	case res := <-ch:
		return res.Val, res.Err
	case <-ctx.Done():
		return nil, newError(ErrUnavailable, "gave up waiting for the schema source", &gaveUp{ctx.Err()})
	}
}

// errGaveUp marks the error of a caller whose context ended before the
// source answered.
var errGaveUp = errors.New("gave up")

type gaveUp struct{ err error }

func (g *gaveUp) Error() string        { return g.err.Error() }
func (g *gaveUp) Unwrap() error        { return g.err }
func (g *gaveUp) Is(target error) bool { return target == errGaveUp }

// refreshInBackground runs fn under the flight key unless a fetch of it is
// already running. Failures keep the old answer.
func (r *Registry) refreshInBackground(key string, fn func(context.Context) error) {
	r.refreshes.Add(1)
	go func() {
		defer r.refreshes.Done()
		_, _, _ = r.flight.Do(key, func() (any, error) {
			ctx, cancel := context.WithTimeout(context.Background(), r.opts.FetchTimeout)
			defer cancel()
			return nil, fn(ctx)
		})
	}()
}

// negative returns the remembered negative answer for key, if it has not
// expired.
func (r *Registry) negative(key string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.notFound[key]
	if !ok {
		return nil
	}
	if !r.opts.Now().Before(n.expires) {
		delete(r.notFound, key)
		return nil
	}
	return n.err
}

// outageBackoff is how long a lookup that failed for an outage is not
// retried: while the source is down, the records that need it fail at once
// instead of each sending a request to a registry that may be struggling
// to come back.
const outageBackoff = time.Second

// remember keeps err for key: an answer (not found, invalid) for
// NotFoundTTL, an outage for outageBackoff.
func (r *Registry) remember(key string, err error) {
	ttl := r.opts.NotFoundTTL
	switch {
	case errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidSchema):
	case errors.Is(err, ErrUnavailable) && !errors.Is(err, errGaveUp):
		// (A caller that gave up says nothing about the source.)
		ttl = min(ttl, outageBackoff)
	default:
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.opts.Now()
	if len(r.notFound) >= r.opts.MaxNotFound {
		for k, n := range r.notFound {
			if !now.Before(n.expires) {
				delete(r.notFound, k)
			}
		}
		// Still full: drop arbitrary entries; they are only a cache.
		for k := range r.notFound {
			if len(r.notFound) < r.opts.MaxNotFound {
				break
			}
			delete(r.notFound, k)
		}
	}
	r.notFound[key] = negative{err: err, expires: now.Add(ttl)}
}

// compile resolves def's references through the source and compiles it.
func (r *Registry) compile(ctx context.Context, def Definition) (*Schema, error) {
	refs, err := r.resolve(ctx, def)
	if err != nil {
		return nil, err
	}
	return Compile(ctx, def, refs)
}

// resolve returns the texts of def's references and of theirs,
// dependencies first, each name once.
func (r *Registry) resolve(ctx context.Context, def Definition) ([]Resolved, error) {
	if len(def.References) == 0 {
		return nil, nil
	}
	var out []Resolved
	done := map[string]bool{}
	onPath := map[string]bool{}
	var visit func(refs []Reference, depth int) error
	visit = func(refs []Reference, depth int) error {
		if depth > maxReferenceDepth {
			return fmt.Errorf("references nested deeper than %d", maxReferenceDepth)
		}
		for _, ref := range refs {
			if done[ref.Name] {
				continue
			}
			if onPath[ref.Name] {
				return fmt.Errorf("reference %q refers back to itself", ref.Name)
			}
			if len(done) >= maxReferences {
				return fmt.Errorf("more than %d references", maxReferences)
			}
			version := ref.Version
			if version <= 0 {
				version = Latest
			}
			rd, err := r.definition(ctx, ref.Subject, version)
			if err != nil {
				if errors.Is(err, ErrUnavailable) {
					return err
				}
				// %v, not %w: the schema is invalid, and the error must not
				// also match the reference's ErrNotFound.
				return fmt.Errorf("reference %q (subject %q version %d): %v", ref.Name, ref.Subject, ref.Version, err)
			}
			if rd.Format != def.Format {
				return fmt.Errorf("reference %q is %s, the schema is %s", ref.Name, rd.Format, def.Format)
			}
			onPath[ref.Name] = true
			if err := visit(rd.References, depth+1); err != nil {
				return err
			}
			onPath[ref.Name] = false
			done[ref.Name] = true
			out = append(out, Resolved{Name: ref.Name, Text: rd.Text})
		}
		return nil
	}
	if err := visit(def.References, 0); err != nil {
		if errors.Is(err, ErrUnavailable) {
			return nil, err
		}
		s := &Schema{ID: def.ID, Format: def.Format}
		return nil, newError(ErrInvalidSchema, s.describe()+": cannot resolve its references", err)
	}
	return out, nil
}
