// Package vault is a KMS (internal/kms) whose key-encryption keys live on the local filesystem: a directory
// with one file per KEK (or a single file holding them all), readable by its owner only. Each KEK has numbered
// versions of 32 random bytes; Wrap uses the newest, Unwrap any that is still there. A running vault notices
// files changed by `strait keys rotate` (or a deployment that replaces them) within a second, without a
// restart. It imports nothing of ours but internal/kms. docs/kms.md describes the files and the formats.
package vault

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/secretfile"
)

// Defaults of Options.
const (
	DefaultReloadInterval = time.Second
	// missIntervalDivisor makes the least time between two looks at the files caused by a request for a KEK
	// or version the vault does not have: ReloadInterval/10, so that a flood of such requests is not a flood
	// of directory reads.
	missIntervalDivisor = 10
)

// deriveSalt is the HKDF salt of DeriveKey. A fixed, versioned string: it keeps derived keys apart from any
// other use of the same material, and it must never change, or deterministic ciphertexts written before the
// change would no longer match.
var deriveSalt = []byte("strait/kms/vault/derive-key/v1")

// Options configure a Vault. The zero value takes the defaults.
type Options struct {
	// ReloadInterval is how often, at most, a Vault in use looks for changed files. Default 1 s.
	ReloadInterval time.Duration
}

// Vault is a filesystem vault opened for use by a running gateway. It is safe for concurrent use.
type Vault struct {
	store        store
	interval     time.Duration
	missInterval time.Duration
	now          func() time.Time // replaced in tests

	state    atomic.Pointer[state]
	checked  atomic.Int64 // when the files were last looked at, in Unix nanoseconds of now()
	reloadMu sync.Mutex   // one reload at a time
}

var _ kms.KMS = (*Vault)(nil)

// state is what a Vault knows of its files at one time. It is replaced whole, never changed.
type state struct {
	files map[string]*snapshotFile
	keks  map[string]*kek
	err   error // non-nil: the vault cannot be read now (wraps kms.ErrUnavailable)
}

// kek is a KEK ready for use.
type kek struct {
	name     string
	versions []*keyVersion // ascending by version
}

type keyVersion struct {
	version int
	created time.Time
	block   cipher.Block // AES-256 under the material, for key wrapping
	prk     []byte       // HKDF-Extract of the material, for DeriveKey
}

// Open opens the vault at path (a directory, or a single file) and reads every key in it. It fails, saying
// what to do, if the vault is missing, if group or others may access it, or if a file cannot be parsed.
func Open(path string, opt Options) (*Vault, error) {
	st, err := newStore(path)
	if err != nil {
		return nil, err
	}
	if opt.ReloadInterval <= 0 {
		opt.ReloadInterval = DefaultReloadInterval
	}
	v := &Vault{store: st, interval: opt.ReloadInterval, missInterval: opt.ReloadInterval / missIntervalDivisor, now: time.Now}
	files, err := st.load(nil)
	if err != nil {
		return nil, err
	}
	s, err := build(files)
	if err != nil {
		return nil, err
	}
	v.state.Store(s)
	v.checked.Store(v.now().UnixNano())
	return v, nil
}

// Name describes the vault for logs.
func (v *Vault) Name() string { return "vault " + v.store.path }

// Wrap wraps dek (16, 24 or 32 bytes) under the newest version of the KEK named name: the version as a uvarint
// (1 byte up to version 127, 2 up to 16383), then the RFC 3394 AES key wrap of dek (len(dek)+8 bytes). A
// 32-byte DEK wraps to 41 or 42 bytes.
func (v *Vault) Wrap(_ context.Context, name string, dek []byte) ([]byte, error) {
	switch len(dek) {
	case 16, 24, 32:
	default:
		return nil, fmt.Errorf("vault: cannot wrap a %d-byte data key: want 16, 24 or 32 bytes", len(dek))
	}
	kv, err := v.version(name, 0)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, binary.MaxVarintLen32+8+len(dek))
	out = binary.AppendUvarint(out, uint64(kv.version))
	return kwWrap(out, kv.block, dek), nil
}

