package devregistry

import (
	"strings"
	"testing"
)

func TestCheckProto(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		wantErr    string // "" for valid
	}{
		{"proto3 message", "syntax = \"proto3\";\nmessage A { string b = 1; }", ""},
		{"no syntax line", "message A { int32 b = 1; }", ""},
		{"enum only", "syntax = 'proto2'; enum E { X = 0; }", ""},
		{"service", "syntax = \"proto3\"; import \"a.proto\"; service S { rpc M(A) returns (A); }", ""},
		{"edition", "edition = \"2023\";\npackage p.q;\noption go_package = \"x/y\";\nmessage M {}", ""},
		{"nested braces and comments", "/* head */ message A { // tail {\n message B { map<string, int32> m = 1 [deprecated = true]; } }", ""},
		{"brace inside a string", "message A { string b = 1 [default = \"}{\"]; }", ""},
		{"escaped quote", `message A { string b = 1 [default = "a\"}"]; }`, ""},
		{"empty", "", "declares no message"},
		{"comments only", "// nothing\n/* at all */", "declares no message"},
		{"imports only", "syntax = \"proto3\"; import \"x.proto\";", "declares no message"},
		{"JSON", `{"type":"record"}`, "top-level statement"},
		{"Avro name", `"string"`, "top-level statement"},
		{"unknown keyword", "syntax = \"proto3\"; messsage A {}", "top-level statement"},
		{"unclosed brace", "message A {", "unclosed"},
		{"stray close", "message A {} }", "unmatched }"},
		{"unterminated comment", "message A {} /* open", "unterminated /*"},
		{"unterminated string", "message A { string b = 1 [default = \"x]; }", "unterminated string"},
		{"string across a line", "message A { string b = 1 [default = \"x\n\"]; }", "unterminated string"},
		{"trailing backslash", "message A {} \"\\", "unterminated string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkProto(tc.text)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("got %v, want valid", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestValidSubject(t *testing.T) {
	for s, want := range map[string]bool{
		"orders-value":            true,
		"com.example.Order":       true,
		"team/orders":             true,
		"ünïcode":                 true,
		"":                        false,
		"tab\there":               false,
		"del\x7f":                 false,
		"c1\u0085":                false,
		"\xff":                    false,
		strings.Repeat("s", 4096): true,
		strings.Repeat("s", 4097): false,
	} {
		if got := validSubject(s); got != want {
			t.Errorf("validSubject(%q): got %v, want %v", clip(s), got, want)
		}
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]int{
		"1": 1, "latest": -1, "LATEST": -1, " 7 ": 7, "-1": -1, "2147483647": 2147483647,
		"0": 0, "-2": 0, "x": 0, "": 0, "2147483648": 0, "1.0": 0,
	} {
		got, err := parseVersion(in)
		if want == 0 {
			if err == nil {
				t.Errorf("parseVersion(%q): got %d, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("parseVersion(%q): got %d, %v; want %d", in, got, err, want)
		}
	}
}
