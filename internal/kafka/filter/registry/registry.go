// Package registry is where policy filters declare themselves: each filter
// package registers its type name (what a config's `type:` says), its
// config struct and its constructor, and the CLI builds filters from config
// through here without knowing any of them. Configs are decoded strictly
// from the struct: a key that no field's yaml tag names is an error with its
// line, so a misspelt `encrypt_header` cannot silently leave headers in
// clear.
package registry

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/straitgw/strait/internal/kafka/filter"
	"github.com/straitgw/strait/internal/kms"
	"github.com/straitgw/strait/internal/kms/kmsconfig"
)

// Env is what a filter's constructor gets besides its own config.
type Env struct {
	// OpenKMS opens the KMS a `kms:` block describes; filters with equal
	// blocks share one KMS and its cache.
	OpenKMS func(kmsconfig.Config) (kms.KMS, error)
	// Log is the gateway's logger.
	Log *slog.Logger
}

// Type is one kind of filter.
type Type struct {
	// Name is the config's `type:` value.
	Name string
	// Example is a minimal config block, quoted when the block is missing.
	Example string
	// Doc is the documentation page, quoted in errors.
	Doc string
	// NewConfig returns a pointer to a zero config to decode into.
	NewConfig func() any
	// New builds the filter from the decoded (and, if it has a Validate
	// method, validated) config.
	New func(cfg any, env Env) (filter.Filter, error)
}

var (
	mu    sync.RWMutex
	types = map[string]Type{}
)

// Register adds a filter type; filter packages call it from init. A second
// registration of a name panics: it is a programming error found at start.
func Register(t Type) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := types[t.Name]; dup {
		panic("registry: filter type " + t.Name + " registered twice")
	}
	types[t.Name] = t
}

// Of registers a filter type whose config is a C: a typed shorthand for
// Register.
func Of[C any](name, example, doc string, newFilter func(c *C, env Env) (filter.Filter, error)) {
	Register(Type{
		Name: name, Example: example, Doc: doc,
		NewConfig: func() any { return new(C) },
		New:       func(cfg any, env Env) (filter.Filter, error) { return newFilter(cfg.(*C), env) },
	})
}

// Names lists the registered types, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(types))
	for n := range types {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ErrUnknownType is returned by Build for a type nothing registered.
var ErrUnknownType = errors.New("unknown filter type")

// Build decodes n strictly into the type's config, validates it and builds
// the filter. Errors name the setting by its path within the block, with
// its line.
func Build(typ string, n *yaml.Node, env Env) (filter.Filter, error) {
	mu.RLock()
	t, ok := types[typ]
	mu.RUnlock()
	if !ok {
		known := strings.Join(Names(), ", ")
		if known == "" {
			known = "none (address rewriting and ApiVersions are built in and always on)"
		}
		return nil, fmt.Errorf("%w %q; known types: %s", ErrUnknownType, typ, known)
	}
	if n == nil || n.Kind == 0 {
		return nil, fmt.Errorf("a %s filter needs a config block, e.g. config: %s (%s)", t.Name, t.Example, t.Doc)
	}
	cfg := t.NewConfig()
	if err := Decode(n, cfg); err != nil {
		return nil, err
	}
	if v, ok := cfg.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return nil, err
		}
	}
	return t.New(cfg, env)
}

// Decode decodes mapping n into the struct out points to, first reporting
// every key that no field's yaml tag names (with its line and the keys
// allowed there) and every value of the wrong shape, all at once.
func Decode(n *yaml.Node, out any) error {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	t := reflect.TypeOf(out).Elem()
	if errs := check(n, t, ""); len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := n.Decode(out); err != nil {
		return fmt.Errorf("%s", strings.ReplaceAll(strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n  "), "\n  ", "; "))
	}
	return nil
}

var unmarshaler = reflect.TypeFor[yaml.Unmarshaler]()

// check walks node n against type t, returning an error per unknown key and
// per value whose shape (mapping, list, single value) does not fit.
func check(n *yaml.Node, t reflect.Type, path string) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if reflect.PointerTo(t).Implements(unmarshaler) || t.Implements(unmarshaler) {
		return nil // the type decodes itself and reports its own errors
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	at := func(format string, args ...any) error {
		name := path
		if name == "" {
			name = "config"
		}
		return fmt.Errorf("%s: %s (line %d)", name, fmt.Sprintf(format, args...), n.Line)
	}
	switch t.Kind() {
	case reflect.Struct:
		if isScalarStruct(t) {
			return nil
		}
		if n.Kind != yaml.MappingNode {
			return []error{at("must be a mapping of settings (%s), got a %s", strings.Join(keysOf(t), ", "), kindName(n))}
		}
		fields := fieldsOf(t)
		var errs []error
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			full := join(path, k.Value)
			if k.Value == "<<" { // a YAML merge key: its mapping's keys count as ours
				errs = append(errs, check(v, t, path)...)
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: unknown setting (line %d); known settings here: %s", full, k.Line, strings.Join(keysOf(t), ", ")))
				continue
			}
			errs = append(errs, check(v, ft, full)...)
		}
		return errs
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return []error{at("must be a mapping, got a %s", kindName(n))}
		}
		var errs []error
		for i := 0; i+1 < len(n.Content); i += 2 {
			errs = append(errs, check(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))...)
		}
		return errs
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte is a single value
		}
		if n.Kind != yaml.SequenceNode {
			return []error{at("must be a list, e.g. %s: [a, b], got a %s", lastKey(path), kindName(n))}
		}
		var errs []error
		for i, e := range n.Content {
			errs = append(errs, check(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return errs
	case reflect.Interface:
		return nil
	default:
		if n.Kind != yaml.ScalarNode {
			return []error{at("must be a single value, got a %s", kindName(n))}
		}
	}
	return nil
}

// isScalarStruct reports struct types written as one value (time.Time).
func isScalarStruct(t reflect.Type) bool {
	return t.PkgPath() == "time"
}

// fieldsOf maps each yaml key of struct t (inline fields flattened) to its
// field's type.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range fieldsOf(ft) {
					out[k] = v
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func keysOf(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	keys := make([]string, 0, t.NumField())
	for k := range fieldsOf(t) {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func lastKey(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	if path == "" {
		return "key"
	}
	return path
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	case yaml.ScalarNode:
		return "single value"
	}
	return "non-mapping"
}
