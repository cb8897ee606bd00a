package credstore

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/straitgw/strait/internal/secretfile"
	"github.com/xdg-go/stringprep"
)

// The file:
//
//	{
//	  "format": "strait-users/1",
//	  "users": [
//	    {
//	      "name": "alice",
//	      "scram": {
//	        "SCRAM-SHA-256": {"iterations": 8192, "salt": "<base64>", "stored_key": "<base64>", "server_key": "<base64>"},
//	        "SCRAM-SHA-512": {"iterations": 8192, "salt": "<base64>", "stored_key": "<base64>", "server_key": "<base64>"}
//	      }
//	    }
//	  ]
//	}
//
// Users are sorted by name. Each mechanism holds what RFC 5802 lets a server keep: the salt and iteration
// count a client needs to derive its keys, StoredKey to check the client's proof and ServerKey to prove the
// server knows it; never the password or SaltedPassword, from which a client's proof could be forged. An empty
// file is a store without users, so that one can be made with `install -m 600 /dev/null FILE`. JSON because
// operators have tools for it; the parser is strict (unknown fields, duplicate users, trailing data, keys of
// the wrong size are errors) so that a damaged file is refused rather than half-read.

const (
	fileFormat = "strait-users/1"
	// maxFileSize bounds what is read: some 40,000 users.
	maxFileSize = 16 << 20
	// MaxNameLen bounds user names: RFC 4616 has PLAIN servers accept 255 octets, and a name is a principal in
	// logs and rules.
	MaxNameLen = 255
	// MaxPasswordLen bounds passwords, so that a PLAIN message and the work to check it stay bounded.
	MaxPasswordLen = 1024
)

// The SCRAM mechanisms the store keeps credentials for, by their IANA names.
const (
	SCRAMSHA256 = "SCRAM-SHA-256"
	SCRAMSHA512 = "SCRAM-SHA-512"
)

// Mechanisms lists the mechanisms AddUser derives credentials for, in the order the file and listings use.
var Mechanisms = []string{SCRAMSHA256, SCRAMSHA512}

type storeFile struct {
	Format string     `json:"format"`
	Users  []userFile `json:"users"`
}

type userFile struct {
	Name  string    `json:"name"`
	SCRAM scramFile `json:"scram"`
}

// scramFile holds a user's credentials per mechanism; a mechanism may be missing (a user who cannot use it).
type scramFile struct {
	SHA256 *credsFile `json:"SCRAM-SHA-256,omitempty"`
	SHA512 *credsFile `json:"SCRAM-SHA-512,omitempty"`
}

type credsFile struct {
	Iterations int    `json:"iterations"`
	Salt       string `json:"salt"`
	StoredKey  string `json:"stored_key"`
	ServerKey  string `json:"server_key"`
}

// user is a user as parsed: credentials per mechanism, indexed as mechanisms.
type user struct {
	name  string
	scram [2]*SCRAMCredentials
}

