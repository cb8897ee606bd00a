package gateway

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// RedactedMark replaces a provider secret, or a recognisable piece of one,
// wherever the gateway finds it in what it sends a client or writes to its
// log.
const RedactedMark = "[REDACTED]"

// minPartial is the shortest piece of a secret masked on its own: a
// provider that shows the first and last characters of the key it was sent
// (OpenAI's "sk-proj-****…abcd") gives away a prefix, and a body cut short
// gives one too. It is also the shortest key looked for at all: local
// servers take any key, and a placeholder such as "ollama", "none" or
// "EMPTY" (often the provider's own name) would otherwise be masked in
// every message and log line that has the word, protecting nothing a guess
// could not find.
const minPartial = 8

// minContentSecret is the shortest secret looked for in successful answers
// (model output), so that a placeholder key such as "lm-studio" does not
// mask a model's words. Real provider keys are far longer; errors and logs
// are scrubbed of every key.
const minContentSecret = 16

// maxDecodeRounds bounds how many layers of escaping (a JSON string inside
// a JSON string, a URL-encoded JSON escape…) are undone when looking for a
// secret.
const maxDecodeRounds = 3

// redactor removes the provider secrets the gateway holds from text it
// passes on. It has two strengths:
//
//   - scrubError, for provider error bodies and error events, the gateway's
//     own error answers, response headers it relays, and log lines: the
//     secret, and any prefix or suffix of it at least minPartial bytes long
//     that looks like key material (see keyish), also when written with
//     JSON escapes (\/, \u0073, double-escaped) or URL-encoded (%2F,
//     %252F).
//   - scrubContent, for successful answers and ordinary stream events: a
//     secret of at least minContentSecret bytes or such a suffix of it, as
//     written. Prefixes are left alone
//     there because a key's first characters are public ("sk-proj-") and an
//     answer may well mention them.
//
// Every search looks first for an 8-byte anchor (a secret's first or last
// bytes) by its rarest byte, so text without a key costs a few memchr
// scans. A nil *redactor (no provider has a key) changes nothing.
type redactor struct {
	secrets []secret
	// quoted: a secret holds a quote, so \" and \' may hide part of it.
	quoted bool
	// flag marks the bytes a short text is checked for at once: each
	// anchor's rarest byte, and the first bytes of escapes.
	flag [256]bool
}

// shortText is the length up to which mayHold checks each byte against
// flag, one pass, rather than searching for each anchor: log attributes
// are short, and many.
const shortText = 64

type secret struct {
	s          []byte
	head, tail anchor // the first and last minPartial bytes
}

// anchor is a short needle and the offset of its rarest byte, which is what
// a search looks for first.
type anchor struct {
	b []byte
	k int
}

func newAnchor(b []byte) anchor {
	a := anchor{b: b}
	for i := range b {
		if rarity(b[i]) < rarity(b[a.k]) {
			a.k = i
		}
	}
	return a
}

// commonBytes are the bytes most frequent in the JSON of chat APIs and in
// prose, the most frequent first; rarity ranks a byte by its place there,
// any other byte (capitals, most symbols) being rarer than all of them.
const commonBytes = "\" :,{}\n\r\teatoinsrlcdhupmgfy-_.kbw0v12x/j3q45z6789"

func rarity(c byte) int {
	if i := strings.IndexByte(commonBytes, c); i >= 0 {
		return len(commonBytes) - i
	}
	return 0
}

// index returns the first offset of a in t, or -1.
func (a *anchor) index(t []byte) int {
	n, c := len(a.b), a.b[a.k]
	for i := a.k; i <= len(t)-n+a.k; {
		j := bytes.IndexByte(t[i:len(t)-n+a.k+1], c)
		if j < 0 {
			return -1
		}
		i += j
		if bytes.Equal(t[i-a.k:i-a.k+n], a.b) {
			return i - a.k
		}
		i++
	}
	return -1
}

