package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestRedactorScrubError(t *testing.T) {
	const key = "sk-proj-Q9vX2mTq7LwZ4cRb8NfY1hKd6PsJ3uEa5GoI0tVy"
	const b64 = "tok/Zk7+Qm3vW9xR2bT5yN8cL1pF4hJ6sD0g=="
	r := newRedactor([]string{key, b64, "", "ollama"})
	for _, tt := range []struct{ name, in string }{
		{"verbatim", "Incorrect API key provided: " + key + "."},
		{"bearer", "Authorization: Bearer " + key},
		{"prefix", "key " + key[:12] + "****" + key[len(key)-4:]},
		{"long prefix", "key " + key[:20] + "…"},
		{"suffix", "key …" + key[len(key)-9:]},
		{"json escapes", `{"m":"\u0073\u006B\u002d` + key[3:] + `"}`},
		{"escaped slash", `{"m":"` + strings.ReplaceAll(b64, "/", `\/`) + `"}`},
		{"url", "?k=" + strings.NewReplacer("/", "%2F", "+", "%2B", "=", "%3D").Replace(b64)},
		{"url twice", "?k=" + strings.NewReplacer("/", "%252F", "+", "%252B", "=", "%253D").Replace(b64)},
		{"json in json", `{"m":"{\\\"k\\\":\\\"` + strings.ReplaceAll(b64, "/", `\\\/`) + `\\\"}"}`},
		{"hex escapes", `k=\x73\x6b` + key[2:]},
		{"twice, adjacent", key + key},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := string(r.scrubError([]byte(tt.in)))
			for _, k := range []string{key, b64} {
				if leaks(out, k) {
					t.Errorf("%q\nbecame %q, which shows %s…", tt.in, out, k[:8])
				}
			}
			if !strings.Contains(out, RedactedMark) {
				t.Errorf("%q: nothing masked: %q", tt.in, out)
			}
			if json.Valid([]byte(tt.in)) && !json.Valid([]byte(out)) {
				t.Errorf("valid JSON %s became invalid: %s", tt.in, out)
			}
		})
	}

	// Left alone: pieces shorter than 8 bytes, pieces with no key
	// material (the public prefix every OpenAI project key starts with, the
	// word at the end of llama.cpp's placeholder key), and keys too short
	// to be secrets.
	r = newRedactor([]string{key, b64, "ollama", "sk-no-key-required"})
	for _, in := range []string{
		"nothing secret here: \\n, \\\", 100% sure",
		"OpenAI project keys start with sk-proj-; this one is sk-proj-****0tVy",
		"the field max_tokens is required, and ollama was asked",
		key[:7] + " and " + key[len(key)-7:],
	} {
		if out := r.scrubError([]byte(in)); string(out) != in {
			t.Errorf("%q changed to %q", in, out)
		}
	}
	if out := string(r.scrubError([]byte("key sk-no-key-required refused"))); out != "key "+RedactedMark+" refused" {
		t.Errorf("a placeholder key itself was not masked: %q", out)
	}
}

func TestRedactorScrubContent(t *testing.T) {
	const key = "sk-proj-Q9vX2mTq7LwZ4cRb8NfY1hKd6PsJ3uEa5GoI0tVy"
	r := newRedactor([]string{key, "short-key-12"})
	answer := []byte(`{"choices":[{"message":{"content":"OpenAI keys start with sk-proj-; short-key-12 is no secret here"}}]}`)
	if out := r.scrubContent(answer); &out[0] != &answer[0] || !bytes.Equal(out, answer) {
		t.Errorf("an answer without a key was changed or copied: %s", out)
	}
	for _, in := range []string{"the key is " + key, "it ends in " + key[len(key)-10:]} {
		out := string(r.scrubContent([]byte(in)))
		if strings.Contains(out, key[len(key)-8:]) || !strings.Contains(out, RedactedMark) {
			t.Errorf("%q became %q", in, out)
		}
	}
	// An event that reports an error is scrubbed at full strength.
	ev := []byte("event: error\ndata: {\"error\":{\"message\":\"bad key " + key[:12] + "***\"}}\n\n")
	if out := r.scrubEvent(ev); bytes.Contains(out, []byte(key[:8])) {
		t.Errorf("error event kept the key's prefix: %s", out)
	}
	if newRedactor([]string{"", "x", "ollama"}) != nil {
		t.Error("placeholder keys made a redactor")
	}
	var none *redactor
	if out := none.scrubError([]byte(key)); string(out) != key {
		t.Error("a nil redactor changed its input")
	}
}

func TestRedactHandler(t *testing.T) {
	const key = "sk-ant-api03-Zk7Qm3vW9xR2bT5yN8cL1pF4hJ6sD0g"
	var buf bytes.Buffer
	r := newRedactor([]string{key})
	log := slog.New(&redactHandler{next: slog.NewJSONHandler(&buf, nil), r: r})
	log = log.With("bound", "x-api-key: "+key)
	log.WithGroup("g").Warn("provider said "+key,
		"err", errors.New("upstream: invalid x-api-key "+key),
		"msg", key[:16]+"…",
		"n", 3,
		slog.Group("inner", "echo", key, "fine", "ok"),
		"bytes", []byte(key))
	log.Info("clean line", "path", "/v1/messages")
	out := buf.String()
	if leaks(out, key) {
		t.Errorf("the log shows the key:\n%s", out)
	}
	for _, want := range []string{`"n":3`, `"fine":"ok"`, `"path":"/v1/messages"`, RedactedMark} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %s:\n%s", want, out)
		}
	}
}
