package limits_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/straitgw/strait/internal/llm/limits"
	"github.com/straitgw/strait/internal/llm/limits/redistest"
)

// stores runs f against a Memory store and two Redis stores sharing one
// redis-server (two gateway instances).
func stores(t *testing.T, f func(t *testing.T, a, b limits.Store)) {
	t.Run("memory", func(t *testing.T) {
		m := limits.NewMemory()
		f(t, m, m)
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		open := func() limits.Store {
			s, err := limits.NewRedis(limits.RedisOptions{URL: srv.URL(), Prefix: "t:" + t.Name() + ":", Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		f(t, open(), open())
	})
}

// Concurrent admissions from two stores (instances) never admit more
// than the limit between them: the check and the count are one step.
func TestAdmitHoldsTheLimitUnderConcurrency(t *testing.T) {
	stores(t, func(t *testing.T, a, b limits.Store) {
		l := limits.Limits{RPM: 50}
		now := time.Date(2026, 1, 1, 12, 0, 10, 0, time.UTC)
		var ok atomic.Int64
		var wg sync.WaitGroup
		for i := range 8 {
			s := a
			if i%2 == 1 {
				s = b
			}
			wg.Go(func() {
				for range 20 {
					adm, err := s.Admit(context.Background(), "k", l, 0, 0, now)
					if err != nil {
						t.Error(err)
						return
					}
					if adm.OK {
						ok.Add(1)
					} else if adm.Limit != limits.LimitRPM || adm.RetryAfter != 50*time.Second {
						t.Errorf("refusal %+v, want rpm with 50s to the next minute", adm)
					}
				}
			})
		}
		wg.Wait()
		if ok.Load() != 50 {
			t.Errorf("%d requests admitted under rpm 50 from 160 attempts", ok.Load())
		}
		// The next minute is a new window.
		adm, err := a.Admit(context.Background(), "k", l, 0, 0, now.Add(time.Minute))
		if err != nil || !adm.OK {
			t.Errorf("next minute: %+v %v, want admitted", adm, err)
		}
	})
}

// Tokens and spend are reserved at admission and settled with the real
// usage; a refused request reserves nothing.
func TestReserveAndSettle(t *testing.T) {
	stores(t, func(t *testing.T, a, b limits.Store) {
		ctx := context.Background()
		l := limits.Limits{TPM: 1000, Budget: 5000, Period: limits.Day}
		now := time.Date(2026, 1, 1, 23, 59, 0, 0, time.UTC)
		adm, err := a.Admit(ctx, "k", l, 800, 3000, now)
		if err != nil || !adm.OK {
			t.Fatalf("first: %+v %v", adm, err)
		}
		// 300 more tokens would pass 1000.
		if r, _ := b.Admit(ctx, "k", l, 300, 10, now); r.OK || r.Limit != limits.LimitTPM {
			t.Fatalf("second: %+v, want refused by tpm", r)
		}
		// The first used 150 tokens and cost 1000: settle gives back the rest.
		if err := a.Settle(ctx, "k", l, adm, 150-800, 1000-3000); err != nil {
			t.Fatal(err)
		}
		u, err := b.Usage(ctx, "k", l, now)
		if err != nil {
			t.Fatal(err)
		}
		if u.Tokens != 150 || u.Spent != 1000 {
			t.Errorf("usage %+v, want 150 tokens and 1000 spent", u)
		}
		if !u.PeriodEnd.Equal(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("period ends %v, want midnight", u.PeriodEnd)
		}
		// A request that could cost more than what is left is refused
		// until the period ends.
		r, err := b.Admit(ctx, "k", l, 10, 4001, now)
		if err != nil || r.OK || r.Limit != limits.LimitBudget || r.RetryAfter != time.Minute {
			t.Errorf("over budget: %+v %v, want refused for 1m", r, err)
		}
		if r, _ := b.Admit(ctx, "k", l, 10, 4000, now); !r.OK {
			t.Errorf("exactly the rest of the budget: %+v, want admitted", r)
		}
	})
}

// A Redis that is gone is an error, for the gateway's fail mode to
// decide.
func TestRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	s, err := limits.NewRedis(limits.RedisOptions{URL: srv.URL(), Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := limits.Limits{RPM: 1}
	if _, err := s.Admit(context.Background(), "k", l, 0, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if _, err := s.Admit(context.Background(), "k", l, 0, 0, time.Now()); err == nil {
		t.Error("Admit with Redis stopped: no error")
	}
}

// A large per-minute limit is leased in blocks: two instances together
// still never admit past it (and lose at most a block each), while Redis
// sees one script call per block, not per request; a small limit stays
// exact, request by request.
func TestLeasedLimits(t *testing.T) {
	srv := redistest.Start(t)
	open := func() *limits.Redis {
		s, err := limits.NewRedis(limits.RedisOptions{URL: srv.URL(), Prefix: "lease:", Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 12, 0, 10, 0, time.UTC)
	calls := func() int64 { return scriptCalls(t, srv.URL()) }
	l := limits.Limits{RPM: 4000, TPM: 40_000_000}
	before := calls()
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := range 4 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for range 1250 {
				adm, err := s.Admit(ctx, "big", l, 100, 0, now)
				if err != nil {
					t.Error(err)
					return
				}
				if adm.OK {
					ok.Add(1)
				} else if adm.Limit != limits.LimitRPM {
					t.Errorf("refusal %+v, want rpm", adm)
				}
			}
		})
	}
	wg.Wait()
	if n := ok.Load(); n > 4000 || n < 4000-2*4 {
		t.Errorf("%d admitted under rpm 4000 from two instances, want 3992-4000", n)
	}
	// A block per 4 admissions, and one refusal per instance (then the
	// rest of the minute is refused without asking).
	if n := calls() - before; n > 4000/4+10 {
		t.Errorf("%d script calls for %d admissions and %d refusals: want about one per block of 4", n, ok.Load(), 5000-ok.Load())
	}
	u, err := a.Usage(ctx, "big", l, now)
	if err != nil || u.Requests > 4000 || u.Tokens > l.TPM {
		t.Errorf("usage %+v, %v: over the limits", u, err)
	}

	// Small limits: one call per request, exact.
	before = calls()
	small := limits.Limits{RPM: 50}
	admitted := 0
	for range 60 {
		if adm, err := b.Admit(ctx, "small", small, 0, 0, now); err == nil && adm.OK {
			admitted++
		}
	}
	// (The first call of a script may count twice: EVALSHA, then EVAL.)
	if n := calls() - before; admitted != 50 || n < 60 || n > 61 {
		t.Errorf("rpm 50: %d admitted with %d script calls, want 50 with one per request", admitted, n)
	}
}

// scriptCalls is how many scripts the Redis server has run.
func scriptCalls(t *testing.T, url string) int64 {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				var calls int64
				fmt.Sscanf(rest, "calls=%d", &calls)
				n += calls
			}
		}
	}
	return n
}