// newRedactor returns a redactor for keys, nil if there is none.
func newRedactor(keys []string) *redactor {
	r := &redactor{}
	seen := map[string]bool{}
	add := func(k string) {
		if len(k) < minPartial || seen[k] {
			return
		}
		seen[k] = true
		s := []byte(k)
		n := minPartial
		r.secrets = append(r.secrets, secret{s: s, head: newAnchor(s[:n]), tail: newAnchor(s[len(s)-n:])})
		r.quoted = r.quoted || strings.ContainsAny(k, `"'`)
		last := &r.secrets[len(r.secrets)-1]
		r.flag[last.head.b[last.head.k]] = true
		r.flag[last.tail.b[last.tail.k]] = true
	}
	r.flag['\\'], r.flag['%'] = true, true
	for _, k := range keys {
		add(k)
		// A header value is sent without surrounding blanks, so a provider
		// can only echo the trimmed key.
		add(strings.TrimSpace(k))
	}
	if len(r.secrets) == 0 {
		return nil
	}
	return r
}

// keyish reports whether a piece of a key looks like key material rather
// than a word: it has a digit or a capital letter. A random key's pieces
// almost always do, while the public prefix "sk-proj-" and the word at the
// end of a placeholder such as "sk-no-key-required" do not, so those are
// not masked in every message that happens to contain them.
func keyish(p []byte) bool {
	for _, c := range p {
		if '0' <= c && c <= '9' || 'A' <= c && c <= 'Z' {
			return true
		}
	}
	return false
}

// span is a half-open byte range.
type span struct{ start, end int }

// scrubError masks every secret in b, whole or in part, plain or escaped.
// It returns b itself when there is nothing to mask.
func (r *redactor) scrubError(b []byte) []byte {
	out, _ := r.scrubErrorOK(b)
	return out
}

// scrubErrorOK is scrubError, also reporting whether anything was masked.
func (r *redactor) scrubErrorOK(b []byte) ([]byte, bool) {
	if r == nil || !r.mayHold(b) {
		return b, false
	}
	// The text as it reads with one, two… layers of escaping undone, each
	// byte mapped back to the bytes of b it came from.
	v := view{text: b}
	spans := r.find(v, nil)
	for range maxDecodeRounds {
		next, ok := v.decode()
		if !ok {
			break
		}
		v = next
		spans = r.find(v, spans)
	}
	return mask(b, spans), len(spans) > 0
}

// mayHold is scrubError's cheap test: a secret's head or tail as written,
// or an escape that could hide one.
func (r *redactor) mayHold(b []byte) bool {
	if len(b) <= shortText {
		// Every anchor holds its rarest byte and every escape starts with
		// a flagged byte, so text without one holds neither.
		flagged := false
		for _, c := range b {
			if r.flag[c] {
				flagged = true
				break
			}
		}
		if !flagged {
			return false
		}
	}
	if r.escaped(b) {
		return true
	}
	for i := range r.secrets {
		s := &r.secrets[i]
		if s.head.index(b) >= 0 || s.tail.index(b) >= 0 {
			return true
		}
	}
	return false
}

// escaped reports whether b has an escape that could stand for a byte of
// a key: \u, \x, \/ (and \" or \' if a key has quotes) or %XX. The
// escapes of ordinary text, \n and \", do not count, so that an answer
// full of them costs no decoding.
func (r *redactor) escaped(b []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 || i+j+1 >= len(b) {
			break
		}
		i += j + 1
		switch b[i] {
		case 'u', 'x', '/':
			return true
		case '"', '\'':
			if r.quoted {
				return true
			}
		}
	}
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '%')
		if j < 0 || i+j+2 >= len(b) {
			return false
		}
		i += j + 1
		if isHex(b[i]) && isHex(b[i+1]) {
			return true
		}
	}
}

// scrubContent masks the secrets of at least minContentSecret bytes, and
// their keyish suffixes, written out as they are in b. It returns b itself
// when there is nothing to mask.
func (r *redactor) scrubContent(b []byte) []byte {
	if r == nil {
		return b
	}
	var spans []span
	for i := range r.secrets {
		s := &r.secrets[i]
		if len(s.s) < minContentSecret {
			continue
		}
		for off := 0; ; {
			j := s.tail.index(b[off:])
			if j < 0 {
				break
			}
			end := off + j + minPartial
			if n := matchBack(b[:end], s.s); n == len(s.s) || keyish(s.s[len(s.s)-n:]) {
				spans = append(spans, span{end - n, end})
			}
			off = end
		}
	}
	return mask(b, spans)
}