// Unwrap recovers a DEK wrapped by Wrap under any version of the KEK named name still in the vault.
func (v *Vault) Unwrap(_ context.Context, name string, wrapped []byte) ([]byte, error) {
	version, body, err := parseWrapped(wrapped)
	if err != nil {
		return nil, err
	}
	kv, err := v.version(name, version)
	if err != nil {
		return nil, err
	}
	dek, ok := kwUnwrap(make([]byte, 0, len(body)-8), kv.block, body)
	if !ok {
		return nil, fmt.Errorf("%w: it does not verify under key-encryption key %q version %d: it was altered, or wrapped under another key",
			kms.ErrInvalid, name, version)
	}
	return dek, nil
}

// DeriveKey returns HKDF-SHA256 (RFC 5869) with the material of the given version of the KEK named name as
// the secret, a fixed salt, and label as the info: 32 bytes, the same wherever the vault's files are the same.
// version 0 means the newest.
func (v *Vault) DeriveKey(_ context.Context, name string, version int, label []byte) ([]byte, int, error) {
	if version < 0 {
		return nil, 0, fmt.Errorf("%w: key-encryption key %q has no version %d: versions start at 1 (0 means the newest)",
			kms.ErrKeyNotFound, name, version)
	}
	kv, err := v.version(name, version)
	if err != nil {
		return nil, 0, err
	}
	key, err := hkdf.Expand(sha256.New, kv.prk, string(label), 32)
	if err != nil {
		return nil, 0, fmt.Errorf("vault: deriving a key: %w", err) // only for lengths over 255*32: not 32
	}
	return key, kv.version, nil
}

// parseWrapped splits a wrapped key into its KEK version and its key-wrap output.
func parseWrapped(wrapped []byte) (version int, body []byte, err error) {
	u, n := binary.Uvarint(wrapped)
	switch {
	case n <= 0:
		return 0, nil, fmt.Errorf("%w: it does not start with a version number", kms.ErrInvalid)
	case n != uvarintLen(u) || u == 0 || u > maxVersion:
		return 0, nil, fmt.Errorf("%w: its version number is not a valid one", kms.ErrInvalid)
	}
	body = wrapped[n:]
	switch len(body) {
	case 24, 32, 40:
	default:
		return 0, nil, fmt.Errorf("%w: %d bytes after the version, want 24, 32 or 40", kms.ErrInvalid, len(body))
	}
	return int(u), body, nil
}

// uvarintLen is the length of the shortest encoding of u; only that one is accepted, so that each wrapped key
// has exactly one form.
func uvarintLen(u uint64) int {
	var b [binary.MaxVarintLen64]byte
	return len(binary.AppendUvarint(b[:0], u))
}

// version returns the given version (0: the newest) of the KEK named name. When the vault does not have it, it
// looks at the files again first (at most every missInterval): another process may have just added it.
func (v *Vault) version(name string, version int) (*keyVersion, error) {
	s := v.current(false)
	kv, err := s.lookup(v, name, version)
	if errors.Is(err, kms.ErrKeyNotFound) {
		if s2 := v.current(true); s2 != s {
			kv, err = s2.lookup(v, name, version)
		}
	}
	return kv, err
}

func (s *state) lookup(v *Vault, name string, version int) (*keyVersion, error) {
	if s.err != nil {
		return nil, s.err
	}
	k := s.keks[name]
	if k == nil {
		return nil, fmt.Errorf("%w: no key-encryption key %q in %s %s", kms.ErrKeyNotFound, name, v.store.kind(), v.store.path)
	}
	if version == 0 {
		return k.versions[len(k.versions)-1], nil
	}
	i, found := sort.Find(len(k.versions), func(i int) int { return version - k.versions[i].version })
	if !found {
		return nil, fmt.Errorf("%w: key-encryption key %q has no version %d (it has %s)", kms.ErrKeyNotFound, name, version, k.versionRange())
	}
	return k.versions[i], nil
}