// ValidName reports why name cannot be a user name, or nil if it can. A name must be what SASLprep (RFC 4013)
// leaves unchanged: RFC 5802 clients prepare names before sending them and Kafka's clients send them as
// given, and only a name that preparing leaves alone reaches the gateway the same from both. ',' and '=' are
// allowed: SCRAM sends them as "=2C" and "=3D", and PLAIN as they are.
func ValidName(name string) error {
	switch {
	case name == "":
		return errors.New("the user name is empty")
	case len(name) > MaxNameLen:
		return fmt.Errorf("the user name is %d bytes long: at most %d", len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return errors.New("the user name is not valid UTF-8")
	}
	if prepared, err := stringprep.SASLprep.Prepare(name); err != nil || prepared != name {
		return fmt.Errorf("invalid user name %q: SASLprep (RFC 4013) would change or refuse it: use no control characters, "+
			"non-ASCII spaces or compatibility characters (ASCII letters, digits and punctuation always work)", name)
	}
	return nil
}

// ValidPassword reports why password cannot be a password, as ValidName does for names. Its message never
// quotes the password.
func ValidPassword(password string) error {
	switch {
	case password == "":
		return errors.New("the password is empty")
	case len(password) > MaxPasswordLen:
		return fmt.Errorf("the password is %d bytes long: at most %d", len(password), MaxPasswordLen)
	case !utf8.ValidString(password):
		return errors.New("the password is not valid UTF-8")
	}
	if prepared, err := stringprep.SASLprep.Prepare(password); err != nil || prepared != password {
		return errors.New("the password has characters that SASLprep (RFC 4013) would change or refuse (control characters " +
			"such as a tab, non-ASCII spaces, compatibility characters): clients that prepare it and clients that do not " +
			"would send different passwords; choose another")
	}
	return nil
}

// parseFile parses the content of a store file into its users, sorted by name.
func parseFile(data []byte) ([]*user, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var f storeFile
	if err := secretfile.DecodeStrict(data, &f, "credential store file"); err != nil {
		return nil, err
	}
	if f.Format != fileFormat {
		return nil, fmt.Errorf("format is %q, want %q", f.Format, fileFormat)
	}
	users := make([]*user, 0, len(f.Users))
	seen := make(map[string]bool, len(f.Users))
	for i, uf := range f.Users {
		u, err := uf.parse()
		if err != nil {
			return nil, fmt.Errorf("users[%d]: %w", i, err)
		}
		if seen[u.name] {
			return nil, fmt.Errorf("users[%d]: user %q appears twice", i, u.name)
		}
		seen[u.name] = true
		users = append(users, u)
	}
	slices.SortFunc(users, func(a, b *user) int { return strings.Compare(a.name, b.name) })
	return users, nil
}

func (uf *userFile) parse() (*user, error) {
	if err := ValidName(uf.Name); err != nil {
		return nil, err
	}
	u := &user{name: uf.Name}
	for i, cf := range []*credsFile{uf.SCRAM.SHA256, uf.SCRAM.SHA512} {
		if cf == nil {
			continue
		}
		c, err := cf.parse(mechanisms[i])
		if err != nil {
			return nil, fmt.Errorf("user %q: %s: %w", uf.Name, mechanisms[i].name, err)
		}
		u.scram[i] = c
	}
	if u.scram[0] == nil && u.scram[1] == nil {
		return nil, fmt.Errorf("user %q has no credentials: want %s or %s under \"scram\"", uf.Name, SCRAMSHA256, SCRAMSHA512)
	}
	return u, nil
}

// parse checks one mechanism's credentials. The values are decoded here rather than as []byte fields so that
// no error message can quote them.
func (cf *credsFile) parse(m mechanism) (*SCRAMCredentials, error) {
	if cf.Iterations < MinIterations || cf.Iterations > MaxIterations {
		return nil, fmt.Errorf("iterations is %d: want %d to %d", cf.Iterations, MinIterations, MaxIterations)
	}
	salt, err := base64.StdEncoding.Strict().DecodeString(cf.Salt)
	if err != nil || len(salt) < minSaltLen || len(salt) > maxSaltLen {
		return nil, fmt.Errorf("salt is not %d to %d bytes of standard base64", minSaltLen, maxSaltLen)
	}
	stored, err := base64.StdEncoding.Strict().DecodeString(cf.StoredKey)
	if err != nil || len(stored) != m.size {
		return nil, fmt.Errorf("stored_key is not %d bytes of standard base64", m.size)
	}
	server, err := base64.StdEncoding.Strict().DecodeString(cf.ServerKey)
	if err != nil || len(server) != m.size {
		return nil, fmt.Errorf("server_key is not %d bytes of standard base64", m.size)
	}
	return &SCRAMCredentials{Salt: salt, Iterations: cf.Iterations, StoredKey: stored, ServerKey: server}, nil
}

// encodeFile is the content of a store file holding users (sorted by name).
func encodeFile(users []*user) []byte {
	f := storeFile{Format: fileFormat, Users: make([]userFile, len(users))}
	for i, u := range users {
		f.Users[i] = userFile{Name: u.name, SCRAM: scramFile{SHA256: encodeCreds(u.scram[0]), SHA512: encodeCreds(u.scram[1])}}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		panic("credstore: encoding the store: " + err.Error()) // only strings and ints: cannot fail
	}
	return append(b, '\n')
}

func encodeCreds(c *SCRAMCredentials) *credsFile {
	if c == nil {
		return nil
	}
	enc := base64.StdEncoding.EncodeToString
	return &credsFile{Iterations: c.Iterations, Salt: enc(c.Salt), StoredKey: enc(c.StoredKey), ServerKey: enc(c.ServerKey)}
}