// scrubString is scrubError for strings; it allocates only when a string
// may hold a secret.
func (r *redactor) scrubString(s string) (string, bool) {
	if r == nil || len(s) == 0 {
		return s, false
	}
	// mayHold only reads, so it may look at the string's bytes in place.
	if !r.mayHold(unsafe.Slice(unsafe.StringData(s), len(s))) {
		return s, false
	}
	out, ok := r.scrubErrorOK([]byte(s))
	if !ok {
		return s, false
	}
	return string(out), true
}

// scrubEvent scrubs one event of a stream as the client will get it. An
// event that might hold a key (mayHold) is scrubbed as an error
// (scrubError) if it mentions an error at all, as every error event and
// error chunk of both dialects does, else as content; any other event, the
// common case, costs only mayHold's scans.
func (r *redactor) scrubEvent(b []byte) []byte {
	if !r.mayHold(b) {
		return b
	}
	if bytes.Contains(b, []byte("error")) {
		return r.scrubError(b)
	}
	return r.scrubContent(b)
}

// find adds to spans (offsets into the original text) every secret, and
// every keyish prefix or suffix of one at least minPartial bytes long, in
// v.
func (r *redactor) find(v view, spans []span) []span {
	t := v.text
	for i := range r.secrets {
		s := &r.secrets[i]
		// Anything masked contains the secret's head (a prefix) or its
		// tail (a suffix); the whole secret contains both.
		for off := 0; ; {
			j := s.head.index(t[off:])
			if j < 0 {
				break
			}
			start := off + j
			if n := matchFwd(t[start:], s.s); n == len(s.s) || keyish(s.s[:n]) {
				spans = append(spans, v.orig(start, start+n))
			}
			off = start + 1
		}
		for off := 0; ; {
			j := s.tail.index(t[off:])
			if j < 0 {
				break
			}
			end := off + j + minPartial
			if n := matchBack(t[:end], s.s); n == len(s.s) || keyish(s.s[len(s.s)-n:]) {
				spans = append(spans, v.orig(end-n, end))
			}
			off = off + j + 1
		}
	}
	return spans
}

// matchFwd is how many leading bytes of s t starts with.
func matchFwd(t, s []byte) int {
	n := 0
	for n < len(t) && n < len(s) && t[n] == s[n] {
		n++
	}
	return n
}

// matchBack is how many trailing bytes of s t ends with.
func matchBack(t, s []byte) int {
	n := 0
	for n < len(t) && n < len(s) && t[len(t)-1-n] == s[len(s)-1-n] {
		n++
	}
	return n
}

// mask replaces spans of b with RedactedMark, merging those that overlap or
// touch. It returns b itself when spans is empty.
func mask(b []byte, spans []span) []byte {
	if len(spans) == 0 {
		return b
	}
	// Few spans: an insertion sort keeps this allocation-free.
	for i := 1; i < len(spans); i++ {
		for j := i; j > 0 && spans[j].start < spans[j-1].start; j-- {
			spans[j], spans[j-1] = spans[j-1], spans[j]
		}
	}
	out := make([]byte, 0, len(b)+len(spans)*len(RedactedMark))
	pos := 0
	for i := 0; i < len(spans); {
		start, end := spans[i].start, spans[i].end
		for i++; i < len(spans) && spans[i].start <= end; i++ {
			end = max(end, spans[i].end)
		}
		if start < pos {
			start = pos
		}
		out = append(out, b[pos:start]...)
		out = append(out, RedactedMark...)
		pos = end
	}
	return append(out, b[pos:]...)
}

// view is a text with escaping undone, each byte mapped back to the span
// of the original text it was decoded from. The zero map is the identity.
type view struct {
	text       []byte
	start, end []int32 // original span of text[i]; nil: the identity
}

// orig maps the view's bytes [i, j) back to the original text.
func (v view) orig(i, j int) span {
	if v.start == nil {
		return span{i, j}
	}
	return span{int(v.start[i]), int(v.end[j-1])}
}

