//go:build !race

// The race detector slows PBKDF2 and HMAC tenfold and unevenly: timings
// under it measure the detector, so these tests are built without it only
// (scripts/test runs them so).

package sasl_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/straitgw/strait/internal/auth/sasl"
	"github.com/xdg-go/scram"
)

// The timing tests compare how long the gateway takes to fail a wrong password and an unknown user. They
// measure the server's side only (the client's PBKDF2 is the same for both, and cached), interleave the two
// kinds in random order so that a slow moment of a shared machine hits both, and compare medians and
// interquartile ranges, which a few preempted samples do not move. A comparison that fails is run again,
// up to timingAttempts in all: noise does not repeat, a real difference does — and a self-check shows that
// a difference of one lookup's worth is caught.
const (
	timingAttempts = 3
	// maxMedianRatio is how far apart the two medians may be.
	maxMedianRatio = 1.2
)

// distribution is the quartiles of a set of durations.
type distribution struct{ q1, median, q3 time.Duration }

func quartiles(d []time.Duration) distribution {
	s := slices.Clone(d)
	slices.Sort(s)
	return distribution{s[len(s)/4], s[len(s)/2], s[3*len(s)/4]}
}

// alike reports whether two distributions are the same to the timing tests: medians within maxMedianRatio
// and interquartile ranges that overlap.
func alike(a, b distribution) bool {
	ratio := float64(a.median) / float64(b.median)
	return ratio <= maxMedianRatio && ratio >= 1/maxMedianRatio && a.q1 <= b.q3 && b.q1 <= a.q3
}

func (d distribution) String() string {
	return fmt.Sprintf("median %v, IQR %v–%v", d.median, d.q1, d.q3)
}

// compareTimes runs measure (which returns the durations of two kinds of failure) up to timingAttempts
// times and reports whether the distributions were alike in any run, with what the last run saw.
func compareTimes(measure func() (a, b []time.Duration)) (bool, string) {
	var last string
	for range timingAttempts {
		a, b := measure()
		da, db := quartiles(a), quartiles(b)
		last = fmt.Sprintf("wrong password: %v; unknown user: %v", da, db)
		if alike(da, db) {
			return true, last
		}
	}
	return false, last
}

// scramFailure is one kind of failed SCRAM exchange: a client whose keys are derived once.
type scramFailure struct{ client *scram.Client }

// serverTime runs one exchange and returns the time the mechanism spent in it.
func (f scramFailure) serverTime(t testing.TB, mech sasl.Mechanism) time.Duration {
	conv := f.client.NewConversation()
	c1, _ := conv.Step("")
	start := time.Now()
	ex := mech.Start(context.Background(), "127.0.0.1:1")
	s1, done, err := ex.Next([]byte(c1))
	spent := time.Since(start)
	if err != nil || done {
		t.Fatalf("client-first: %v, done %v", err, done)
	}
	c2, err := conv.Step(string(s1))
	if err != nil {
		t.Fatalf("the client refused server-first %q: %v", s1, err)
	}
	start = time.Now()
	_, done, err = ex.Next([]byte(c2))
	spent += time.Since(start)
	if err != sasl.ErrAuthFailed || !done {
		t.Fatalf("client-final: %v, done %v; want ErrAuthFailed", err, done)
	}
	return spent
}

// measureSCRAM runs n exchanges of each kind, in pairs of random order.
func measureSCRAM(t testing.TB, mech sasl.Mechanism, a, b scramFailure, n int) ([]time.Duration, []time.Duration) {
	da, db := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	a.serverTime(t, mech) // derive both clients' keys before measuring
	b.serverTime(t, mech)
	for range n {
		if rand.IntN(2) == 0 {
			da = append(da, a.serverTime(t, mech))
			db = append(db, b.serverTime(t, mech))
		} else {
			db = append(db, b.serverTime(t, mech))
			da = append(da, a.serverTime(t, mech))
		}
	}
	return da, db
}

