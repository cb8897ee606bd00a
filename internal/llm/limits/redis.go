package limits

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis keeps the counters in Redis, shared by every gateway instance
// that uses the same server and prefix. Each admission is one Lua script:
// it reads every counter of the key, and increments them only if no limit
// would be exceeded, atomically, so that instances admitting at once
// never both take the last unit.
type Redis struct {
	c      *redis.Client
	prefix string

	// leases are the blocks of requests and tokens this instance took
	// from large per-minute limits (see leaseBlock), by key.
	mu     sync.Mutex
	leases map[string]*lease
}

// lease is a block of a key's per-minute counters taken from Redis at
// once, admitted from locally until spent or the minute ends.
type lease struct {
	minute       int64
	reqs, tokens int64 // left
	rpm, tpm     int64 // the limits it was taken under
	// full: Redis refused rpm this minute. Requests only count up within
	// a minute, so every request of it would be refused too: they are,
	// here, without a round trip.
	full bool
}

// RedisOptions configure a Redis store.
type RedisOptions struct {
	// URL is redis://[user:password@]host:port[/db] (rediss:// for TLS).
	URL string
	// Prefix starts every key the store writes; "strait:llm:" if empty.
	Prefix string
	// Timeout bounds each command (dial, read and write); 0 means 250 ms:
	// a limit check must not hold a request for long.
	Timeout time.Duration
}

