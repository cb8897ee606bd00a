package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"golang.org/x/term"

	"github.com/straitgw/strait/internal/auth/credstore"
)

// usersStdin is where `strait users add` reads the password: a terminal is prompted without echo, anything
// else gives its first line. Tests replace it.
var usersStdin io.Reader = os.Stdin

// usersCommands are the subcommands of `strait users`.
func usersCommands() []command {
	return []command{
		{"add", "add a user (NAME), or replace their password; the password is prompted for, or read from standard input", runUsersAdd},
		{"remove", "remove a user (NAME)", runUsersRemove},
		{"list", "list users and their SCRAM mechanisms (never keys)", runUsersList},
	}
}

// runUsers manages the users of a credential store file (docs/security.md).
func runUsers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runGroup(ctx, "users", "<command> --store FILE [NAME]", usersCommands(), func(w io.Writer) {
		fmt.Fprintln(w, "\nThe store is the file of the users that SASL PLAIN and SCRAM-SHA-256/512 authenticate: per user a salt,")
		fmt.Fprintln(w, "an iteration count and the keys RFC 5802 derives from the password, never the password. It is created with")
		fmt.Fprintln(w, "mode 0600, and refused if group or others may read or write it. --store FILE names it; $STRAIT_USERS sets")
		fmt.Fprintln(w, "the default. Gateways that use it see changes within a second. Run 'strait users <command> -h' for its")
		fmt.Fprintln(w, "flags. See docs/security.md.")
	}, args, stdout, stderr)
}

// storeFlag registers --store, defaulting to $STRAIT_USERS.
func storeFlag(fs *flag.FlagSet) *string {
	return fs.String("store", os.Getenv("STRAIT_USERS"), "credential store file; $STRAIT_USERS sets the default")
}

// needStore fails with the usage when no store was given.
func needStore(fs *flag.FlagSet, path string) error {
	if path != "" {
		return nil
	}
	fmt.Fprintf(fs.Output(), "%s: --store FILE is required (or set $STRAIT_USERS)\n", fs.Name())
	fs.Usage()
	return errUsage
}

func runUsersAdd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("users add", stdout, stderr)
	fs.Usage = usersUsage(fs, "add --store FILE [--iterations N] NAME",
		"Gives the user NAME credentials for SCRAM-SHA-256 and SCRAM-SHA-512 (and so PLAIN), derived from a password\n"+
			"with PBKDF2 and a fresh salt. On a terminal the password is prompted for twice, without echo; otherwise it\n"+
			"is the first line of standard input: printf '%s\\n' \"$PASSWORD\" | strait users add --store FILE NAME.\n"+
			"Never an argument, which other users can see. Replaces the password of a user who exists. Creates the\n"+
			"store (mode 0600) if it is missing.")
	path := storeFlag(fs)
	iterations := fs.Int("iterations", credstore.DefaultIterations,
		fmt.Sprintf("PBKDF2 iterations, %d to %d: what each client login costs, and an offline guesser per guess", credstore.MinIterations, credstore.MaxIterations))
	name, err := parseWithArg(fs, args, "user name")
	if err != nil {
		return err
	}
	if err := needStore(fs, *path); err != nil {
		return err
	}
	// Refuse what can be refused before asking for a password.
	if err := credstore.ValidName(name); err != nil {
		return err
	}
	if *iterations < credstore.MinIterations || *iterations > credstore.MaxIterations {
		return fmt.Errorf("--iterations %d: want %d to %d (RFC 7677's minimum to Kafka's maximum)", *iterations, credstore.MinIterations, credstore.MaxIterations)
	}
	password, err := readPassword(usersStdin, stderr, name)
	if err != nil {
		return err
	}
	replaced, err := credstore.AddUser(*path, name, password, *iterations)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("%s, %d iterations", strings.Join(credstore.Mechanisms, " and "), *iterations)
	if replaced {
		fmt.Fprintf(stdout, "replaced the password of user %s in %s (%s)\n", name, vaultPath(*path), what)
	} else {
		fmt.Fprintf(stdout, "added user %s to %s (%s)\n", name, vaultPath(*path), what)
	}
	fmt.Fprintln(stdout, "Gateways that use the store see the change within a second, without a restart.")
	return nil
}

func runUsersRemove(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("users remove", stdout, stderr)
	fs.Usage = usersUsage(fs, "remove --store FILE NAME",
		"Removes the user NAME. Gateways that use the store refuse new logins as NAME within a second; connections\n"+
			"already authenticated stay until they re-authenticate or close.")
	path := storeFlag(fs)
	name, err := parseWithArg(fs, args, "user name")
	if err != nil {
		return err
	}
	if err := needStore(fs, *path); err != nil {
		return err
	}
	err = credstore.RemoveUser(*path, name)
	if errors.Is(err, credstore.ErrNoUser) {
		return fmt.Errorf("no user %q in %s: see '%s'", name, vaultPath(*path), usersHint("list", *path, ""))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "removed user %s from %s\n", name, vaultPath(*path))
	return nil
}