// slowForUnknown is Credentials that take extra time for unknown users: the oracle the timing tests must
// catch.
type slowForUnknown struct {
	sasl.Credentials
	extra time.Duration
}

func (s slowForUnknown) Lookup(user, mechanism string) (sasl.SCRAMCredentials, bool) {
	c, ok := s.Credentials.Lookup(user, mechanism)
	if !ok {
		spin(s.extra)
	}
	return c, ok
}

func (s slowForUnknown) VerifyPlain(user, password string) bool {
	ok := s.Credentials.VerifyPlain(user, password)
	if user == "mallory" {
		spin(s.extra)
	}
	return ok
}

// spin busy-waits for d: a sleep would yield the CPU, and its wake-up latency is noisier than d.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// TestSCRAMNoTimingOracle: the gateway takes as long to fail an unknown user as a wrong password.
func TestSCRAMNoTimingOracle(t *testing.T) {
	store := newStore(t, "alice", "alice-pw")
	const samples = 1500
	for _, m := range scramMechs {
		t.Run(m.name, func(t *testing.T) {
			wrong := scramFailure{mustClient(t, m.client, "alice", "not-alice-pw")}
			unknown := scramFailure{mustClient(t, m.client, "mallory", "alice-pw")}

			ok, summary := compareTimes(func() ([]time.Duration, []time.Duration) {
				return measureSCRAM(t, m.new(store), wrong, unknown, samples)
			})
			if !ok {
				t.Errorf("an unknown user's exchange does not take as long as a wrong password's: %s", summary)
			}
			t.Log(summary)

			// The check itself can fail: an unknown user that costs a few lookups more is caught.
			a, _ := measureSCRAM(t, m.new(store), wrong, unknown, 100)
			extra := quartiles(a).median // doubles the cost of a failure
			caught, summary := compareTimes(func() ([]time.Duration, []time.Duration) {
				return measureSCRAM(t, m.new(slowForUnknown{store, extra}), wrong, unknown, samples/3)
			})
			if caught {
				t.Errorf("the comparison did not catch %v more for unknown users: %s", extra, summary)
			}
		})
	}
}

// TestPlainNoTimingOracle: PLAIN, where the gateway runs PBKDF2 itself, takes as long for an unknown user
// as for a wrong password.
func TestPlainNoTimingOracle(t *testing.T) {
	store := newStore(t, "alice", "alice-pw")
	const samples = 120
	measure := func(mech sasl.Mechanism, samples int) ([]time.Duration, []time.Duration) {
		run := func(user string) time.Duration {
			start := time.Now()
			_, _, err := mech.Start(context.Background(), "").Next(plainMsg("", user, "not-alice-pw"))
			spent := time.Since(start)
			if err != sasl.ErrAuthFailed {
				t.Fatalf("PLAIN as %s: %v, want ErrAuthFailed", user, err)
			}
			return spent
		}
		da, db := make([]time.Duration, 0, samples), make([]time.Duration, 0, samples)
		for range samples {
			if rand.IntN(2) == 0 {
				da = append(da, run("alice"))
				db = append(db, run("mallory"))
			} else {
				db = append(db, run("mallory"))
				da = append(da, run("alice"))
			}
		}
		return da, db
	}
	ok, summary := compareTimes(func() ([]time.Duration, []time.Duration) { return measure(sasl.NewPlain(store), samples) })
	if !ok {
		t.Errorf("PLAIN fails an unknown user faster or slower than a wrong password: %s", summary)
	}
	t.Log(summary)

	a, _ := measure(sasl.NewPlain(store), 20)
	extra := quartiles(a).median // doubles the cost of a failure
	caught, summary := compareTimes(func() ([]time.Duration, []time.Duration) {
		return measure(sasl.NewPlain(slowForUnknown{store, extra}), samples/3)
	})
	if caught {
		t.Errorf("the comparison did not catch %v more for unknown users: %s", extra, summary)
	}
}
