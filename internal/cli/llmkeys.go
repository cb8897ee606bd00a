package cli

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/straitgw/strait/internal/config"
	"github.com/straitgw/strait/internal/secretfile"
)

// llmKeysCommands are the subcommands of `strait llm-keys`.
func llmKeysCommands() []command {
	return []command{
		{"add", "make a new gateway key (NAME) with optional limits; the key is printed once", runLLMKeysAdd},
		{"remove", "remove a gateway key (NAME)", runLLMKeysRemove},
		{"list", "list the keys' names, limits and models (never keys or hashes)", runLLMKeysList},
	}
}

// runLLMKeys manages an LLM gateway api_keys_file (docs/llm.md).
func runLLMKeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runGroup(ctx, "llm-keys", "<command> --file FILE [NAME]", llmKeysCommands(), func(w io.Writer) {
		fmt.Fprintln(w, "\nThe file is an llm.api_keys_file: one key per line, its name, the SHA-256 of the key and its limits,")
		fmt.Fprintln(w, "never the key itself. It is written with mode 0600. --file FILE names it; $STRAIT_LLM_KEYS sets the")
		fmt.Fprintln(w, "default. The gateway reads it when it starts. See docs/llm.md.")
	}, args, stdout, stderr)
}

func llmKeysFileFlag(fs *flag.FlagSet) *string {
	return fs.String("file", os.Getenv("STRAIT_LLM_KEYS"), "the api_keys_file; $STRAIT_LLM_KEYS sets the default")
}

func llmKeysUsage(fs *flag.FlagSet, synopsis, what string) func() {
	return func() {
		fmt.Fprintf(fs.Output(), "Usage: strait llm-keys %s\n\n%s\n\nFlags:\n", synopsis, what)
		fs.PrintDefaults()
	}
}

func needKeysFile(fs *flag.FlagSet, path string) error {
	if path != "" {
		return nil
	}
	fmt.Fprintf(fs.Output(), "%s: --file FILE is required (or set $STRAIT_LLM_KEYS)\n", fs.Name())
	fs.Usage()
	return errUsage
}

// keyLine is one line of an api_keys_file: comments and blank lines are
// kept as they are (name empty).
type keyLine struct {
	name, text string
}

// readKeyLines reads the file; a missing file is empty.
func readKeyLines(path string) ([]keyLine, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []keyLine
	for l := range strings.Lines(string(data)) {
		l = strings.TrimRight(l, "\r\n")
		t := strings.TrimSpace(l)
		kl := keyLine{text: l}
		if t != "" && !strings.HasPrefix(t, "#") {
			kl.name = strings.Fields(t)[0]
		}
		out = append(out, kl)
	}
	return out, nil
}

func writeKeyLines(path string, lines []keyLine) error {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.text)
		b.WriteByte('\n')
	}
	return secretfile.WriteAtomic(path, []byte(b.String()))
}

// lockKeysFile guards the file against two commands changing it at once;
// the lock is on a file beside it, which is never replaced.
func lockKeysFile(path string) (func(), error) {
	unlock, err := secretfile.Lock(path+".lock", true, 50, 100*time.Millisecond)
	if err != nil {
		return nil, fmt.Errorf("cannot lock %s.lock: %w", path, err)
	}
	return unlock, nil
}

func runLLMKeysAdd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("llm-keys add", stdout, stderr)
	fs.Usage = llmKeysUsage(fs, "add --file FILE [--rpm N] [--tpm N] [--budget DOLLARS/PERIOD] [--models GLOB,...] [--routes NAME,...] NAME",
		"Makes a new random gateway key named NAME (letters, digits, '.', '_', '-') and adds its SHA-256 and limits\n"+
			"to the file, creating it (mode 0600) if it is missing. The key is printed on standard output, once: it is\n"+
			"not kept anywhere, so give it to the client now. KEY=$(strait llm-keys add --file FILE NAME) keeps it.")
	path := llmKeysFileFlag(fs)
	rpm := fs.Int64("rpm", 0, "requests per minute (0: no limit)")
	tpm := fs.Int64("tpm", 0, "tokens per minute, input and output (0: no limit)")
	budget := fs.String("budget", "", "spend per period, DOLLARS/PERIOD with period hour, day or month (e.g. 25/day); needs llm.prices")
	models := fs.String("models", "", "comma-separated model globs the key may use (default: any)")
	routes := fs.String("routes", "", "comma-separated route names the key may use (default: any)")
	name, err := parseWithArg(fs, args, "key name")
	if err != nil {
		return err
	}
	if err := needKeysFile(fs, *path); err != nil {
		return err
	}
	if !validKeyName(name) {
		return fmt.Errorf("%q is not a valid key name: use only letters, digits, '_', '.' and '-'", name)
	}
	var attrs []string
	if *rpm != 0 {
		attrs = append(attrs, "rpm="+strconv.FormatInt(*rpm, 10))
	}
	if *tpm != 0 {
		attrs = append(attrs, "tpm="+strconv.FormatInt(*tpm, 10))
	}
	if *budget != "" {
		attrs = append(attrs, "budget="+*budget)
	}
	if *models != "" {
		attrs = append(attrs, "models="+*models)
	}
	if *routes != "" {
		attrs = append(attrs, "routes="+*routes)
	}
	if _, err := config.ParseKeyAttributes(attrs); err != nil {
		return fmt.Errorf("--%s", strings.Replace(err.Error(), "=", " ", 1))
	}
	unlock, err := lockKeysFile(*path)
	if err != nil {
		return err
	}
	defer unlock()
	lines, err := readKeyLines(*path)
	if err != nil {
		return err
	}
	for _, l := range lines {
		if l.name == name {
			return fmt.Errorf("%s already has a key named %s: remove it first ('strait llm-keys remove --file %s %s'), or pick another name", *path, name, *path, name)
		}
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	key := "sk-strait-" + base64.RawURLEncoding.EncodeToString(raw[:])
	sum := sha256.Sum256([]byte(key))
	text := strings.Join(append([]string{name, hex.EncodeToString(sum[:])}, attrs...), " ")
	lines = append(lines, keyLine{name: name, text: text})
	if err := writeKeyLines(*path, lines); err != nil {
		return err
	}
	fmt.Fprintln(stdout, key)
	fmt.Fprintf(stderr, "added key %s to %s; the key above is shown this once. Gateways read the file when they start.\n", name, *path)
	return nil
}

