package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads, expands, decodes, defaults and validates the configuration
// file at path. See Parse for what is returned on error.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data, path)
}

// Parse is Load for a file already read; filename is only used in error
// messages.
//
// Problems are returned together as Errors, ordered by line. If the YAML
// itself is malformed the *Config is nil; otherwise Parse also returns the
// configuration as far as it could be decoded, so a caller may run further
// checks (filter types, say) and report them together with these.
func Parse(data []byte, filename string) (*Config, error) {
	d := &decoder{
		file:     filename,
		lines:    map[string]int{},
		set:      map[string]bool{},
		secret:   map[string]string{},
		bad:      map[string]bool{},
		expanded: map[*yaml.Node]string{},
		budget:   maxNodes,
	}

	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return nil, Errors{yamlSyntaxError(filename, err)}
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == io.EOF:
	case err != nil:
		return nil, Errors{yamlSyntaxError(filename, err)}
	default:
		d.errs.Add(filename, extra.Line, "", "only one YAML document is allowed; remove the \"---\" and what follows it")
	}

	cfg := &Config{File: filename}
	if len(doc.Content) > 0 {
		root := doc.Content[0]
		d.expand(root, "")
		d.decode(root, reflect.ValueOf(cfg).Elem(), "")
	}
	for name, cl := range cfg.Clusters {
		if cl != nil {
			cl.Name = name
		}
	}
	cfg.lines, cfg.set, cfg.secret, cfg.bad = d.lines, d.set, d.secret, d.bad

	cfg.applyDefaults()
	errs := d.errs
	if d.budget >= 0 { // else the configuration is incomplete: checking it says nothing
		errs = append(errs, cfg.validate()...)
	}
	errs.Sort()
	if len(errs) > 0 {
		return cfg, errs
	}
	return cfg, nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func yamlSyntaxError(file string, err error) *FieldError {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return NewFieldError(file, line, "", "invalid YAML: "+m[2])
	}
	return NewFieldError(file, 0, "", "invalid YAML: "+strings.TrimPrefix(msg, "yaml: "))
}

// maxNodes bounds how many nodes decoding visits, so that aliases cannot
// make a small file expand without limit.
const maxNodes = 100000

type decoder struct {
	file     string
	errs     Errors
	lines    map[string]int
	set      map[string]bool
	secret   map[string]string
	bad      map[string]bool
	expanded map[*yaml.Node]string // expanded scalar -> text before expansion
	budget   int
}

func (d *decoder) fail(n *yaml.Node, path, msg string) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs.Add(d.file, line, path, msg)
	d.bad[path] = true
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func joinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// ---- ${env:NAME} and ${file:PATH} expansion ----

// expand replaces references in every string scalar value under n, in place,
// so that line numbers survive. Mapping keys are not expanded. Aliases are
// skipped: the node they point to is expanded where it is defined.
func (d *decoder) expand(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			d.expand(c, path)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			d.expand(c, joinIndex(path, i))
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if isMergeKey(k) {
				d.expand(v, path)
				continue
			}
			d.expand(v, joinKey(path, k.Value))
		}
	case yaml.ScalarNode:
		if n.ShortTag() != "!!str" || !strings.Contains(n.Value, "$") {
			return
		}
		orig := n.Value
		out, refs, errs := expandString(orig)
		for _, msg := range errs {
			d.fail(n, path, msg)
		}
		if len(errs) > 0 || out == orig {
			return
		}
		n.Value = out
		if refs > 0 {
			d.expanded[n] = orig
		}
		// An unquoted, untagged scalar is re-resolved after expansion, so
		// "max_inflight: ${env:N}" gives an integer.
		if n.Style&(yaml.TaggedStyle|yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
			n.Tag = ""
		}
	}
}

const escapeHint = `write "$${" for a literal "${"`

