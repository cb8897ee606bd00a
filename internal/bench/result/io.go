package result

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// newDocument returns an empty document of kind, or nil if kind is
// unknown. Add a case here for a new kind of result.
func newDocument(kind string) any {
	switch kind {
	case KindKafka:
		return new(Kafka)
	case KindKafkaSweep:
		return new(Sweep)
	case KindLLM:
		return new(LLM)
	}
	return nil
}

// kinds lists the kinds newDocument knows, for error messages.
var kinds = []string{KindKafka, KindKafkaSweep, KindLLM}

// Read reads a result file written by Write (or "-" for standard input)
// and returns a *Kafka or a *Sweep, according to its "kind". The workload
// comes back as a json.RawMessage.
func Read(path string) (any, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading results: %w", err)
	}
	doc, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("reading results from %s: %w", path, err)
	}
	return doc, nil
}

// Decode decodes a result document, as Read does.
func Decode(data []byte) (any, error) {
	var head struct {
		Schema *int   `json:"schema"`
		Kind   string `json:"kind"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("not a result file: %w", err)
	}
	if head.Schema == nil {
		return nil, errors.New(`not a result file: it has no "schema" field`)
	}
	if *head.Schema != SchemaVersion {
		return nil, fmt.Errorf("schema version %d, but this build reads only version %d: use the strait that wrote it", *head.Schema, SchemaVersion)
	}
	doc := newDocument(head.Kind)
	if doc == nil {
		return nil, fmt.Errorf("unknown kind %q; known kinds: %s", head.Kind, strings.Join(kinds, ", "))
	}
	if err := json.Unmarshal(data, doc); err != nil {
		return nil, fmt.Errorf("decoding a %q result: %w", head.Kind, err)
	}
	return doc, nil
}

// The workload is the generator's own struct, which this package does not
// know. Decoded into an interface, encoding/json would make it a map and
// lose the order of its fields; these UnmarshalJSON methods keep it as a
// json.RawMessage instead (nil for null), for the caller to decode into
// its struct or write back unchanged.

// UnmarshalJSON decodes k, keeping the workload as a json.RawMessage.
func (k *Kafka) UnmarshalJSON(data []byte) error {
	type plain Kafka // without the method, or this would recurse
	var raw json.RawMessage
	p := (*plain)(k)
	// With a non-nil pointer in the interface, encoding/json decodes into
	// the pointer's target.
	p.Workload = &raw
	if err := json.Unmarshal(data, p); err != nil {
		return err
	}
	k.Workload = rawOrNil(raw)
	return nil
}

// UnmarshalJSON decodes s, keeping the workload as a json.RawMessage.
func (s *Sweep) UnmarshalJSON(data []byte) error {
	type plain Sweep
	var raw json.RawMessage
	p := (*plain)(s)
	p.Workload = &raw
	if err := json.Unmarshal(data, p); err != nil {
		return err
	}
	s.Workload = rawOrNil(raw)
	return nil
}

func rawOrNil(raw json.RawMessage) any {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// Write writes v (a *Kafka or a *Sweep) to path as indented JSON, or to
// standard output if path is "-". It sets an unset Schema and Kind first.
// The file is written under a temporary name and renamed, so a reader
// never sees half of it.
func Write(path string, v any) error {
	data, err := Encode(v)
	if err != nil {
		return fmt.Errorf("writing results to %s: %w", path, err)
	}
	if path == "-" {
		_, err := os.Stdout.Write(data)
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing results: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing results to %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing results to %s: %w", path, err)
	}
	// CreateTemp makes the file readable by its owner only; a result is
	// no secret.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("writing results to %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing results: %w", err)
	}
	return nil
}

// Encode returns v as Write writes it: indented JSON ending in a newline.
func Encode(v any) ([]byte, error) {
	switch d := v.(type) {
	case *Kafka:
		d.Schema, d.Kind = orInt(d.Schema, SchemaVersion), orString(d.Kind, KindKafka)
	case *Sweep:
		d.Schema, d.Kind = orInt(d.Schema, SchemaVersion), orString(d.Kind, KindKafkaSweep)
		for i := range d.Steps {
			if r := d.Steps[i].Result; r != nil {
				r.Schema, r.Kind = orInt(r.Schema, SchemaVersion), orString(r.Kind, KindKafka)
			}
		}
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		var uve *json.UnsupportedValueError
		if errors.As(err, &uve) {
			return nil, fmt.Errorf("%w (a rate or coefficient divided by zero?)", err)
		}
		return nil, err
	}
	return append(data, '\n'), nil
}

func orInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func orString(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
