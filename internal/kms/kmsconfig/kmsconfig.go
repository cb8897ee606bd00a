// Package kmsconfig is the one `kms:` config block that every filter which
// protects data with key-encryption keys shares (record encryption, field
// encryption), and the one place that turns such a block into a KMS behind
// its cache. A new KMS backend adds a type here and nowhere in the filters.
package kmsconfig

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/kms/vault"
)

// Config selects and configures a KMS.
type Config struct {
	// Type is the backend: vault (a filesystem vault, see docs/kms.md).
	Type string `yaml:"type"`
	// Path is the vault directory (or single .json file) for type vault.
	Path string `yaml:"path"`
	// Timeout bounds each call to the KMS. Zero means the filter's default.
	Timeout time.Duration `yaml:"timeout"`
	// Cache sets the cache in front of the KMS.
	Cache Cache `yaml:"cache"`
}

// Cache sets the cache in front of the KMS (kms.NewCache). It is on unless
// disabled; zero values take the cache's defaults.
type Cache struct {
	Disabled    bool          `yaml:"disabled"`
	MaxEntries  int           `yaml:"max_entries"`
	TTL         time.Duration `yaml:"ttl"`
	LatestTTL   time.Duration `yaml:"latest_ttl"`
	NegativeTTL time.Duration `yaml:"negative_ttl"`
}

// Validate reports every problem of the block at once, each naming its
// field (relative to the block, prefixed "kms.") and the fix.
func (c Config) Validate() error {
	var errs []error
	switch c.Type {
	case "":
		errs = append(errs, errors.New("kms.type: is empty: set the KMS that holds the key-encryption keys; the one available is vault (a filesystem vault, see docs/kms.md)"))
	case "vault":
		if c.Path == "" {
			errs = append(errs, errors.New("kms.path: is empty: set the vault directory (or single .json file), made with `strait keys create --vault PATH NAME`"))
		}
	default:
		errs = append(errs, fmt.Errorf("kms.type: unknown KMS %q: the one available is vault", c.Type))
	}
	if c.Timeout < 0 {
		errs = append(errs, errors.New("kms.timeout: must not be negative: leave it out for the default (5s)"))
	}
	cc := c.Cache
	if cc.MaxEntries < 0 || cc.TTL < 0 || cc.LatestTTL < 0 || cc.NegativeTTL < 0 {
		errs = append(errs, errors.New("kms.cache: max_entries, ttl, latest_ttl and negative_ttl must not be negative: leave one out for its default"))
	}
	return errors.Join(errs...)
}

// Open builds the KMS the block describes, behind a cache unless disabled.
func Open(c Config) (kms.KMS, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var k kms.KMS
	switch c.Type {
	case "vault":
		v, err := vault.Open(c.Path, vault.Options{})
		if err != nil {
			return nil, fmt.Errorf("kms.path: %w", err)
		}
		k = v
	}
	if c.Cache.Disabled {
		return k, nil
	}
	cc := c.Cache
	return kms.NewCache(k, kms.CacheOptions{MaxEntries: cc.MaxEntries, TTL: cc.TTL, LatestTTL: cc.LatestTTL, NegativeTTL: cc.NegativeTTL}), nil
}

// Opener opens each distinct block once, so that filters configured with
// the same KMS (record and field encryption of one gateway, say) share one
// KMS and one cache: one set of KMS calls, one place keys are held.
type Opener struct {
	mu   sync.Mutex
	open map[Config]kms.KMS
}

// Open returns the KMS of block c, opening it on first use.
func (o *Opener) Open(c Config) (kms.KMS, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if k, ok := o.open[c]; ok {
		return k, nil
	}
	k, err := Open(c)
	if err != nil {
		return nil, err
	}
	if o.open == nil {
		o.open = map[Config]kms.KMS{}
	}
	o.open[c] = k
	return k, nil
}