// expandString expands references in s. It returns the result, how many
// references it replaced, and a message for each bad reference. Messages
// never contain the values references expand to.
func expandString(s string) (string, int, []string) {
	var b strings.Builder
	var errs []string
	refs := 0
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			b.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			b.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			errs = append(errs, fmt.Sprintf(`"${" is not closed: write ${env:NAME} or ${file:PATH}, or %s`, escapeHint))
			break
		}
		ref := s[i+2 : i+2+end]
		i += 2 + end + 1
		kind, arg, _ := strings.Cut(ref, ":")
		switch kind {
		case "env":
			if arg == "" {
				errs = append(errs, `"${env:}" names no variable: write ${env:NAME}`)
				continue
			}
			// ${env:NAME:-default} gives default when NAME is unset or
			// empty, as in the shell.
			arg, def, hasDef := strings.Cut(arg, ":-")
			v, ok := os.LookupEnv(arg)
			if hasDef && v == "" {
				v, ok = def, true
			}
			if !ok {
				errs = append(errs, fmt.Sprintf("environment variable %s is not set (referenced as ${env:%s}): set it, or %s", arg, arg, escapeHint))
				continue
			}
			b.WriteString(v)
			refs++
		case "file":
			if arg == "" {
				errs = append(errs, `"${file:}" names no file: write ${file:PATH}`)
				continue
			}
			data, err := os.ReadFile(arg)
			if err != nil {
				errs = append(errs, fmt.Sprintf("cannot read %s (referenced as ${file:%s}): %s; check the path and its permissions", arg, arg, fileErrReason(err)))
				continue
			}
			v := string(data)
			if strings.HasSuffix(v, "\n") {
				v = strings.TrimSuffix(strings.TrimSuffix(v, "\n"), "\r")
			}
			b.WriteString(v)
			refs++
		default:
			errs = append(errs, fmt.Sprintf("%q is not a known reference: write ${env:NAME} or ${file:PATH}, or %s", "${"+ref+"}", escapeHint))
		}
	}
	return b.String(), refs, errs
}

// fileErrReason is the reason a file operation failed, without the path,
// which the caller shows (or hides) itself.
func fileErrReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// ---- strict decoding ----

var (
	nodeType     = reflect.TypeFor[yaml.Node]()
	durationType = reflect.TypeFor[Duration]()
)

// show quotes a scalar for an error message, unless it came from a
// reference: then the reference is shown and the value is not.
func (d *decoder) show(n *yaml.Node) string {
	if orig, ok := d.expanded[n]; ok {
		return fmt.Sprintf("value from %q", orig)
	}
	return strconv.Quote(n.Value)
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == "!!merge"
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	}
	return "empty"
}

// decode stores n into v, recording lines and reporting every problem
// instead of stopping at the first.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	d.budget--
	if d.budget < 0 {
		if d.budget == -1 {
			d.fail(n, path, "the document is too large or uses too many aliases")
		}
		return
	}
	n = resolveAlias(n)
	if orig, ok := d.expanded[n]; ok {
		d.secret[path] = orig
	}
	t := v.Type()
	if t == nodeType {
		v.Set(reflect.ValueOf(*n))
		return
	}
	if isNull(n) {
		return
	}
	if t == byteSizeType {
		d.decodeByteSize(n, v, path)
		return
	}
	if t == durationType {
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, fmt.Sprintf("must be a duration such as \"30s\", not %s", kindName(n)))
			return
		}
		dur, err := parseDuration(n.Value)
		if err != nil {
			d.fail(n, path, d.show(n)+" "+err.Error())
			return
		}
		v.Set(reflect.ValueOf(Duration{dur}))
		return
	}

	switch t.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.Slice:
		d.decodeSlice(n, v, path)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, fmt.Sprintf("must be a single value, not %s", kindName(n)))
			return
		}
		v.SetString(n.Value)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var i int64
		if n.Kind != yaml.ScalarNode || d.plain(n).Decode(&i) != nil {
			what := kindName(n)
			if n.Kind == yaml.ScalarNode {
				what = d.show(n)
			}
			d.fail(n, path, fmt.Sprintf("must be a whole number, not %s", what))
			return
		}
		if v.OverflowInt(i) {
			d.fail(n, path, fmt.Sprintf("%s is too large", d.show(n)))
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		var f float64
		if n.Kind != yaml.ScalarNode || d.plain(n).Decode(&f) != nil {
			what := kindName(n)
			if n.Kind == yaml.ScalarNode {
				what = d.show(n)
			}
			d.fail(n, path, fmt.Sprintf("must be a number, not %s", what))
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || d.plain(n).Decode(&b) != nil {
			what := kindName(n)
			if n.Kind == yaml.ScalarNode {
				what = d.show(n)
			}
			d.fail(n, path, fmt.Sprintf("must be true or false, not %s", what))
			return
		}
		v.SetBool(b)
	default:
		panic("config: cannot decode into " + t.String())
	}
}

