package main

import (
	"bytes"
	"strings"
	"testing"
)

const stream = `{"Action":"start","Package":"example/a"}
{"Action":"run","Package":"example/a","Test":"TestPass"}
{"Action":"output","Package":"example/a","Test":"TestPass","Output":"=== RUN   TestPass\n"}
{"Action":"output","Package":"example/a","Test":"TestPass","Output":"    a_test.go:10: chatter of a passing test\n"}
{"Action":"output","Package":"example/a","Test":"TestPass","Output":"--- PASS: TestPass (0.00s)\n"}
{"Action":"pass","Package":"example/a","Test":"TestPass"}
{"Action":"run","Package":"example/a","Test":"TestFail"}
{"Action":"output","Package":"example/a","Test":"TestFail","Output":"=== RUN   TestFail\n"}
{"Action":"output","Package":"example/a","Test":"TestFail","Output":"    a_test.go:20: got 1, want 2\n"}
{"Action":"output","Package":"example/a","Test":"TestFail","Output":"--- FAIL: TestFail (0.00s)\n"}
{"Action":"fail","Package":"example/a","Test":"TestFail"}
{"Action":"run","Package":"example/a","Test":"TestKcat"}
{"Action":"output","Package":"example/a","Test":"TestKcat","Output":"=== RUN   TestKcat\n"}
{"Action":"output","Package":"example/a","Test":"TestKcat","Output":"    a_test.go:30: starting\n"}
{"Action":"output","Package":"example/a","Test":"TestKcat","Output":"    a_test.go:31: kcat is not installed:\n"}
{"Action":"output","Package":"example/a","Test":"TestKcat","Output":"        apt-get install kcat\n"}
{"Action":"output","Package":"example/a","Test":"TestKcat","Output":"--- SKIP: TestKcat (0.00s)\n"}
{"Action":"skip","Package":"example/a","Test":"TestKcat"}
{"Action":"run","Package":"example/a","Test":"TestOld/sub"}
{"Action":"output","Package":"example/a","Test":"TestOld/sub","Output":"    --- SKIP: TestOld/sub (0.00s)\n"}
{"Action":"output","Package":"example/a","Test":"TestOld/sub","Output":"        a_test.go:40: Node.js is not available\n"}
{"Action":"skip","Package":"example/a","Test":"TestOld/sub"}
{"Action":"output","Package":"example/a","Output":"FAIL\n"}
{"Action":"output","Package":"example/a","Output":"FAIL\texample/a\t0.01s\n"}
{"Action":"fail","Package":"example/a"}
{"Action":"run","Package":"example/b","Test":"TestHangs"}
{"Action":"output","Package":"example/b","Test":"TestHangs","Output":"    b_test.go:5: waiting for the broker\n"}
{"Action":"output","Package":"example/b","Output":"panic: test timed out after 1m0s\n"}
{"Action":"output","Package":"example/b","Output":"FAIL\texample/b\t60.0s\n"}
{"Action":"fail","Package":"example/b"}
{"Action":"output","Package":"example/c","Output":"PASS\n"}
{"Action":"output","Package":"example/c","Output":"ok  \texample/c\t0.01s\n"}
{"Action":"pass","Package":"example/c"}
go: downloading example.com/m v1.0.0
`

func TestSummarizer(t *testing.T) {
	var out bytes.Buffer
	s := newSummarizer(&out)
	if err := s.read(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"    a_test.go:20: got 1, want 2\n--- FAIL: TestFail (0.00s)\n",
		"FAIL\texample/a\t0.01s\n",
		// A test cut off by a timeout shows what it said.
		"    b_test.go:5: waiting for the broker\n",
		"panic: test timed out after 1m0s\n",
		"ok  \texample/c\t0.01s\n",
		"go: downloading example.com/m v1.0.0\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{"chatter of a passing test", "=== RUN", "PASS\n", "kcat is not installed"} {
		if strings.Contains(got, bad) {
			t.Errorf("output has %q, which go test without -v does not print:\n%s", bad, got)
		}
	}
	if !s.failed {
		t.Error("a failing stream was not reported as failed")
	}

	var skips bytes.Buffer
	s.writeSkips(&skips)
	want := "  example/a TestKcat: kcat is not installed: apt-get install kcat\n" +
		"  example/a TestOld/sub: Node.js is not available\n"
	if skips.String() != want {
		t.Errorf("skipped list:\n%s\nwant:\n%s", skips.String(), want)
	}
}

func TestSummarizerPassing(t *testing.T) {
	s := newSummarizer(&bytes.Buffer{})
	if err := s.read(strings.NewReader(`{"Action":"pass","Package":"example/c"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if s.failed {
		t.Error("a passing stream was reported as failed")
	}
}
