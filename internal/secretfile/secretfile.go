// Package secretfile reads and writes the small JSON files that hold
// secrets, the KMS vault's key files and the SASL credential store: strict
// decoding whose errors never quote the input, atomic owner-only writes,
// and an advisory lock for the commands that change them (`strait keys`,
// `strait users`).
//
// It imports nothing of ours.
package secretfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DecodeStrict decodes one JSON document into v, refusing unknown fields
// and trailing data. Its errors say where and what is wrong but never
// quote the input, which holds key material; what names the kind of file
// in the message for input that is not one ("key file").
func DecodeStrict(data []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(err, what)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("unexpected data after the JSON document (byte %d)", dec.InputOffset())
	}
	return nil
}

func describeJSONError(err error, what string) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var timeErr *time.ParseError
	switch {
	case errors.As(err, &syntax):
		return fmt.Errorf("malformed JSON at byte %d", syntax.Offset)
	case errors.As(err, &typ):
		return fmt.Errorf("field %q has the wrong type (want %s) at byte %d", typ.Field, typ.Type, typ.Offset)
	case errors.As(err, &timeErr):
		return errors.New("a time is not an RFC 3339 time")
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("truncated JSON")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.TrimPrefix(err.Error(), "json: unknown field ")
		if len(field) > 40 {
			field = field[:40] + "..."
		}
		return fmt.Errorf("unknown field %s", field)
	default:
		return errors.New("not a valid " + what)
	}
}

// WriteAtomic replaces path with data: a temporary file in the same
// directory, synced, then renamed over path, so that a reader sees the old
// file or the new one, never a part; then the directory is synced, so that
// the rename survives a crash. The new file keeps the old one's mode if
// that was owner-only, else it is 0600.
func WriteAtomic(path string, data []byte) (err error) {
	dir, base := filepath.Split(path)
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*") // created 0600
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if old, statErr := os.Stat(path); statErr == nil && old.Mode().Perm()&0o077 == 0 {
		if err := tmp.Chmod(old.Mode().Perm()); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
