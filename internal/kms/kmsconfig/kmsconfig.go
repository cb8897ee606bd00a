// Package kmsconfig is the one `kms:` config block that every filter which
// protects data with key-encryption keys shares (record encryption, field
// encryption), and the one place that turns such a block into a KMS behind
// its cache. A new KMS backend adds a type here and nowhere in the filters.
package kmsconfig

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/kms/awskms"
	"github.com/straitgw/strait/internal/kms/vault"
)

// Config selects and configures a KMS.
type Config struct {
	Backend `yaml:",inline"`
	// Timeout bounds each call to the KMS, retries included. Zero means
	// the filter's default.
	Timeout time.Duration `yaml:"timeout"`
	// Cache sets the cache in front of the KMS.
	Cache Cache `yaml:"cache"`
	// Previous is a KMS the block only reads from: a DEK that the KMS
	// above says is not its own (a key it does not have, a wrapped key it
	// cannot read) is unwrapped by this one. It keeps records written
	// before a topic moved to a new KMS readable (docs/kms.md).
	Previous Backend `yaml:"previous"`
}

// Backend is one KMS: its type and that type's settings. Each type reads
// only its own fields.
type Backend struct {
	// Type is the backend: vault (a filesystem vault) or aws (AWS KMS).
	Type string `yaml:"type"`
	// Path is the vault directory (or single .json file) for type vault.
	Path string `yaml:"path"`
	// Region is the AWS region for type aws; empty takes the standard
	// AWS chain's (AWS_REGION, the shared config file).
	Region string `yaml:"region"`
	// Endpoint overrides the AWS KMS endpoint for type aws (a VPC
	// endpoint, or a local KMS); empty is AWS's own for the region.
	Endpoint string `yaml:"endpoint"`
	// HMACKey names the HMAC KMS key that deterministic encryption uses
	// for a KEK, for type aws; {kek} is the KEK's name. Default
	// "{kek}-hmac".
	HMACKey string `yaml:"hmac_key"`
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

const types = "vault (a filesystem vault) or aws (AWS KMS); see docs/kms.md"

// Validate reports every problem of the block at once, each naming its
// field (relative to the block, prefixed "kms.") and the fix.
func (c Config) Validate() error {
	errs := c.Backend.validate("kms.", true)
	if c.Previous != (Backend{}) {
		errs = append(errs, c.Previous.validate("kms.previous.", false)...)
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

func (b Backend) validate(p string, top bool) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(p+format, args...)) }
	// notFor names the fields set that the type does not read.
	notFor := func(typ string, fields map[string]string) {
		for _, name := range []string{"path", "region", "endpoint", "hmac_key"} {
			if fields[name] != "" {
				bad("%s: is not a setting of type %s: remove it", name, typ)
			}
		}
	}
	switch b.Type {
	case "":
		if top {
			bad("type: is empty: set the KMS that holds the key-encryption keys: %s", types)
		} else {
			bad("type: is empty: set the KMS that holds the older key-encryption keys: %s", types)
		}
	case "vault":
		if b.Path == "" {
			bad("path: is empty: set the vault directory (or single .json file), made with `strait keys create --vault PATH NAME`")
		}
		notFor("vault", map[string]string{"region": b.Region, "endpoint": b.Endpoint, "hmac_key": b.HMACKey})
	case "aws":
		if b.Endpoint != "" && !strings.HasPrefix(b.Endpoint, "https://") && !strings.HasPrefix(b.Endpoint, "http://") {
			bad("endpoint: %q is not a URL: write https://HOST (or leave it out for AWS's own endpoint)", b.Endpoint)
		}
		if b.HMACKey != "" && !strings.Contains(b.HMACKey, "{kek}") {
			bad(`hmac_key: %q has no {kek}: every KEK needs an HMAC key of its own, e.g. hmac_key: "{kek}-hmac"`, b.HMACKey)
		}
		notFor("aws", map[string]string{"path": b.Path})
	default:
		bad("type: unknown KMS %q: use %s", b.Type, types)
	}
	return errs
}

// Open builds the KMS the block describes, behind a cache unless disabled.
func Open(c Config) (kms.KMS, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	k, err := c.Backend.open("kms.")
	if err != nil {
		return nil, err
	}
	if c.Previous != (Backend{}) {
		prev, err := c.Previous.open("kms.previous.")
		if err != nil {
			return nil, err
		}
		k = kms.WithPrevious(k, prev)
	}
	if c.Cache.Disabled {
		return k, nil
	}
	cc := c.Cache
	return kms.NewCache(k, kms.CacheOptions{MaxEntries: cc.MaxEntries, TTL: cc.TTL, LatestTTL: cc.LatestTTL, NegativeTTL: cc.NegativeTTL}), nil
}

// open builds one backend, counted in kms.Calls. p prefixes field names in errors.
func (b Backend) open(p string) (kms.KMS, error) {
	switch b.Type {
	case "vault":
		v, err := vault.Open(b.Path, vault.Options{})
		if err != nil {
			return nil, fmt.Errorf("%spath: %w", p, err)
		}
		return kms.Metered(v, "vault"), nil
	case "aws":
		a, err := awskms.New(context.Background(), awskms.Options{Region: b.Region, Endpoint: b.Endpoint, HMACKey: b.HMACKey})
		if err != nil {
			return nil, fmt.Errorf("%stype: aws: %w", p, err)
		}
		return kms.Metered(a, "aws"), nil
	}
	return nil, fmt.Errorf("%stype: unknown KMS %q", p, b.Type)
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
