// Package limits keeps the LLM gateway's per-key counters: requests and
// tokens per minute, and spend per budget period. A request is admitted
// against every limit of its key at once, with an estimate of its tokens
// and cost reserved, and settled when its answer ends with what the
// provider reported.
//
// Two stores keep the counters: Memory, for one gateway instance, and
// Redis, shared by every instance that points at it. Both admit with a
// single atomic step (a mutex; a Lua script), so that concurrent requests
// never read and then write a stale count.
package limits

import (
	"context"
	"fmt"
	"time"
)

// Period is a budget's period. Periods are calendar periods in UTC: an
// hour, a day or a month starts on the hour, at midnight, on the 1st.
type Period string

// The periods.
const (
	Hour  Period = "hour"
	Day   Period = "day"
	Month Period = "month"
)

// Limits are one key's limits; a zero limit is no limit.
type Limits struct {
	// RPM is requests per minute.
	RPM int64
	// TPM is tokens (input and output) per minute.
	TPM int64
	// Budget is the spend per Period, in nanodollars.
	Budget int64
	Period Period
}

// Any reports whether l limits anything.
func (l Limits) Any() bool { return l.RPM > 0 || l.TPM > 0 || l.Budget > 0 }

// Counted reports whether l limits tokens or spend, which need settling.
func (l Limits) Counted() bool { return l.TPM > 0 || l.Budget > 0 }

// Which limit refused a request.
const (
	LimitRPM    = "rpm"
	LimitTPM    = "tpm"
	LimitBudget = "budget"
)

// Admission is the outcome of Admit.
type Admission struct {
	// OK is true when the request is admitted and its estimate reserved.
	OK bool
	// Limit names the limit that refused it, and RetryAfter when that
	// limit's window ends.
	Limit      string
	RetryAfter time.Duration
	// The windows the reservation was made in, for Settle.
	Minute int64 // Unix minute
	Start  int64 // the budget period's start, Unix seconds
}

// Usage is a key's counts in its current windows.
type Usage struct {
	Requests int64 // this minute
	Tokens   int64 // this minute
	Spent    int64 // this budget period, in nanodollars
	// PeriodEnd is when the budget period ends (zero without a budget).
	PeriodEnd time.Time
}

// Store keeps the counters. Its methods are safe for concurrent use.
type Store interface {
	// Admit counts one request of key against l at now, reserving tokens
	// and cost (nanodollars), unless a limit would be exceeded.
	Admit(ctx context.Context, key string, l Limits, tokens, cost int64, now time.Time) (Admission, error)
	// Settle adds the differences between what was reserved and what was
	// used (negative to give back) to the windows of a.
	Settle(ctx context.Context, key string, l Limits, a Admission, tokens, cost int64) error
	// Usage returns key's counts at now.
	Usage(ctx context.Context, key string, l Limits, now time.Time) (Usage, error)
	// Close releases the store's connections.
	Close() error
}

// windows returns the minute of now, and the start and end of its budget
// period.
func windows(p Period, now time.Time) (minute int64, start, end time.Time) {
	now = now.UTC()
	minute = now.Unix() / 60
	switch p {
	case Hour:
		start = now.Truncate(time.Hour)
		end = start.Add(time.Hour)
	case Month:
		start = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		end = start.AddDate(0, 1, 0)
	default:
		start = time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
		end = start.AddDate(0, 0, 1)
	}
	return minute, start, end
}

// untilNextMinute is the wait until the minute of now ends.
func untilNextMinute(now time.Time) time.Duration {
	next := time.Unix((now.Unix()/60+1)*60, 0)
	return max(next.Sub(now), time.Second)
}

// ParsePeriod checks a period name.
func ParsePeriod(s string) (Period, error) {
	switch p := Period(s); p {
	case Hour, Day, Month:
		return p, nil
	case "":
		return Day, nil
	}
	return "", fmt.Errorf("budget period %q is not hour, day or month", s)
}

// Nanodollars converts dollars to the unit budgets are kept in.
func Nanodollars(dollars float64) int64 { return int64(dollars*1e9 + 0.5) }

// Dollars converts nanodollars to dollars.
func Dollars(n int64) float64 { return float64(n) / 1e9 }