func (k *kek) versionRange() string {
	first, last := k.versions[0].version, k.versions[len(k.versions)-1].version
	if len(k.versions) == 1 {
		return fmt.Sprintf("version %d", first)
	}
	if last-first+1 == len(k.versions) {
		return fmt.Sprintf("versions %d-%d", first, last)
	}
	return fmt.Sprintf("%d versions from %d to %d", len(k.versions), first, last)
}

// current returns the state, after looking at the files again if they were last looked at ReloadInterval or
// longer ago (after a miss: missInterval). A periodic look is skipped while another goroutine is reloading: the
// current state is returned at once. A look after a miss waits for that reload.
func (v *Vault) current(miss bool) *state {
	s := v.state.Load()
	wait := v.interval
	if miss {
		wait = v.missInterval
	}
	if v.now().UnixNano()-v.checked.Load() < int64(wait) {
		return s
	}
	if miss {
		v.reloadMu.Lock()
	} else if !v.reloadMu.TryLock() {
		return s
	}
	defer v.reloadMu.Unlock()
	now := v.now().UnixNano()
	if now-v.checked.Load() < int64(wait) {
		return v.state.Load() // another goroutine reloaded while this one waited
	}
	s = v.reload(v.state.Load())
	v.state.Store(s)
	v.checked.Store(now)
	return s
}

// reload reads the files that changed since prev and returns the new state (prev itself if nothing changed).
func (v *Vault) reload(prev *state) *state {
	files, err := v.store.load(prev.files)
	if err != nil {
		return &state{err: fmt.Errorf("%w: %w", kms.ErrUnavailable, err)}
	}
	if prev.err == nil && prev.files != nil && sameFiles(prev.files, files) {
		return prev
	}
	s, err := build(files)
	if err != nil {
		return &state{err: fmt.Errorf("%w: %w", kms.ErrUnavailable, err)}
	}
	return s
}

// build makes the state of a load.
func build(files map[string]*snapshotFile) (*state, error) {
	s := &state{files: files, keks: map[string]*kek{}}
	for _, sk := range allKEKs(files) {
		k, err := ready(sk)
		if err != nil {
			return nil, err
		}
		s.keks[k.name] = k
	}
	return s, nil
}

func sameFiles(a, b map[string]*snapshotFile) bool {
	if len(a) != len(b) {
		return false
	}
	for path, f := range a {
		if b[path] != f {
			return false
		}
	}
	return true
}

// ready prepares a stored KEK for use.
func ready(sk storedKEK) (*kek, error) {
	k := &kek{name: sk.name, versions: make([]*keyVersion, len(sk.versions))}
	for i, sv := range sk.versions {
		block, err := aes.NewCipher(sv.material)
		if err != nil {
			return nil, fmt.Errorf("key %q version %d: %w", sk.name, sv.version, err)
		}
		prk, err := hkdf.Extract(sha256.New, sv.material, deriveSalt)
		if err != nil {
			return nil, fmt.Errorf("key %q version %d: %w", sk.name, sv.version, err)
		}
		k.versions[i] = &keyVersion{version: sv.version, created: sv.created, block: block, prk: prk}
	}
	return k, nil
}

// KeyInfo describes a KEK without its material.
type KeyInfo struct {
	Name     string
	Versions []VersionInfo // ascending; the last is the one new data keys are wrapped with
}

// VersionInfo describes one version of a KEK.
type VersionInfo struct {
	Version int
	Created time.Time
}

func info(k storedKEK) KeyInfo {
	ki := KeyInfo{Name: k.name}
	for _, v := range k.versions {
		ki.Versions = append(ki.Versions, VersionInfo{Version: v.version, Created: v.created})
	}
	return ki
}

// ListKeys describes every KEK of the vault at path, sorted by name.
func ListKeys(path string) ([]KeyInfo, error) {
	st, err := newStore(path)
	if err != nil {
		return nil, err
	}
	files, err := st.load(nil)
	if err != nil {
		return nil, err
	}
	var out []KeyInfo
	for _, k := range allKEKs(files) {
		out = append(out, info(k))
	}
	return out, nil
}

