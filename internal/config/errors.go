package config

import (
	"sort"
	"strconv"
	"strings"
)

// FieldError is one problem in a configuration file.
type FieldError struct {
	// File is the configuration file name; may be empty.
	File string
	// Line is the 1-based line of the offending key or list item; 0 when
	// unknown.
	Line int
	// Path is the field path, e.g. virtual_clusters[0].listen; empty for
	// problems with the file as a whole.
	Path string
	// Msg says what is wrong and how to fix it.
	Msg string
}

// NewFieldError returns a FieldError; callers outside this package (the
// filter registry, say) use it to report problems in the same format.
func NewFieldError(file string, line int, path, msg string) *FieldError {
	return &FieldError{File: file, Line: line, Path: path, Msg: msg}
}

// Error formats the problem as "file:line: path: msg", leaving out the parts
// that are unknown.
func (e *FieldError) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		b.WriteString(e.File + ":" + strconv.Itoa(e.Line) + ": ")
	case e.File != "":
		b.WriteString(e.File + ": ")
	case e.Line > 0:
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a configuration, in file order. Load,
// Parse and Validate return it (as error) when there is at least one.
type Errors []*FieldError

// Error prints one problem per line.
func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, fe := range e {
		lines[i] = fe.Error()
	}
	return strings.Join(lines, "\n")
}

// Add appends a problem.
func (e *Errors) Add(file string, line int, path, msg string) {
	*e = append(*e, NewFieldError(file, line, path, msg))
}

// Append appends problems; nil entries are skipped.
func (e *Errors) Append(errs ...*FieldError) {
	for _, fe := range errs {
		if fe != nil {
			*e = append(*e, fe)
		}
	}
}

// Err returns e as an error, or nil when it is empty. Use it instead of
// returning an empty Errors, which would be a non-nil error.
func (e Errors) Err() error {
	if len(e) == 0 {
		return nil
	}
	return e
}

// Sort orders the problems by line, keeping the order of problems on the
// same line; problems without a line come first.
func (e Errors) Sort() {
	sort.SliceStable(e, func(i, j int) bool { return e[i].Line < e[j].Line })
}
