package credstore

import (
	"bytes"
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/secretfile"
)

// newStoreFile adds users (name → password) to a new store file at the minimum iteration count, to keep tests
// fast, and returns its path.
func newStoreFile(t *testing.T, users ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.store")
	for i := 0; i+1 < len(users); i += 2 {
		if _, err := AddUser(path, users[i], users[i+1], MinIterations); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// clock is a settable time for a Store's reloads.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// openStore opens path with a manual clock and a log that the test can read.
func openStore(t *testing.T, path string) (*Store, *clock, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	s, err := Open(path, Options{ReloadInterval: time.Second, Logger: slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Now()}
	s.now = c.now
	s.checked.Store(c.now().UnixNano())
	return s, c, &logs
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// TestRFC7677Vector checks the key derivation against the example exchange of RFC 7677 §3: the StoredKey
// derived from "pencil" verifies the client's proof, and the ServerKey gives the server's signature.
func TestRFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	proof, _ := base64.StdEncoding.DecodeString("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
	const serverSignature = "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
	authMessage := "n=user,r=rOprNGfwEbeRWgbNEkqO," +
		"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096," +
		"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"

	m := mechanisms[0]
	stored, server := m.keys(m.saltedPassword("pencil", salt, 4096))

	mac := hmac.New(m.hash, stored)
	mac.Write([]byte(authMessage))
	clientKey := mac.Sum(nil)
	for i := range clientKey {
		clientKey[i] ^= proof[i]
	}
	h := m.hash()
	h.Write(clientKey)
	if !hmac.Equal(h.Sum(nil), stored) {
		t.Error("the RFC's client proof does not verify against the derived StoredKey")
	}
	mac = hmac.New(m.hash, server)
	mac.Write([]byte(authMessage))
	if got := base64.StdEncoding.EncodeToString(mac.Sum(nil)); got != serverSignature {
		t.Errorf("server signature %s, want the RFC's %s", got, serverSignature)
	}
	if !m.verify(&SCRAMCredentials{Salt: salt, Iterations: 4096, StoredKey: stored}, "pencil") ||
		m.verify(&SCRAMCredentials{Salt: salt, Iterations: 4096, StoredKey: stored}, "pencil2") {
		t.Error("verify does not tell the RFC's password from another")
	}
}

func TestAddUserWritesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.store")
	replaced, err := AddUser(path, "alice", "alice-secret", 0)
	if err != nil || replaced {
		t.Fatalf("AddUser = %v, %v; want a new user", replaced, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	if bytes.Contains(data, []byte("alice-secret")) {
		t.Fatal("the file holds the password")
	}
	var doc struct {
		Format string
		Users  []struct {
			Name  string
			SCRAM map[string]struct {
				Iterations int
				Salt       string
			}
		}
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if doc.Format != "strait-users/1" || len(doc.Users) != 1 || doc.Users[0].Name != "alice" || len(doc.Users[0].SCRAM) != 2 {
		t.Fatalf("file = %+v\n%s", doc, data)
	}
	for _, mech := range Mechanisms {
		c, ok := doc.Users[0].SCRAM[mech]
		salt, err := base64.StdEncoding.DecodeString(c.Salt)
		if !ok || err != nil || len(salt) != 16 || c.Iterations != DefaultIterations {
			t.Errorf("%s: %+v (salt %d bytes, %v); want a 16-byte salt and %d iterations", mech, c, len(salt), err, DefaultIterations)
		}
	}
	for _, field := range []string{`"stored_key"`, `"server_key"`} {
		if bytes.Count(data, []byte(field)) != 2 {
			t.Errorf("the file does not have %s for both mechanisms:\n%s", field, data)
		}
	}

	// The temporary file is gone, and no lock file was left.
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want only the store", len(entries))
	}
}

func TestAddUserReplaces(t *testing.T) {
	path := newStoreFile(t, "alice", "old-password", "bob", "bob-password")
	s, _, _ := openStore(t, path)
	before, _ := s.Lookup("alice", SCRAMSHA256)

	replaced, err := AddUser(path, "alice", "new-password", 5000)
	if err != nil || !replaced {
		t.Fatalf("AddUser of an existing user = %v, %v; want replaced", replaced, err)
	}
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	after, ok := s.Lookup("alice", SCRAMSHA256)
	if !ok || bytes.Equal(after.Salt, before.Salt) || after.Iterations != 5000 {
		t.Errorf("after the replacement: %v, salt changed %v, %d iterations; want a new salt and 5000", ok, !bytes.Equal(after.Salt, before.Salt), after.Iterations)
	}
	if s.VerifyPlain("alice", "old-password") || !s.VerifyPlain("alice", "new-password") {
		t.Error("the old password still works, or the new one does not")
	}
	if !s.VerifyPlain("bob", "bob-password") {
		t.Error("replacing alice lost bob")
	}
	users, err := ListUsers(path)
	if err != nil || len(users) != 2 {
		t.Fatalf("ListUsers = %v, %v", users, err)
	}
}

func TestAddUserRefuses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users.store")
	tests := []struct {
		name, user, password string
		iterations           int
		path                 string
		want                 string
	}{
		{"empty name", "", "pw", 0, path, "user name is empty"},
		{"long name", strings.Repeat("a", 256), "pw", 0, path, "at most 255"},
		{"control character in the name", "al\tice", "pw", 0, path, "SASLprep"},
		{"non-ASCII space in the name", "al\u00a0ice", "pw", 0, path, "SASLprep"},
		{"name not UTF-8", "al\xffice", "pw", 0, path, "not valid UTF-8"},
		{"empty password", "alice", "", 0, path, "password is empty"},
		{"long password", "alice", strings.Repeat("p", 1025), 0, path, "at most 1024"},
		{"tab in the password", "alice", "pass\tword", 0, path, "SASLprep"},
		{"password not UTF-8", "alice", "pass\xff", 0, path, "not valid UTF-8"},
		{"too few iterations", "alice", "pw", 4095, path, "want 4096 to 16384"},
		{"too many iterations", "alice", "pw", 16385, path, "want 4096 to 16384"},
		{"missing directory", "alice", "pw", 0, filepath.Join(dir, "nope", "users.store"), "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := AddUser(tt.path, tt.user, tt.password, tt.iterations)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("AddUser: %v, want an error containing %q", err, tt.want)
			}
			if tt.password != "" && len(tt.password) < 100 && strings.Contains(err.Error(), tt.password) {
				t.Errorf("the error quotes the password: %v", err)
			}
			if _, err := os.Stat(path); err == nil {
				t.Error("a refused AddUser created the store")
			}
		})
	}
}

func TestNamesWithCommaAndEquals(t *testing.T) {
	path := newStoreFile(t, "a,b=c", "pw-1")
	s, _, _ := openStore(t, path)
	if _, ok := s.Lookup("a,b=c", SCRAMSHA512); !ok || !s.VerifyPlain("a,b=c", "pw-1") {
		t.Error("a user named a,b=c is not found under that name")
	}
	if _, ok := s.Lookup("a=2Cb=3Dc", SCRAMSHA512); ok {
		t.Error("the store decodes SCRAM's escapes itself: the mechanism does, the store keeps names as they are")
	}
}

func TestRemoveUser(t *testing.T) {
	path := newStoreFile(t, "alice", "pw-a", "bob", "pw-b")
	if err := RemoveUser(path, "alice"); err != nil {
		t.Fatal(err)
	}
	users, err := ListUsers(path)
	if err != nil || len(users) != 1 || users[0].Name != "bob" {
		t.Fatalf("after removing alice: %+v, %v", users, err)
	}
	if err := RemoveUser(path, "alice"); !errors.Is(err, ErrNoUser) || !strings.Contains(err.Error(), `"alice"`) {
		t.Errorf("removing alice twice: %v, want ErrNoUser naming her", err)
	}
	missing := filepath.Join(t.TempDir(), "none.store")
	if err := RemoveUser(missing, "alice"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("removing from a missing store: %v", err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("removing from a missing store created it")
	}
	if err := RemoveUser(path, "bob"); err != nil {
		t.Fatal(err)
	}
	s, _, _ := openStore(t, path)
	if s.Len() != 0 {
		t.Errorf("a store emptied by RemoveUser has %d users", s.Len())
	}
}

func TestListUsers(t *testing.T) {
	path := newStoreFile(t, "carol", "pw-c", "alice", "pw-a")
	users, err := ListUsers(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []UserInfo{
		{Name: "alice", Mechanisms: []MechanismInfo{{SCRAMSHA256, MinIterations}, {SCRAMSHA512, MinIterations}}},
		{Name: "carol", Mechanisms: []MechanismInfo{{SCRAMSHA256, MinIterations}, {SCRAMSHA512, MinIterations}}},
	}
	if fmt.Sprint(users) != fmt.Sprint(want) {
		t.Errorf("ListUsers = %+v, want %+v", users, want)
	}
	if _, err := ListUsers(filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "strait users add --store") {
		t.Errorf("ListUsers of a missing store: %v, want how to create one", err)
	}
}

// TestConcurrentAdds: commands adding users at the same time lose none of them.
func TestConcurrentAdds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.store")
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Go(func() {
			_, err := AddUser(path, fmt.Sprintf("user%d", i), "pw", MinIterations)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if users, err := ListUsers(path); err != nil || len(users) != 6 {
		t.Errorf("after 6 concurrent adds: %d users, %v", len(users), err)
	}
}

func TestOpenRefuses(t *testing.T) {
	valid := func(mutate func(u map[string]any)) string {
		u := map[string]any{"name": "alice", "scram": map[string]any{
			"SCRAM-SHA-256": map[string]any{"iterations": 4096, "salt": b64(16), "stored_key": b64(32), "server_key": b64(32)},
		}}
		if mutate != nil {
			mutate(u)
		}
		b, _ := json.Marshal(map[string]any{"format": "strait-users/1", "users": []any{u}})
		return string(b)
	}
	creds := func(u map[string]any) map[string]any {
		return u["scram"].(map[string]any)["SCRAM-SHA-256"].(map[string]any)
	}
	tests := []struct {
		name, content string
		want          string
	}{
		{"malformed JSON", `{"format": `, "truncated JSON"},
		{"syntax error", `{"format" "x"}`, "malformed JSON at byte"},
		{"wrong format", `{"format": "strait-users/2", "users": []}`, `want "strait-users/1"`},
		{"unknown field", `{"format": "strait-users/1", "users": [], "extra": 1}`, "unknown field"},
		{"trailing data", `{"format": "strait-users/1", "users": []} {}`, "unexpected data after"},
		{"wrong type", `{"format": "strait-users/1", "users": {}}`, "wrong type"},
		{"unknown mechanism", valid(func(u map[string]any) { u["scram"].(map[string]any)["SCRAM-SHA-1"] = map[string]any{} }), "unknown field"},
		{"no credentials", valid(func(u map[string]any) { u["scram"] = map[string]any{} }), "has no credentials"},
		{"bad name", valid(func(u map[string]any) { u["name"] = "" }), "user name is empty"},
		{"few iterations", valid(func(u map[string]any) { creds(u)["iterations"] = 1000 }), "iterations is 1000"},
		{"short salt", valid(func(u map[string]any) { creds(u)["salt"] = b64(8) }), "salt is not 16 to 64 bytes"},
		{"salt not base64", valid(func(u map[string]any) { creds(u)["salt"] = "!!!!" }), "salt is not"},
		{"short stored key", valid(func(u map[string]any) { creds(u)["stored_key"] = b64(20) }), "stored_key is not 32 bytes"},
		{"server key of SHA-512's size", valid(func(u map[string]any) { creds(u)["server_key"] = b64(64) }), "server_key is not 32 bytes"},
		{"duplicate user", strings.Replace(valid(nil), `"users":[`, `"users":[`+userJSON("alice")+`,`, 1), `user "alice" appears twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "users.store")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(path, Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open: %v; want an error naming the file and containing %q", err, tt.want)
			}
			if _, err := ListUsers(path); err == nil {
				t.Error("ListUsers read a file Open refuses")
			}
		})
	}
	if s, err := Open(writeFile(t, valid(nil), 0o600), Options{}); err != nil || s.Len() != 1 {
		t.Errorf("the valid file the cases start from: %v", err)
	}
}

func b64(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }

func userJSON(name string) string {
	return fmt.Sprintf(`{"name": %q, "scram": {"SCRAM-SHA-512": {"iterations": 4096, "salt": %q, "stored_key": %q, "server_key": %q}}}`,
		name, b64(16), b64(64), b64(64))
}

func writeFile(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.store")
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

func TestOpenRefusesLooseFile(t *testing.T) {
	for _, mode := range []os.FileMode{0o640, 0o604, 0o620, 0o602, 0o660, 0o644} {
		t.Run(fmt.Sprintf("%04o", mode), func(t *testing.T) {
			path := writeFile(t, "", mode)
			_, err := Open(path, Options{})
			if err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) || !strings.Contains(err.Error(), fmt.Sprintf("mode %04o", mode)) {
				t.Fatalf("Open of a file with mode %04o: %v; want the mode and the fix", mode, err)
			}
			if _, err := ListUsers(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
				t.Errorf("ListUsers: %v", err)
			}
			if _, err := AddUser(path, "alice", "pw", MinIterations); err == nil || !strings.Contains(err.Error(), "chmod 600") {
				t.Errorf("AddUser to a loose store: %v, want it refused", err)
			}
		})
	}
}

func TestOpenOther(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "none.store"), Options{}); err == nil ||
		!strings.Contains(err.Error(), "does not exist: add a user with `strait users add --store") {
		t.Errorf("Open of a missing file: %v", err)
	}
	if _, err := Open(t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Open of a directory: %v", err)
	}
	if _, err := Open("", Options{}); err == nil {
		t.Error("Open of no path succeeded")
	}
	s, err := Open(writeFile(t, " \n", 0o600), Options{})
	if err != nil || s.Len() != 0 {
		t.Errorf("Open of an empty file: %v, %v; want a store without users", s, err)
	}
	big := writeFile(t, "", 0o600)
	if err := os.Truncate(big, maxFileSize+1); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(big, Options{}); err == nil || !strings.Contains(err.Error(), "larger than 16 MiB") {
		t.Errorf("Open of a huge file: %v", err)
	}
}

func TestLookup(t *testing.T) {
	path := newStoreFile(t, "alice", "pw-a")
	s, _, _ := openStore(t, path)
	for _, mech := range Mechanisms {
		c, ok := s.Lookup("alice", mech)
		size := mechanisms[mechanismIndex(mech)].size
		if !ok || len(c.Salt) != 16 || c.Iterations != MinIterations || len(c.StoredKey) != size || len(c.ServerKey) != size {
			t.Errorf("alice, %s: %v %+v", mech, ok, c)
		}
	}
	if _, ok := s.Lookup("alice", "SCRAM-SHA-1"); ok {
		t.Error("alice found for a mechanism the store does not have")
	}
}

// TestPhantom: an unknown user gets credentials shaped like a real user's, the same ones every time, and
// different ones from another unknown name.
func TestPhantom(t *testing.T) {
	path := newStoreFile(t, "alice", "pw-a")
	s, _, _ := openStore(t, path)
	real, _ := s.Lookup("alice", SCRAMSHA512)
	for _, mech := range append(Mechanisms, "SCRAM-SHA-1") {
		p1, ok1 := s.Lookup("mallory", mech)
		p2, ok2 := s.Lookup("mallory", mech)
		other, _ := s.Lookup("trudy", mech)
		if ok1 || ok2 {
			t.Fatalf("%s: an unknown user was found", mech)
		}
		if !bytes.Equal(p1.Salt, p2.Salt) || !bytes.Equal(p1.StoredKey, p2.StoredKey) || p1.Iterations != p2.Iterations {
			t.Errorf("%s: the same unknown name got different phantoms", mech)
		}
		if bytes.Equal(p1.Salt, other.Salt) {
			t.Errorf("%s: two unknown names got the same salt", mech)
		}
		if len(p1.Salt) != len(real.Salt) || p1.Iterations != real.Iterations {
			t.Errorf("%s: phantom has a %d-byte salt and %d iterations; real users %d and %d", mech, len(p1.Salt), p1.Iterations, len(real.Salt), real.Iterations)
		}
	}
	p, _ := s.Lookup("mallory", SCRAMSHA512)
	if len(p.StoredKey) != 64 || len(p.ServerKey) != 64 {
		t.Errorf("SCRAM-SHA-512 phantom keys are %d and %d bytes, want 64", len(p.StoredKey), len(p.ServerKey))
	}
}

// TestPhantomIterations: unknown users get the iteration count most users have.
func TestPhantomIterations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.store")
	for name, iters := range map[string]int{"a": 5000, "b": 5000, "c": 9000} {
		if _, err := AddUser(path, name, "pw", iters); err != nil {
			t.Fatal(err)
		}
	}
	s, _, _ := openStore(t, path)
	if p, _ := s.Lookup("nobody", SCRAMSHA256); p.Iterations != 5000 {
		t.Errorf("phantom iterations %d, want 5000, the count most users have", p.Iterations)
	}
	empty, _ := Open(writeFile(t, "", 0o600), Options{})
	if p, _ := empty.Lookup("nobody", SCRAMSHA256); p.Iterations != DefaultIterations {
		t.Errorf("phantom iterations in an empty store %d, want %d", p.Iterations, DefaultIterations)
	}
}

func TestVerifyPlain(t *testing.T) {
	path := newStoreFile(t, "alice", "pw-a")
	s, _, _ := openStore(t, path)
	tests := []struct {
		user, password string
		want           bool
	}{
		{"alice", "pw-a", true},
		{"alice", "pw-b", false},
		{"alice", "", false},
		{"Alice", "pw-a", false},
		{"mallory", "pw-a", false},
		{"mallory", "", false},
	}
	for _, tt := range tests {
		if got := s.VerifyPlain(tt.user, tt.password); got != tt.want {
			t.Errorf("VerifyPlain(%q, %q) = %v, want %v", tt.user, tt.password, got, tt.want)
		}
	}

	// A user with SCRAM-SHA-512 credentials only is checked against them.
	m := mechanisms[1]
	c := m.derive("pw-z", MinIterations)
	only512 := writeFile(t, string(encodeFile([]*user{{name: "zed", scram: [2]*SCRAMCredentials{nil, c}}})), 0o600)
	s2, err := Open(only512, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !s2.VerifyPlain("zed", "pw-z") || s2.VerifyPlain("zed", "pw-a") {
		t.Error("a user with SCRAM-SHA-512 credentials only: VerifyPlain does not tell the password")
	}
	if _, ok := s2.Lookup("zed", SCRAMSHA256); ok {
		t.Error("a user with SCRAM-SHA-512 credentials only was found for SCRAM-SHA-256")
	}
}

// TestReload: a running Store picks up a changed file after ReloadInterval; a broken file keeps the users
// loaded before, is reported once, and a fixed file is picked up again.
func TestReload(t *testing.T) {
	path := newStoreFile(t, "alice", "pw-a")
	s, clk, logs := openStore(t, path)

	if _, err := AddUser(path, "bob", "pw-b", MinIterations); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Lookup("bob", SCRAMSHA256); ok {
		t.Fatal("bob was found before the reload interval passed")
	}
	clk.add(time.Second)
	if _, ok := s.Lookup("bob", SCRAMSHA256); !ok {
		t.Fatal("bob was not found after the reload interval")
	}
	if !strings.Contains(logs.String(), "credential store reloaded") {
		t.Errorf("no log line for the reload:\n%s", logs)
	}

	good, _ := os.ReadFile(path)
	broken := []struct {
		name  string
		write func()
		want  string
	}{
		{"malformed", func() { secretfile.WriteAtomic(path, []byte(`{"format": "strait-users/1", "users": [`)) }, "truncated JSON"},
		{"loose mode", func() { secretfile.WriteAtomic(path, good); os.Chmod(path, 0o644) }, "chmod 600"},
		{"removed", func() { os.Remove(path) }, "does not exist"},
	}
	for _, b := range broken {
		t.Run(b.name, func(t *testing.T) {
			logs.Reset()
			b.write()
			clk.add(time.Second)
			if _, ok := s.Lookup("bob", SCRAMSHA256); !ok || !s.VerifyPlain("alice", "pw-a") {
				t.Fatal("a broken file dropped the users loaded before")
			}
			if err := s.Err(); err == nil || !strings.Contains(err.Error(), b.want) {
				t.Errorf("Err() = %v, want %q", err, b.want)
			}
			if n := strings.Count(logs.String(), "cannot be loaded"); n != 1 {
				t.Errorf("%d log lines for the broken file, want 1:\n%s", n, logs)
			}
			for range 3 { // looking again at the same broken file reports nothing new
				clk.add(time.Second)
				s.Lookup("bob", SCRAMSHA256)
			}
			if err := s.Reload(); err == nil || !strings.Contains(err.Error(), b.want) {
				t.Errorf("Reload() = %v, want %q", err, b.want)
			}
			if n := strings.Count(logs.String(), "cannot be loaded"); n != 1 {
				t.Errorf("%d log lines after looking at the same broken file again, want 1:\n%s", n, logs)
			}
			if strings.Contains(logs.String(), "pw-") {
				t.Errorf("the log holds a password:\n%s", logs)
			}
		})
	}

	// Fixed: written anew with carol added.
	if err := secretfile.WriteAtomic(path, good); err != nil {
		t.Fatal(err)
	}
	if _, err := AddUser(path, "carol", "pw-c", MinIterations); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err != nil {
		t.Fatalf("Reload of the fixed file: %v", err)
	}
	if s.Err() != nil || !s.VerifyPlain("carol", "pw-c") {
		t.Errorf("after the fix: Err() = %v, carol found %v", s.Err(), s.VerifyPlain("carol", "pw-c"))
	}
}

// TestReloadRealClock: with the real clock, a change is seen within the interval.
func TestReloadRealClock(t *testing.T) {
	path := newStoreFile(t, "alice", "pw-a")
	s, err := Open(path, Options{ReloadInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := RemoveUser(path, "alice"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.VerifyPlain("alice", "pw-a") {
		if time.Now().After(deadline) {
			t.Fatal("alice can still log in 5 s after her removal")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConcurrentUse runs lookups while the file changes under them (meant for -race).
func TestConcurrentUse(t *testing.T) {
	path := newStoreFile(t, "alice", "pw-a")
	s, err := Open(path, Options{ReloadInterval: time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, ok := s.Lookup("alice", SCRAMSHA256); !ok {
					t.Error("alice disappeared while other users were added")
					return
				}
				s.Lookup("nobody", SCRAMSHA512)
				s.Err()
			}
		})
	}
	for i := range 5 {
		if _, err := AddUser(path, fmt.Sprintf("u%d", i), "pw", MinIterations); err != nil {
			t.Error(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if !s.VerifyPlain("alice", "pw-a") {
		t.Error("alice cannot log in")
	}
}