// NewRedis returns a store on the Redis server of o.URL. It does not
// connect until first used.
func NewRedis(o RedisOptions) (*Redis, error) {
	opt, err := redis.ParseURL(o.URL)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	if o.Timeout <= 0 {
		o.Timeout = 250 * time.Millisecond
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = o.Timeout, o.Timeout, o.Timeout
	// A failed command is answered by the caller's fail_open/fail_closed
	// at once rather than retried behind the request's back.
	opt.MaxRetries = -1
	opt.DisableIdentity = true
	if o.Prefix == "" {
		o.Prefix = "strait:llm:"
	}
	// go-redis logs connection failures itself, to stderr; the gateway
	// logs and counts them in its own words.
	quietOnce.Do(func() { redis.SetLogger(quiet{}) })
	return &Redis{c: redis.NewClient(opt), prefix: o.Prefix, leases: map[string]*lease{}}, nil
}

var quietOnce sync.Once

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// The keys of one gateway key share a hash tag, {name}, so that a Redis
// Cluster keeps them in one slot, as a script's keys must be.
func (r *Redis) keys(key string, minute, start int64) []string {
	base := r.prefix + "{" + key + "}:"
	m := strconv.FormatInt(minute, 10)
	return []string{base + "r:" + m, base + "t:" + m, base + "b:" + strconv.FormatInt(start, 10)}
}

// admitScript checks every limit, then counts: nothing is written unless
// the request is admitted. It returns 0 (admitted) or the number of the
// limit that refused: 1 rpm, 2 tpm, 3 budget.
var admitScript = redis.NewScript(`
local rpm, tpm, bud = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tok, cost = tonumber(ARGV[4]), tonumber(ARGV[5])
if rpm > 0 and tonumber(redis.call('GET', KEYS[1]) or '0') + 1 > rpm then return 1 end
if tpm > 0 and tonumber(redis.call('GET', KEYS[2]) or '0') + tok > tpm then return 2 end
if bud > 0 and tonumber(redis.call('GET', KEYS[3]) or '0') + cost > bud then return 3 end
if rpm > 0 then redis.call('INCR', KEYS[1]); redis.call('PEXPIRE', KEYS[1], ARGV[6]) end
if tpm > 0 then redis.call('INCRBY', KEYS[2], tok); redis.call('PEXPIRE', KEYS[2], ARGV[6]) end
if bud > 0 then redis.call('INCRBY', KEYS[3], cost); redis.call('PEXPIRE', KEYS[3], ARGV[7]) end
return 0
`)

// settleScript adds the differences to the windows still there (a window
// that expired is not brought back), never below zero.
var settleScript = redis.NewScript(`
for i = 1, 2 do
  local d = tonumber(ARGV[i])
  if d ~= 0 and redis.call('EXISTS', KEYS[i]) == 1 then
    if redis.call('INCRBY', KEYS[i], d) < 0 then redis.call('SET', KEYS[i], 0, 'KEEPTTL') end
  end
end
return 0
`)

// leaseDiv sizes leases: a block is a thousandth of a per-minute limit,
// so that every instance together strands at most that much of a minute's
// allowance in blocks it does not use; minLeaseRPM is the smallest rpm
// worth leasing (a block of 2). Smaller limits, and every key with a
// budget, are counted in Redis request by request, exactly.
const (
	leaseDiv    = 1000
	minLeaseRPM = 2 * leaseDiv
)

// leaseBlock reports the block sizes to lease for l, or ok false when l is
// counted request by request.
func leaseBlock(l Limits) (reqs, tokens int64, ok bool) {
	if l.Budget > 0 || l.RPM > 0 && l.RPM < minLeaseRPM || l.RPM == 0 && l.TPM < minLeaseRPM*leaseDiv {
		return 0, 0, false
	}
	return l.RPM / leaseDiv, l.TPM / leaseDiv, true
}

// leaseScript takes a block of up to ARGV[3] requests and ARGV[4] tokens
// (at least one request and ARGV[5] tokens, the request's own) from this
// minute's counters, never past a limit. It returns {0, requests, tokens}
// granted, or {1} (rpm) or {2} (tpm) when even the request's own share is
// not left.
var leaseScript = redis.NewScript(`
local rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local wr, wt, need = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local gr, gt = 0, 0
if rpm > 0 then
  local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
  if cur + 1 > rpm then return {1} end
  gr = math.min(math.max(wr, 1), rpm - cur)
end
if tpm > 0 then
  local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
  if cur + need > tpm then return {2} end
  gt = math.min(math.max(wt, need), tpm - cur)
end
if gr > 0 then redis.call('INCRBY', KEYS[1], gr); redis.call('PEXPIRE', KEYS[1], ARGV[6]) end
if gt > 0 then redis.call('INCRBY', KEYS[2], gt); redis.call('PEXPIRE', KEYS[2], ARGV[6]) end
return {0, gr, gt}
`)

// admitLeased admits a request of a large per-minute limit from this
// instance's block, taking a new block from Redis (one round trip for
// many requests) when the block is spent or from another minute. A block
// is counted in Redis when taken, so instances together never admit past
// a limit; what a block leaves unused at the minute's end is allowance
// lost (a thousandth of the limit per instance, at most).
func (r *Redis) admitLeased(ctx context.Context, key string, l Limits, tokens int64, now time.Time, wantR, wantT int64) (Admission, error) {
	minute, start, _ := windows(l.Period, now)
	a := Admission{Minute: minute, Start: start.Unix()}
	r.mu.Lock()
	le := r.leases[key]
	current := le != nil && le.minute == minute && le.rpm == l.RPM && le.tpm == l.TPM
	if current && le.full {
		r.mu.Unlock()
		a.Limit, a.RetryAfter = LimitRPM, untilNextMinute(now)
		return a, nil
	}
	if current && (l.RPM == 0 || le.reqs >= 1) && (l.TPM == 0 || le.tokens >= tokens) {
		le.reqs--
		le.tokens -= tokens
		r.mu.Unlock()
		a.OK = true
		return a, nil
	}
	r.mu.Unlock()
	ks := r.keys(key, minute, a.Start)
	ttl := time.Unix((minute+2)*60, 0).Sub(now).Milliseconds()
	res, err := leaseScript.Run(ctx, r.c, ks[:2], l.RPM, l.TPM, wantR, wantT, tokens, ttl).Int64Slice()
	if err != nil {
		return a, fmt.Errorf("redis: %w", err)
	}
	fresh := func() *lease {
		le := r.leases[key]
		if le == nil || le.minute != minute || le.rpm != l.RPM || le.tpm != l.TPM {
			le = &lease{minute: minute, rpm: l.RPM, tpm: l.TPM}
			r.leases[key] = le
		}
		return le
	}
	switch {
	case len(res) == 3 && res[0] == 0:
		// Added to what a concurrent request leased meanwhile, so that
		// neither block is lost.
		r.mu.Lock()
		le := fresh()
		le.reqs += res[1] - 1
		le.tokens += res[2] - tokens
		r.mu.Unlock()
		a.OK = true
	case len(res) == 1 && res[0] == 1:
		r.mu.Lock()
		fresh().full = true
		r.mu.Unlock()
		a.Limit, a.RetryAfter = LimitRPM, untilNextMinute(now)
	case len(res) == 1 && res[0] == 2:
		a.Limit, a.RetryAfter = LimitTPM, untilNextMinute(now)
	default:
		return a, fmt.Errorf("redis: the lease script answered %v", res)
	}
	return a, nil
}

// Admit implements Store.
func (r *Redis) Admit(ctx context.Context, key string, l Limits, tokens, cost int64, now time.Time) (Admission, error) {
	if wantR, wantT, ok := leaseBlock(l); ok {
		return r.admitLeased(ctx, key, l, tokens, now, wantR, wantT)
	}
	minute, start, end := windows(l.Period, now)
	a := Admission{Minute: minute, Start: start.Unix()}
	ks := r.keys(key, minute, a.Start)
	// A minute's counters outlive it a little, for settling late answers.
	ttl := time.Unix((minute+2)*60, 0).Sub(now).Milliseconds()
	// A period's spend outlives it by an hour, likewise.
	pttl := end.Add(time.Hour).Sub(now).Milliseconds()
	res, err := admitScript.Run(ctx, r.c, ks, l.RPM, l.TPM, l.Budget, tokens, cost, ttl, pttl).Int()
	if err != nil {
		return a, fmt.Errorf("redis: %w", err)
	}
	switch res {
	case 0:
		a.OK = true
	case 1:
		a.Limit, a.RetryAfter = LimitRPM, untilNextMinute(now)
	case 2:
		a.Limit, a.RetryAfter = LimitTPM, untilNextMinute(now)
	case 3:
		a.Limit, a.RetryAfter = LimitBudget, end.Sub(now)
	default:
		return a, errors.New("redis: the admission script answered " + strconv.Itoa(res))
	}
	return a, nil
}

// Settle implements Store.
func (r *Redis) Settle(ctx context.Context, key string, l Limits, a Admission, tokens, cost int64) error {
	ks := r.keys(key, a.Minute, a.Start)
	if l.TPM <= 0 {
		tokens = 0
	}
	if l.Budget <= 0 {
		cost = 0
	}
	if tokens == 0 && cost == 0 {
		return nil
	}
	if err := settleScript.Run(ctx, r.c, ks[1:], tokens, cost).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// SettleJob is one Settle of a batch.
type SettleJob struct {
	Key          string
	Limits       Limits
	Admission    Admission
	Tokens, Cost int64
}

// SettleBatch settles many requests in one round trip (a pipeline).
func (r *Redis) SettleBatch(ctx context.Context, jobs []SettleJob) error {
	pipe := r.c.Pipeline()
	n := 0
	for _, j := range jobs {
		tok, cost := j.Tokens, j.Cost
		if j.Limits.TPM <= 0 {
			tok = 0
		}
		if j.Limits.Budget <= 0 {
			cost = 0
		}
		if tok == 0 && cost == 0 {
			continue
		}
		ks := r.keys(j.Key, j.Admission.Minute, j.Admission.Start)
		settleScript.Eval(ctx, pipe, ks[1:], tok, cost)
		n++
	}
	if n == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// Usage implements Store.
func (r *Redis) Usage(ctx context.Context, key string, l Limits, now time.Time) (Usage, error) {
	minute, start, end := windows(l.Period, now)
	ks := r.keys(key, minute, start.Unix())
	vals, err := r.c.MGet(ctx, ks...).Result()
	if err != nil {
		return Usage{}, fmt.Errorf("redis: %w", err)
	}
	n := func(v any) int64 {
		s, _ := v.(string)
		i, _ := strconv.ParseInt(s, 10, 64)
		return i
	}
	u := Usage{Requests: n(vals[0]), Tokens: n(vals[1]), Spent: n(vals[2])}
	if l.Budget > 0 {
		u.PeriodEnd = end
	}
	return u, nil
}

// Ping checks that the server answers.
func (r *Redis) Ping(ctx context.Context) error { return r.c.Ping(ctx).Err() }

// Close implements Store.
func (r *Redis) Close() error { return r.c.Close() }
