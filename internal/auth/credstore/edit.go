package credstore

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/straitgw/strait/internal/secretfile"
)

// ErrNoUser is returned by RemoveUser for a user the store does not have.
var ErrNoUser = errors.New("no such user")

// UserInfo describes a user without their credentials.
type UserInfo struct {
	Name       string
	Mechanisms []MechanismInfo // in the order of Mechanisms
}

// MechanismInfo describes a user's credentials for one mechanism.
type MechanismInfo struct {
	Name       string
	Iterations int
}

func info(u *user) UserInfo {
	ui := UserInfo{Name: u.name}
	for i, c := range u.scram {
		if c != nil {
			ui.Mechanisms = append(ui.Mechanisms, MechanismInfo{Name: mechanisms[i].name, Iterations: c.Iterations})
		}
	}
	return ui
}

// ListUsers describes every user of the store at path, sorted by name.
func ListUsers(path string) ([]UserInfo, error) {
	abs, err := absPath(path)
	if err != nil {
		return nil, err
	}
	users, _, err := readUsers(abs)
	if err != nil {
		return nil, err
	}
	out := make([]UserInfo, 0, len(users))
	for _, u := range users {
		out = append(out, info(u))
	}
	return out, nil
}

// AddUser gives the user name credentials for password, for every mechanism of Mechanisms, derived with
// PBKDF2 at the given iteration count (0: DefaultIterations) and a fresh salt each. It replaces the
// credentials of a user who exists, and says so with replaced. A missing store is created with mode 0600;
// its directory must exist.
func AddUser(path, name, password string, iterations int) (replaced bool, err error) {
	if err := ValidName(name); err != nil {
		return false, err
	}
	if err := ValidPassword(password); err != nil {
		return false, err
	}
	if iterations == 0 {
		iterations = DefaultIterations
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return false, fmt.Errorf("%d iterations: want %d to %d (RFC 7677's minimum to Kafka's maximum)", iterations, MinIterations, MaxIterations)
	}
	u := &user{name: name}
	for i, m := range mechanisms {
		u.scram[i] = m.derive(password, iterations)
	}
	err = change(path, true, func(users []*user) ([]*user, error) {
		i, found := slices.BinarySearchFunc(users, name, func(u *user, name string) int { return strings.Compare(u.name, name) })
		if found {
			replaced = true
			users[i] = u
			return users, nil
		}
		return slices.Insert(users, i, u), nil
	})
	return replaced, err
}

// RemoveUser removes the user name from the store at path. It fails with ErrNoUser if there is none.
func RemoveUser(path, name string) error {
	return change(path, false, func(users []*user) ([]*user, error) {
		i := slices.IndexFunc(users, func(u *user) bool { return u.name == name })
		if i < 0 {
			return nil, fmt.Errorf("%w %q", ErrNoUser, name)
		}
		return slices.Delete(users, i, i+1), nil
	})
}

// change runs edit on the users of the store at path (sorted by name) under the lock of its directory, and
// writes what it returns. With create, a missing store is taken as empty.
func change(path string, create bool, edit func(users []*user) ([]*user, error)) error {
	abs, err := absPath(path)
	if err != nil {
		return err
	}
	unlock, err := secretfile.Lock(filepath.Dir(abs), false, lockAttempts, lockRetry)
	if err != nil {
		return fmt.Errorf("locking the credential store's directory: %w", err)
	}
	defer unlock()
	users, _, err := readUsers(abs)
	if err != nil && !(create && errors.Is(err, fs.ErrNotExist)) {
		return err
	}
	if users, err = edit(users); err != nil {
		return fmt.Errorf("credential store %s: %w", abs, err)
	}
	return secretfile.WriteAtomic(abs, encodeFile(users))
}
