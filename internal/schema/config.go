package schema

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Config is where a filter's schemas come from: a registry, definitions
// written inline or in files, or both (the definitions are asked first).
type Config struct {
	// Registry is a registry speaking the Confluent REST API.
	Registry *RegistryConfig `yaml:"registry"`
	// Schemas are definitions kept in the config or on disk. Their
	// references may name only each other.
	Schemas []SchemaConfig `yaml:"schemas"`
	// Cache tunes the caches in front of the sources.
	Cache CacheConfig `yaml:"cache"`
}

// SchemaConfig is one inline or file definition.
type SchemaConfig struct {
	// ID is the schema id payloads carry for it; 0 if they carry none.
	ID int `yaml:"id"`
	// Subject and Version place it under a subject; a missing version is
	// the one after the subject's previous definition.
	Subject string `yaml:"subject"`
	Version int    `yaml:"version"`
	// Type is AVRO (the default), PROTOBUF or JSON.
	Type string `yaml:"type"`
	// Schema is the schema's text; File a file holding it. One of them.
	Schema string `yaml:"schema"`
	File   string `yaml:"file"`
	// References name the definitions this one uses.
	References []Reference `yaml:"references"`
}

// CacheConfig tunes the Registry (see Options).
type CacheConfig struct {
	NotFoundTTL     time.Duration `yaml:"not_found_ttl"`
	RefreshInterval time.Duration `yaml:"refresh_interval"`
}

// Validate checks the config without reading files or dialling.
func (c *Config) Validate() error {
	var errs []error
	if c.Registry == nil && len(c.Schemas) == 0 {
		errs = append(errs, errors.New("schemas: set a registry, schemas, or both"))
	}
	if c.Registry != nil {
		if err := c.Registry.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	for i, s := range c.Schemas {
		where := "schemas[" + strconv.Itoa(i) + "]"
		if (s.Schema == "") == (s.File == "") {
			errs = append(errs, fmt.Errorf("%s: set schema or file, not both or neither", where))
		}
		if _, err := ParseFormat(s.Type); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		if s.ID == 0 && s.Subject == "" {
			errs = append(errs, fmt.Errorf("%s: set an id, a subject or both", where))
		}
		if s.ID < 0 || s.Version < 0 {
			errs = append(errs, fmt.Errorf("%s: id and version must not be negative", where))
		}
	}
	if c.Cache.NotFoundTTL < 0 || c.Cache.RefreshInterval < 0 {
		errs = append(errs, errors.New("schemas cache: durations must not be negative"))
	}
	return errors.Join(errs...)
}

// Open builds the Registry that c describes. It reads the schema files and
// compiles every inline and file definition now, so that a broken one is
// an error at startup; it does not contact the registry.
func Open(ctx context.Context, c Config) (*Registry, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var sources Sources
	var static *Static
	if len(c.Schemas) > 0 {
		defs := make([]Definition, 0, len(c.Schemas))
		for i, s := range c.Schemas {
			f, _ := ParseFormat(s.Type)
			text := s.Schema
			if s.File != "" {
				b, err := os.ReadFile(s.File)
				if err != nil {
					return nil, fmt.Errorf("schemas[%d]: %w", i, err)
				}
				text = string(b)
			}
			defs = append(defs, Definition{ID: s.ID, Subject: s.Subject, Version: s.Version, Format: f, Text: text, References: s.References})
		}
		var err error
		if static, err = NewStatic(defs); err != nil {
			return nil, err
		}
		sources = append(sources, static)
	}
	if c.Registry != nil {
		rest, err := NewREST(*c.Registry)
		if err != nil {
			return nil, err
		}
		sources = append(sources, rest)
	}
	opts := Options{NotFoundTTL: c.Cache.NotFoundTTL, RefreshInterval: c.Cache.RefreshInterval}
	if static != nil {
		// Compile through a registry of the definitions alone: their
		// references may name only each other.
		check := NewRegistry(static, opts)
		var errs []error
		for _, d := range static.all() {
			var err error
			if d.ID != 0 {
				_, err = check.SchemaByID(ctx, d.ID)
			} else {
				_, err = check.SchemaByVersion(ctx, d.Subject, d.Version)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("schemas: %w", err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	}
	var src Source = sources
	if len(sources) == 1 {
		src = sources[0]
	}
	return NewRegistry(src, opts), nil
}