func validKeyName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func runLLMKeysRemove(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("llm-keys remove", stdout, stderr)
	fs.Usage = llmKeysUsage(fs, "remove --file FILE NAME", "Removes the key NAME from the file. Gateways refuse it once they restart.")
	path := llmKeysFileFlag(fs)
	name, err := parseWithArg(fs, args, "key name")
	if err != nil {
		return err
	}
	if err := needKeysFile(fs, *path); err != nil {
		return err
	}
	unlock, err := lockKeysFile(*path)
	if err != nil {
		return err
	}
	defer unlock()
	lines, err := readKeyLines(*path)
	if err != nil {
		return err
	}
	kept := lines[:0]
	found := false
	for _, l := range lines {
		if l.name == name {
			found = true
			continue
		}
		kept = append(kept, l)
	}
	if !found {
		return fmt.Errorf("no key %q in %s: see 'strait llm-keys list --file %s'", name, *path, *path)
	}
	if err := writeKeyLines(*path, kept); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "removed key %s from %s\n", name, *path)
	return nil
}

func runLLMKeysList(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("llm-keys list", stdout, stderr)
	fs.Usage = llmKeysUsage(fs, "list --file FILE [--json]", "Lists the keys' names, limits, models and routes. Never keys or hashes.")
	path := llmKeysFileFlag(fs)
	asJSON := fs.Bool("json", false, `print JSON: [{"name", "rpm", "tpm", "budget_dollars", "period", "models", "routes"}]`)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := needKeysFile(fs, *path); err != nil {
		return err
	}
	lines, err := readKeyLines(*path)
	if err != nil {
		return err
	}
	type view struct {
		Name    string   `json:"name"`
		RPM     int64    `json:"rpm,omitempty"`
		TPM     int64    `json:"tpm,omitempty"`
		Dollars float64  `json:"budget_dollars,omitempty"`
		Period  string   `json:"period,omitempty"`
		Models  []string `json:"models,omitempty"`
		Routes  []string `json:"routes,omitempty"`
	}
	out := []view{}
	for i, l := range lines {
		if l.name == "" {
			continue
		}
		f := strings.Fields(l.text)
		k, err := config.ParseKeyAttributes(f[min(2, len(f)):])
		if err != nil {
			return fmt.Errorf("%s:%d: %w", *path, i+1, err)
		}
		v := view{Name: l.name, RPM: k.Limits.RPM, TPM: k.Limits.TPM, Models: k.Models, Routes: k.Routes}
		if b := k.Limits.Budget; b != nil {
			v.Dollars, v.Period = b.Dollars, b.Period
		}
		out = append(out, v)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if len(out) == 0 {
		fmt.Fprintf(stderr, "no keys in %s; add one with 'strait llm-keys add --file %s NAME'\n", *path, *path)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRPM\tTPM\tBUDGET\tMODELS\tROUTES")
	dash := func(n int64) string {
		if n == 0 {
			return "-"
		}
		return strconv.FormatInt(n, 10)
	}
	for _, v := range out {
		budget := "-"
		if v.Period != "" {
			budget = "$" + strconv.FormatFloat(v.Dollars, 'f', -1, 64) + "/" + v.Period
		}
		models, routes := strings.Join(v.Models, ","), strings.Join(v.Routes, ",")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.Name, dash(v.RPM), dash(v.TPM), budget, cmpOr(models, "any"), cmpOr(routes, "any"))
	}
	return tw.Flush()
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