func runUsersList(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("users list", stdout, stderr)
	fs.Usage = usersUsage(fs, "list --store FILE [--json]",
		"Lists the users of the store, their SCRAM mechanisms and iteration counts. Never salts or keys.")
	path := storeFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON: [{\"name\", \"mechanisms\": [{\"name\", \"iterations\"}]}]")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := needStore(fs, *path); err != nil {
		return err
	}
	users, err := credstore.ListUsers(*path)
	if err != nil {
		return err
	}
	if *asJSON {
		return printUsersJSON(stdout, users)
	}
	if len(users) == 0 {
		fmt.Fprintf(stderr, "no users in %s; add one with '%s'\n", vaultPath(*path), usersHint("add", *path, "NAME"))
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMECHANISMS\tITERATIONS")
	for _, u := range users {
		var mechs, iters []string
		for _, m := range u.Mechanisms {
			mechs = append(mechs, m.Name)
			iters = append(iters, fmt.Sprint(m.Iterations))
		}
		if len(iters) > 1 && iters[0] == iters[1] {
			iters = iters[:1]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", u.Name, strings.Join(mechs, ","), strings.Join(iters, ","))
	}
	return tw.Flush()
}

func printUsersJSON(w io.Writer, users []credstore.UserInfo) error {
	type mechanism struct {
		Name       string `json:"name"`
		Iterations int    `json:"iterations"`
	}
	type user struct {
		Name       string      `json:"name"`
		Mechanisms []mechanism `json:"mechanisms"`
	}
	out := []user{}
	for _, u := range users {
		j := user{Name: u.Name}
		for _, m := range u.Mechanisms {
			j.Mechanisms = append(j.Mechanisms, mechanism{m.Name, m.Iterations})
		}
		out = append(out, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// maxPasswordLine bounds what is read of standard input for a password: the longest password, a CR LF, and
// one byte more to tell that the line is longer.
const maxPasswordLine = credstore.MaxPasswordLen + 3

// readPassword reads the password of user name: from the terminal without echo, twice, if in is one;
// otherwise the first line of in. Prompts go to prompt.
func readPassword(in io.Reader, prompt io.Writer, name string) (string, error) {
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return promptPassword(int(f.Fd()), prompt, name)
	}
	return firstLine(in)
}

func promptPassword(fd int, w io.Writer, name string) (string, error) {
	ask := func(label string) ([]byte, error) {
		fmt.Fprint(w, label)
		p, err := term.ReadPassword(fd)
		fmt.Fprintln(w) // the newline typed was not echoed
		if err != nil {
			return nil, fmt.Errorf("reading the password from the terminal: %w", err)
		}
		return p, nil
	}
	first, err := ask("Password for " + name + ": ")
	if err != nil {
		return "", err
	}
	if len(first) == 0 {
		return "", errors.New("no password given; nothing was changed")
	}
	again, err := ask("The same again: ")
	if err != nil {
		return "", err
	}
	if !bytes.Equal(first, again) {
		return "", errors.New("the two passwords differ; nothing was changed")
	}
	return string(first), nil
}

// firstLine returns the first line of in, without its line ending (LF or CR LF).
func firstLine(in io.Reader) (string, error) {
	line, err := bufio.NewReaderSize(io.LimitReader(in, maxPasswordLine), maxPasswordLine).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the password from standard input: %w", err)
	}
	if !strings.HasSuffix(line, "\n") && len(line) >= maxPasswordLine {
		return "", fmt.Errorf("the first line of standard input is longer than a password may be (%d bytes)", credstore.MaxPasswordLen)
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return "", errors.New("no password on standard input: give it as the first line " +
			"(printf '%s\\n' \"$PASSWORD\" | strait users add ...), or run the command on a terminal to be prompted")
	}
	return line, nil
}

// usersHint is a `strait users` command for the user to copy, naming the store absolute, so that it acts on
// this store from any directory.
func usersHint(sub, path, name string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	hint := fmt.Sprintf("%s users %s --store %s", selfCommand(), sub, shellQuote(path))
	if name != "" {
		hint += " " + name
	}
	return hint
}

func usersUsage(fs *flag.FlagSet, synopsis, what string) func() {
	return func() {
		fmt.Fprintf(fs.Output(), "Usage: strait users %s\n\n%s\n\nFlags:\n", synopsis, what)
		fs.PrintDefaults()
	}
}
