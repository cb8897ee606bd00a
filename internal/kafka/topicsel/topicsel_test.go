package topicsel

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	s := New([]string{"orders", "secure-*", "*-pii", "team-?-[ab]", `lit\*`})
	for topic, want := range map[string]bool{
		"orders": true, "orders2": false, "secure-": true, "secure-x": true, "insecure-x": false,
		"users-pii": true, "pii": false, "team-1-a": true, "team-12-a": false, "team-1-c": false,
		"lit*": true, "litx": false,
	} {
		if got := s.Match(topic); got != want {
			t.Errorf("Match(%q) = %v, want %v", topic, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	if err := Check("", "orders*"); err == nil || !strings.Contains(err.Error(), `"orders*"`) {
		t.Errorf("empty: %v", err)
	}
	if err := Check("[a-", "x*"); err == nil || !strings.Contains(err.Error(), "not a valid glob") {
		t.Errorf("bad glob: %v", err)
	}
	if err := Check("team-?-[ab]", "x*"); err != nil {
		t.Errorf("good glob: %v", err)
	}
}
