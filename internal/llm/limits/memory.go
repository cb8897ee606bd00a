package limits

import (
	"context"
	"sync"
	"time"
)

// Memory keeps the counters in this process: limits hold per instance.
type Memory struct {
	mu   sync.Mutex
	keys map[string]*memKey
}

type memKey struct {
	minute           int64
	requests, tokens int64
	start            int64 // budget period start
	spent            int64
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{keys: map[string]*memKey{}} }

// roll returns key's counters with windows that ended reset. Call with
// mu held.
func (m *Memory) roll(key string, minute, start int64) *memKey {
	k := m.keys[key]
	if k == nil {
		k = &memKey{minute: minute, start: start}
		m.keys[key] = k
	}
	if k.minute != minute {
		k.minute, k.requests, k.tokens = minute, 0, 0
	}
	if k.start != start {
		k.start, k.spent = start, 0
	}
	return k
}

// Admit implements Store.
func (m *Memory) Admit(_ context.Context, key string, l Limits, tokens, cost int64, now time.Time) (Admission, error) {
	minute, start, end := windows(l.Period, now)
	a := Admission{Minute: minute, Start: start.Unix()}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.roll(key, minute, a.Start)
	switch {
	case l.RPM > 0 && k.requests+1 > l.RPM:
		a.Limit, a.RetryAfter = LimitRPM, untilNextMinute(now)
	case l.TPM > 0 && k.tokens+tokens > l.TPM:
		a.Limit, a.RetryAfter = LimitTPM, untilNextMinute(now)
	case l.Budget > 0 && k.spent+cost > l.Budget:
		a.Limit, a.RetryAfter = LimitBudget, end.Sub(now)
	default:
		a.OK = true
		k.requests++
		k.tokens += tokens
		k.spent += cost
	}
	return a, nil
}

// Settle implements Store. A window that has ended since the admission
// is left alone.
func (m *Memory) Settle(_ context.Context, key string, _ Limits, a Admission, tokens, cost int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.keys[key]
	if k == nil {
		return nil
	}
	if k.minute == a.Minute {
		k.tokens = max(k.tokens+tokens, 0)
	}
	if k.start == a.Start {
		k.spent = max(k.spent+cost, 0)
	}
	return nil
}

// Usage implements Store.
func (m *Memory) Usage(_ context.Context, key string, l Limits, now time.Time) (Usage, error) {
	minute, start, end := windows(l.Period, now)
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.roll(key, minute, start.Unix())
	u := Usage{Requests: k.requests, Tokens: k.tokens, Spent: k.spent}
	if l.Budget > 0 {
		u.PeriodEnd = end
	}
	return u, nil
}

// Close implements Store.
func (m *Memory) Close() error { return nil }