// decode undoes one layer of escaping: JSON and C-style backslash escapes
// (\/ \" \\ \n \uXXXX \xXX) and URL percent-encoding (%XX). It reports false
// when there was nothing to undo.
func (v view) decode() (view, bool) {
	t := v.text
	if bytes.IndexByte(t, '\\') < 0 && bytes.IndexByte(t, '%') < 0 {
		return v, false
	}
	out := view{text: make([]byte, 0, len(t)), start: make([]int32, 0, len(t)), end: make([]int32, 0, len(t))}
	emit := func(c byte, i, j int) {
		s, e := int32(i), int32(j)
		if v.start != nil {
			s, e = v.start[i], v.end[j-1]
		}
		out.text = append(out.text, c)
		out.start = append(out.start, s)
		out.end = append(out.end, e)
	}
	changed := false
	for i := 0; i < len(t); {
		c := t[i]
		n, decoded := 1, []byte(nil)
		switch {
		case c == '%' && i+2 < len(t) && isHex(t[i+1]) && isHex(t[i+2]):
			n, decoded = 3, []byte{unhex(t[i+1])<<4 | unhex(t[i+2])}
		case c == '\\' && i+1 < len(t):
			switch e := t[i+1]; e {
			case '/', '\\', '"', '\'':
				n, decoded = 2, []byte{e}
			case 'n':
				n, decoded = 2, []byte{'\n'}
			case 't':
				n, decoded = 2, []byte{'\t'}
			case 'r':
				n, decoded = 2, []byte{'\r'}
			case 'u':
				if i+6 <= len(t) && allHex(t[i+2:i+6]) {
					r := rune(0)
					for _, h := range t[i+2 : i+6] {
						r = r<<4 | rune(unhex(h))
					}
					n, decoded = 6, utf8.AppendRune(nil, r)
				}
			case 'x':
				if i+4 <= len(t) && allHex(t[i+2:i+4]) {
					n, decoded = 4, []byte{unhex(t[i+2])<<4 | unhex(t[i+3])}
				}
			}
		}
		if decoded == nil {
			emit(c, i, i+1)
			i++
			continue
		}
		changed = true
		for _, d := range decoded {
			emit(d, i, i+n)
		}
		i += n
	}
	return out, changed
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func allHex(b []byte) bool {
	for _, c := range b {
		if !isHex(c) {
			return false
		}
	}
	return true
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// redactHandler scrubs every log line of the provider secrets: its message
// and every string, error or other value among its attributes. Whatever a
// provider sent, and however it reaches a log line (an error message, an
// error wrapping a response body, the HTTP server's own log), the key does
// not reach the log.
type redactHandler struct {
	next slog.Handler
	r    *redactor
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	_, dirty := h.r.scrubString(rec.Message)
	if !dirty {
		rec.Attrs(func(a slog.Attr) bool {
			_, dirty = h.attr(a)
			return !dirty
		})
	}
	if !dirty {
		return h.next.Handle(ctx, rec)
	}
	msg, _ := h.r.scrubString(rec.Message)
	out := slog.NewRecord(rec.Time, rec.Level, msg, rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		a, _ = h.attr(a)
		out.AddAttrs(a)
		return true
	})
	return h.next.Handle(ctx, out)
}

// attr returns a scrubbed, and whether that changed it.
func (h *redactHandler) attr(a slog.Attr) (slog.Attr, bool) {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s, ok := h.r.scrubString(v.String()); ok {
			return slog.String(a.Key, s), true
		}
	case slog.KindAny:
		var s string
		switch x := v.Any().(type) {
		case error:
			s = x.Error()
		case fmt.Stringer:
			s = x.String()
		case []byte:
			s = string(x)
		default:
			s = fmt.Sprint(x)
		}
		if s, ok := h.r.scrubString(s); ok {
			return slog.String(a.Key, s), true
		}
	case slog.KindGroup:
		g := v.Group()
		var out []slog.Attr
		changed := false
		for i, ga := range g {
			na, ok := h.attr(ga)
			if ok && !changed {
				changed = true
				out = append([]slog.Attr(nil), g[:i]...)
			}
			if changed {
				out = append(out, na)
			}
		}
		if changed {
			return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}, true
		}
	}
	return a, false
}

func (h *redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i], _ = h.attr(a)
	}
	return &redactHandler{next: h.next.WithAttrs(out), r: h.r}
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{next: h.next.WithGroup(name), r: h.r}
}