// plain returns n, or for a scalar produced by expansion a copy that is
// resolved as if written unquoted, so that "${env:N}" may give a number.
func (d *decoder) plain(n *yaml.Node) *yaml.Node {
	if _, ok := d.expanded[n]; !ok {
		return n
	}
	c := *n
	c.Tag, c.Style = "", 0
	return &c
}

type pair struct{ k, v *yaml.Node }

// pairs returns the key/value pairs of mapping n with merge keys (<<)
// applied, reporting duplicate and non-scalar keys.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	var own, merged []pair
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if isMergeKey(k) {
			merged = append(merged, d.mergeSource(v, path)...)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, fmt.Sprintf("keys must be plain names, not %s", kindName(k)))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.fail(k, joinKey(path, k.Value), fmt.Sprintf("duplicate key %q (first given on line %d); remove one of them", k.Value, first.Line))
			continue
		}
		seen[k.Value] = k
		own = append(own, pair{k, v})
	}
	for _, p := range merged {
		if _, ok := seen[p.k.Value]; !ok {
			seen[p.k.Value] = p.k
			own = append(own, p)
		}
	}
	return own
}

func (d *decoder) mergeSource(v *yaml.Node, path string) []pair {
	v = resolveAlias(v)
	switch v.Kind {
	case yaml.MappingNode:
		return d.pairs(v, path)
	case yaml.SequenceNode:
		var out []pair
		for _, c := range v.Content {
			c = resolveAlias(c)
			if c.Kind != yaml.MappingNode {
				d.fail(c, path, "a merge key (<<) must name mappings")
				continue
			}
			out = append(out, d.pairs(c, path)...)
		}
		return out
	}
	d.fail(v, path, "a merge key (<<) must name a mapping")
	return nil
}

func (d *decoder) note(k, v *yaml.Node, path string) {
	d.lines[path] = k.Line
	if !isNull(resolveAlias(v)) {
		d.set[path] = true
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, fmt.Sprintf("must be a mapping of keys to values, not %s", kindName(n)))
		return
	}
	var names []string
	index := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		names = append(names, name)
		index[name] = i
	}
	for _, p := range d.pairs(n, path) {
		fp := joinKey(path, p.k.Value)
		i, ok := index[p.k.Value]
		if !ok {
			d.lines[fp] = p.k.Line
			d.fail(p.k, fp, unknownKeyMsg(p.k.Value, names))
			continue
		}
		d.note(p.k, p.v, fp)
		d.decode(p.v, v.Field(i), fp)
	}
	if f, ok := v.Addr().Interface().(*Filter); ok {
		f.Line, f.Path = n.Line, path
	}
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, fmt.Sprintf("must be a mapping of names to settings, not %s", kindName(n)))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(t))
	}
	for _, p := range d.pairs(n, path) {
		fp := joinKey(path, p.k.Value)
		d.note(p.k, p.v, fp)
		elem := newElem(t.Elem())
		d.decode(p.v, elem, fp)
		v.SetMapIndex(reflect.ValueOf(p.k.Value).Convert(t.Key()), elem)
	}
}

func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, fmt.Sprintf("must be a list (one \"- item\" per line, or [a, b]), not %s", kindName(n)))
		return
	}
	s := reflect.MakeSlice(t, 0, len(n.Content))
	for i, c := range n.Content {
		ip := joinIndex(path, i)
		d.lines[ip] = c.Line
		d.set[ip] = true
		elem := newElem(t.Elem())
		d.decode(c, elem, ip)
		s = reflect.Append(s, elem)
	}
	v.Set(s)
}

// newElem returns a settable zero value of t; for a pointer type, a pointer
// to a zero value, so that an empty entry is never nil.
func newElem(t reflect.Type) reflect.Value {
	e := reflect.New(t).Elem()
	if t.Kind() == reflect.Pointer {
		e.Set(reflect.New(t.Elem()))
	}
	return e
}

func unknownKeyMsg(key string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if dist := editDistance(strings.ToLower(key), k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	msg := fmt.Sprintf("unknown key %q", key)
	if best != "" {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	return msg + " (known keys: " + strings.Join(known, ", ") + ")"
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
