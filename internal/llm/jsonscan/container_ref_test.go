package jsonscan

import (
	"bytes"
	"strings"
	"testing"
)

// containerRecursive is the recursive form container replaced, kept as
// the reference the fuzz test holds it to.
func (s *scanner) containerRecursive(depth int) error {
	if depth > MaxDepth {
		return s.errf("nested deeper than %d levels", MaxDepth)
	}
	obj := s.b[s.i] == '{'
	closer := byte(']')
	if obj {
		closer = '}'
	}
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == closer {
		s.i++
		return nil
	}
	for {
		s.space()
		if obj {
			if s.i >= len(s.b) || s.b[s.i] != '"' {
				return s.errf("expected a member name in quotes, found %s", s.what())
			}
			if err := s.str(); err != nil {
				return err
			}
			s.space()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return s.errf("expected ':' after a member name, found %s", s.what())
			}
			s.i++
			s.space()
		}
		if err := s.valueRecursive(depth); err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.b) {
			return s.errf("expected ',' or %q, found the end of the body", closer)
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case closer:
			s.i++
			return nil
		default:
			return s.errf("expected ',' or %q, found %s", closer, s.what())
		}
	}
}

// str skips a string starting at its opening quote.

// valueRecursive is value as it was, calling containerRecursive.
func (s *scanner) valueRecursive(depth int) error {
	if s.i < len(s.b) && (s.b[s.i] == '{' || s.b[s.i] == '[') {
		return s.containerRecursive(depth + 1)
	}
	return s.value(depth)
}

// FuzzContainerMatchesRecursive holds the iterative container to the
// recursive one it replaced: the same error at the same offset, or the
// same end.
func FuzzContainerMatchesRecursive(f *testing.F) {
	for _, s := range []string{
		reference, `[]`, `{}`, `[[],{}]`, `{"a":[1,{"b":null}],"c":{"d":[[],[{}]]}}`, `[1,2`, `{"a" 1}`, `{"a":1,}`,
		`[{"a":[}]`, `{"a":{"b":{"c":"\u0041"}}}`, strings.Repeat("[", 70) + strings.Repeat("]", 70),
		strings.Repeat(`{"a":[`, 40) + "1" + strings.Repeat("]}", 40), strings.Repeat("[", 200) + "1" + strings.Repeat("]", 199),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		body = bytes.TrimLeft(body, " \t\r\n")
		if len(body) == 0 || (body[0] != '{' && body[0] != '[') {
			return
		}
		it, rec := scanner{b: body}, scanner{b: body}
		errIt, errRec := it.container(1), rec.containerRecursive(1)
		if (errIt == nil) != (errRec == nil) || (errIt != nil && errIt.Error() != errRec.Error()) || (errIt == nil && it.i != rec.i) {
			t.Fatalf("%q: iterative %v at %d, recursive %v at %d", body, errIt, it.i, errRec, rec.i)
		}
	})
}

func TestBitStack(t *testing.T) {
	var b bitStack
	var want []bool
	for i := range 300 {
		v := i%3 == 0 || i%7 == 0
		b.push(v)
		want = append(want, v)
		if b.top() != v {
			t.Fatalf("push %d: top %v", i, b.top())
		}
	}
	for i := len(want) - 1; i >= 0; i-- {
		if b.top() != want[i] {
			t.Fatalf("level %d: top %v, want %v", i, b.top(), want[i])
		}
		b.pop()
	}
	if b.top() {
		t.Fatal("an empty stack's top is true")
	}
}

// TestDeepNestingNeedsNoStack: skipping a container 10,000 deep (the
// limit) is done without recursion.
func TestDeepNestingNeedsNoStack(t *testing.T) {
	body := []byte(`{"a":` + strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1) + `}`)
	if err := Members(body, func(k, v []byte) bool { return true }); err != nil {
		t.Fatal(err)
	}
	deeper := []byte(`{"a":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`)
	if err := Members(deeper, func(k, v []byte) bool { return true }); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("past the limit: %v", err)
	}
}