// CreateKey adds a KEK named name, with one version, to the vault at path. A missing directory vault is
// created with mode 0700, a missing single-file vault with mode 0600. It fails if the KEK already exists.
func CreateKey(path, name string) (KeyInfo, error) {
	return change(path, name, true, func(all []storedKEK, i int) (storedKEK, error) {
		if i >= 0 {
			last := all[i].versions[len(all[i].versions)-1].version
			return storedKEK{}, fmt.Errorf("key-encryption key %q already exists (newest version %d): add a version with `strait keys rotate %s`",
				name, last, name)
		}
		return storedKEK{name: name, versions: []storedVersion{newVersion(1)}}, nil
	})
}

// RotateKey adds a version to the KEK named name in the vault at path. New data keys are wrapped with it from
// then on (by running vaults once they have looked at the files again); older versions still unwrap.
func RotateKey(path, name string) (KeyInfo, error) {
	return change(path, name, false, func(all []storedKEK, i int) (storedKEK, error) {
		if i < 0 {
			return storedKEK{}, fmt.Errorf("%w: no key-encryption key %q: create it with `strait keys create %s`", kms.ErrKeyNotFound, name, name)
		}
		k := all[i]
		next := k.versions[len(k.versions)-1].version + 1
		if next > maxVersion {
			return storedKEK{}, fmt.Errorf("key-encryption key %q has reached the last version number (%d)", name, maxVersion)
		}
		k.versions = append(slices.Clip(k.versions), newVersion(next))
		return k, nil
	})
}

// newVersion makes a version with fresh material, created now (to the second: the file says no more).
func newVersion(n int) storedVersion {
	material := make([]byte, keySize)
	rand.Read(material) // never fails: on a broken system it crashes the program instead
	return storedVersion{version: n, created: time.Now().UTC().Truncate(time.Second), material: material}
}

// change runs edit on the vault's KEKs under the vault's lock, with i the index of the KEK named name (-1 if
// none), and stores the KEK it returns.
func change(path, name string, create bool, edit func(all []storedKEK, i int) (storedKEK, error)) (KeyInfo, error) {
	if err := ValidName(name); err != nil {
		return KeyInfo{}, err
	}
	st, err := newStore(path)
	if err != nil {
		return KeyInfo{}, err
	}
	lockPath := filepath.Join(st.path, ".lock")
	if st.single {
		lockPath = filepath.Join(filepath.Dir(st.path), "."+filepath.Base(st.path)+".lock")
	}
	if _, err := os.Stat(st.path); errors.Is(err, fs.ErrNotExist) && !create {
		_, err = st.load(nil) // says the vault does not exist and how to make one
		return KeyInfo{}, err
	}
	if create && !st.single {
		if err := mkdirVault(st.path); err != nil {
			return KeyInfo{}, err
		}
	}
	unlock, err := secretfile.Lock(lockPath, true, lockAttempts, lockRetry)
	if err != nil {
		return KeyInfo{}, fmt.Errorf("locking the vault: %w", err)
	}
	defer unlock()
	var all []storedKEK
	if _, err := os.Stat(st.path); !(create && st.single && errors.Is(err, fs.ErrNotExist)) {
		files, err := st.load(nil)
		if err != nil {
			return KeyInfo{}, err
		}
		all = allKEKs(files)
	}
	i := slices.IndexFunc(all, func(k storedKEK) bool { return k.name == name })
	k, err := edit(all, i)
	if err != nil {
		return KeyInfo{}, fmt.Errorf("%s %s: %w", st.kind(), st.path, err)
	}
	if i >= 0 {
		all[i] = k
	} else {
		all = append(all, k)
		slices.SortFunc(all, func(a, b storedKEK) int { return strings.Compare(a.name, b.name) })
	}
	if err := st.write(k, all); err != nil {
		return KeyInfo{}, err
	}
	return info(k), nil
}

// mkdirVault creates a missing vault directory, readable by its owner only.
func mkdirVault(path string) error {
	if _, err := os.Stat(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil // it exists (load checks its mode), or load will report why it cannot be read
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return fmt.Errorf("creating vault directory %s: %w", path, err)
	}
	return nil
}
