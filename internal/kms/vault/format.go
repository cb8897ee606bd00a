package vault

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/straitgw/strait/internal/secretfile"
)

// The files. A directory vault holds one file per KEK, NAME.json:
//
//	{
//	  "format": "strait-kek/1",
//	  "name": "orders",
//	  "versions": [
//	    {"version": 1, "created": "2026-11-30T12:00:00Z", "key": "<32 bytes, standard base64>"},
//	    {"version": 2, "created": "2026-12-01T08:00:00Z", "key": "..."}
//	  ]
//	}
//
// A single-file vault holds them all: {"format": "strait-vault/1", "keys": [{"name": ..., "versions": [...]}]}.
// JSON because operators already have tools for it (jq); the parser is strict (unknown fields, duplicates,
// trailing data and out-of-order versions are errors) so that a damaged file is refused rather than half-read.

const (
	kekFormat   = "strait-kek/1"
	vaultFormat = "strait-vault/1"
	// fileExt ends every KEK file of a directory vault.
	fileExt = ".json"
	// keySize is the size of every KEK version's material: an AES-256 key.
	keySize = 32
	// maxVersion bounds version numbers, so that a wrapped key's version prefix stays within 3 bytes.
	maxVersion = 1<<21 - 1
	// maxFileSize bounds what is read of one file: a KEK with thousands of versions is far below it.
	maxFileSize = 16 << 20
	// maxNameLen bounds KEK names, which are also file names.
	maxNameLen = 128
)

// nameRE is what a KEK name may be: letters, digits, '.', '_' and '-', not starting with '.' (hidden files
// are the vault's own temporary and lock files) or '-' (it would read as a flag).
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)

// ValidName reports why name cannot be a KEK name, or nil if it can.
func ValidName(name string) error {
	if len(name) > maxNameLen || !nameRE.MatchString(name) {
		return fmt.Errorf("invalid key name %q: use at most %d letters, digits, '.', '_' and '-', starting with a letter, digit or '_'",
			name, maxNameLen)
	}
	return nil
}

// kekFile is a KEK as stored: the document of a NAME.json file, or an element of a vault file's keys.
type kekFile struct {
	Format   string        `json:"format,omitempty"`
	Name     string        `json:"name"`
	Versions []versionFile `json:"versions"`
}

type versionFile struct {
	Version int       `json:"version"`
	Created time.Time `json:"created"`
	Key     string    `json:"key"`
}

type vaultFile struct {
	Format string    `json:"format"`
	Keys   []kekFile `json:"keys"`
}

// storedKEK is a KEK as parsed from a file: its versions in ascending order, each with its material.
type storedKEK struct {
	name     string
	versions []storedVersion
}

type storedVersion struct {
	version  int
	created  time.Time
	material []byte
}

// parseKEKFile parses the content of a directory vault's KEK file.
func parseKEKFile(data []byte) (storedKEK, error) {
	var f kekFile
	if err := secretfile.DecodeStrict(data, &f, "key file"); err != nil {
		return storedKEK{}, err
	}
	if f.Format != kekFormat {
		return storedKEK{}, fmt.Errorf("format is %q, want %q", f.Format, kekFormat)
	}
	return f.stored()
}

// parseVaultFile parses the content of a single-file vault. An empty file is an empty vault, so that one can be
// started with `install -m 600 /dev/null FILE`.
func parseVaultFile(data []byte) ([]storedKEK, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var f vaultFile
	if err := secretfile.DecodeStrict(data, &f, "key file"); err != nil {
		return nil, err
	}
	if f.Format != vaultFormat {
		return nil, fmt.Errorf("format is %q, want %q", f.Format, vaultFormat)
	}
	keks := make([]storedKEK, 0, len(f.Keys))
	seen := map[string]bool{}
	for i, kf := range f.Keys {
		if kf.Format != "" {
			return nil, fmt.Errorf("keys[%d]: unexpected format field inside a vault file", i)
		}
		k, err := kf.stored()
		if err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
		if seen[k.name] {
			return nil, fmt.Errorf("keys[%d]: key %q appears twice", i, k.name)
		}
		seen[k.name] = true
		keks = append(keks, k)
	}
	return keks, nil
}

// stored checks a KEK as decoded and returns it with its material decoded.
func (f *kekFile) stored() (storedKEK, error) {
	if err := ValidName(f.Name); err != nil {
		return storedKEK{}, err
	}
	if len(f.Versions) == 0 {
		return storedKEK{}, fmt.Errorf("key %q has no versions", f.Name)
	}
	k := storedKEK{name: f.Name, versions: make([]storedVersion, 0, len(f.Versions))}
	for i, v := range f.Versions {
		switch {
		case v.Version < 1 || v.Version > maxVersion:
			return storedKEK{}, fmt.Errorf("key %q: versions[%d]: version %d is not between 1 and %d", f.Name, i, v.Version, maxVersion)
		case i > 0 && v.Version <= f.Versions[i-1].Version:
			return storedKEK{}, fmt.Errorf("key %q: versions[%d]: version %d does not follow version %d: versions must be in increasing order",
				f.Name, i, v.Version, f.Versions[i-1].Version)
		case v.Created.IsZero():
			return storedKEK{}, fmt.Errorf("key %q: version %d has no created time", f.Name, v.Version)
		}
		// The key is decoded here rather than as a []byte field so that no error message can quote it.
		material, err := base64.StdEncoding.Strict().DecodeString(v.Key)
		if err != nil || len(material) != keySize {
			return storedKEK{}, fmt.Errorf("key %q: version %d: key is not %d bytes of standard base64", f.Name, v.Version, keySize)
		}
		k.versions = append(k.versions, storedVersion{version: v.Version, created: v.Created, material: material})
	}
	return k, nil
}

// file returns the stored form of k.
func (k *storedKEK) file() kekFile {
	f := kekFile{Name: k.name, Versions: make([]versionFile, len(k.versions))}
	for i, v := range k.versions {
		f.Versions[i] = versionFile{Version: v.version, Created: v.created.UTC(), Key: base64.StdEncoding.EncodeToString(v.material)}
	}
	return f
}

func encodeKEKFile(k storedKEK) []byte {
	f := k.file()
	f.Format = kekFormat
	return encode(f)
}

func encodeVaultFile(keks []storedKEK) []byte {
	f := vaultFile{Format: vaultFormat, Keys: make([]kekFile, len(keks))}
	for i := range keks {
		f.Keys[i] = keks[i].file()
	}
	return encode(f)
}

func encode(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic("vault: encoding a key file: " + err.Error()) // only strings, ints and times: cannot fail
	}
	return append(b, '\n')
}
