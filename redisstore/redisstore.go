package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/core"
)

// Limiter enforces one policy for any number of keys, with the state in
// Redis, so that every process using the same Redis, prefix and policy
// shares one limit. It implements core.Limiter and is safe for
// simultaneous use by multiple goroutines. Build one with New and Close it
// when done; the zero value is not usable.
type Limiter struct {
	policy  core.Policy
	keys    keyLayout
	script  script
	timeout time.Duration
	deny    *denyCache       // nil when switched off
	local   func() int64     // the deny cache's clock, ns
	clock   func() time.Time // tests only: the scripts' now instead of TIME
	b       *batcher
	direct  bool         // the client applies context deadlines to its sockets
	busy    atomic.Int32 // calls in progress: the first maxDirect go direct
	closed  atomic.Bool
	once    sync.Once
	fb      *fallback // nil without WithFallback
}

var _ core.Limiter = (*Limiter)(nil)

// Defaults of the options.
const (
	DefaultPrefix        = "ratelimit"
	DefaultTimeout       = 50 * time.Millisecond
	DefaultDenyCacheSize = 65536
)

// Option configures New.
type Option func(*config) error

type config struct {
	prefix   string
	timeout  time.Duration
	denySize int // 0: no deny cache
	maxBatch int
	clock    func() time.Time // tests: fixes the scripts' now
	localNow func() time.Time // tests: the deny cache's clock alone
	fallback *fallbackConfig  // nil without WithFallback
}

// WithPrefix sets the first part of every Redis key the limiter writes
// ("<prefix>:{<key>}:<policy>"). Use one prefix per application sharing a
// Redis. It may not be empty or contain '{' or '}'. The default is
// "ratelimit".
func WithPrefix(prefix string) Option {
	return func(c *config) error {
		if err := validPrefix(prefix); err != nil {
			return err
		}
		c.prefix = prefix
		return nil
	}
}

// WithTimeout bounds each call: AllowN, Peek and Reset return an error
// when Redis has not answered within d (or earlier, when the context
// passed to them ends first). d must be > 0. The default is 50ms.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("redisstore: WithTimeout must be > 0, got %v", d)
		}
		c.timeout = d
		return nil
	}
}

// WithoutDenyCache switches off the local deny cache (see "Deny cache" in
// the package docs): every call then asks Redis.
func WithoutDenyCache() Option {
	return func(c *config) error { c.denySize = 0; return nil }
}

// WithDenyCacheSize bounds the local deny cache to about n keys (n > 0).
// The default is 65536 keys, a few MB.
func WithDenyCacheSize(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("redisstore: WithDenyCacheSize must be > 0, got %d (use WithoutDenyCache to switch it off)", n)
		}
		c.denySize = n
		return nil
	}
}

// New returns a limiter enforcing p for every key, with its state in the
// Redis that rdb talks to (a single node, Sentinel or Cluster). It does not
// contact Redis: a Redis that is down shows as errors from the calls. It
// returns an error naming the field when p is invalid, when p's Recovery
// time exceeds 2^52 ns (about 52 days; see "Clock"), or when an option is
// invalid. It starts one goroutine; call Close to stop it. Closing the
// limiter does not close rdb.
func New(rdb redis.UniversalClient, p core.Policy, opts ...Option) (*Limiter, error) {
	if rdb == nil {
		return nil, errors.New("redisstore: New needs a Redis client, got nil")
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	c := config{prefix: DefaultPrefix, timeout: DefaultTimeout, denySize: DefaultDenyCacheSize, maxBatch: defaultMaxBatch}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	ttl := p.Recovery()
	if c.clock != nil {
		// A test clock moves independently of the real time by which
		// Redis expires keys: keep the state long enough for any test.
		ttl += testKeyLife
	}
	s, err := newScript(p, ttl)
	if err != nil {
		return nil, err
	}
	l := &Limiter{policy: p, keys: newKeyLayout(c.prefix, p), script: s, timeout: c.timeout, clock: c.clock}
	switch {
	case c.localNow != nil:
		l.local = func() int64 { return c.localNow().UnixNano() }
	case c.clock != nil:
		l.local = func() int64 { return c.clock().UnixNano() }
	default:
		base := time.Now()
		l.local = func() int64 { return int64(time.Since(base)) } // monotonic
	}
	if c.fallback != nil {
		if l.fb, err = newFallback(l, c.fallback, c.clock); err != nil {
			return nil, err
		}
	}
	if c.denySize > 0 {
		l.deny = newDenyCache(c.denySize)
	}
	l.b = newBatcher(rdb, c.timeout, c.maxBatch)
	l.direct = honoursDeadlines(rdb)
	return l, nil
}

// testKeyLife is added to the key expiry when a test fixes the clock.
const testKeyLife = time.Hour

// Allow is AllowN with cost 1.
func (l *Limiter) Allow(ctx context.Context, key string) (core.Decision, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN decides whether a request of cost n for key may pass now and, if
// so, consumes n, in one round trip to Redis (none when the deny cache
// answers). Besides the core errors (ErrInvalidCost; a denial with
// ErrCostExceedsCapacity; ErrClosed) it returns an error when Redis fails
// or does not answer within the timeout. See "Timeouts and errors" in the
// package docs for when a call that returned an error was counted.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (core.Decision, error) {
	if l.fb != nil {
		return l.fb.allowN(ctx, key, n) // see fallback.go
	}
	return l.allowN(ctx, key, n)
}

// allowN is AllowN without a fallback.
func (l *Limiter) allowN(ctx context.Context, key string, n int64) (core.Decision, error) {
	switch {
	case l.closed.Load():
		return core.Decision{}, fmt.Errorf("redisstore: AllowN: %w", core.ErrClosed)
	case n <= 0:
		return core.Decision{}, fmt.Errorf("redisstore: %w, got %d", core.ErrInvalidCost, n)
	case n > l.policy.Capacity():
		// A denial reporting the key's current state, with no RetryAfter.
		// It is a denial even when Redis cannot tell the state.
		d, err := l.do(ctx, "AllowN", key, 1, false)
		if err != nil {
			d = core.Decision{Limit: l.policy.Limit, Policy: l.policy}
			return d, fmt.Errorf("redisstore: %w: n=%d, %s (key state unknown: %w)", core.ErrCostExceedsCapacity, n, capacityText(l.policy), err)
		}
		d.Allowed, d.RetryAfter = false, 0
		return d, fmt.Errorf("redisstore: %w: n=%d, %s", core.ErrCostExceedsCapacity, n, capacityText(l.policy))
	}
	var sent int64
	var gen uint64
	if l.deny != nil && n == 1 {
		sent = l.local()
		e, g, ok := l.deny.get(key, sent)
		if ok {
			return l.cachedDenial(e, sent), nil
		}
		gen = g // before the call is sent: see Reset
	}
	d, err := l.do(ctx, "AllowN", key, n, true)
	if err == nil && l.deny != nil && n == 1 && !d.Allowed && d.RetryAfter > 0 && d.Remaining == 0 {
		l.deny.put(key, denyEntry{until: sent + int64(d.RetryAfter), resetAt: sent + int64(d.ResetAfter)}, sent, gen)
	}
	return d, err
}

// cachedDenial is the Decision of a cached unit-cost denial at now: the
// same denial, its durations shortened by the time elapsed.
func (l *Limiter) cachedDenial(e denyEntry, now int64) core.Decision {
	return core.Decision{
		Limit:      l.policy.Limit,
		ResetAfter: time.Duration(max(e.resetAt-now, 0)),
		RetryAfter: time.Duration(e.until - now),
		Policy:     l.policy,
	}
}

// Peek reports what a unit-cost request for key would be told now, without
// consuming anything or writing to Redis. It always asks Redis.
func (l *Limiter) Peek(ctx context.Context, key string) (core.Decision, error) {
	if l.fb != nil {
		return l.fb.peek(ctx, key)
	}
	return l.peek(ctx, key)
}

// peek is Peek without a fallback.
func (l *Limiter) peek(ctx context.Context, key string) (core.Decision, error) {
	if l.closed.Load() {
		return core.Decision{}, fmt.Errorf("redisstore: Peek: %w", core.ErrClosed)
	}
	return l.do(ctx, "Peek", key, 1, false)
}

// Reset forgets key in Redis, for every process, and in this process's
// deny cache: once it returns without an error, this process's next
// unit-cost call for key asks Redis, even if a denial Redis produced before
// the reset is answered only afterwards. Other processes' deny caches keep
// a denial they hold until its RetryAfter passes. A Reset that returns an
// error may or may not have deleted the key.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if l.fb != nil {
		return l.fb.reset(ctx, key)
	}
	return l.reset(ctx, key)
}

// reset is Reset without a fallback.
func (l *Limiter) reset(ctx context.Context, key string) error {
	if l.closed.Load() {
		return fmt.Errorf("redisstore: Reset: %w", core.ErrClosed)
	}
	if l.deny != nil {
		// After the DEL, whatever its outcome: a denial cached before
		// the DEL was answered (say, one Redis produced before the DEL
		// but this process received while it was in flight) is dropped,
		// and forget turns away every denial whose call was sent before
		// now (put's gen), so one still in flight cannot cache itself.
		// A call sent after this is decided by Redis after the DEL.
		defer l.deny.forget(key)
	}
	c := getCall()
	c.cmd = redis.NewCmd(ctx, "del", l.keys.key(key))
	c.cmd.SetFirstKeyPos(1)
	if err := l.wait(ctx, "Reset", c); err != nil {
		return err
	}
	err := c.err
	putCall(c)
	if err != nil {
		return fmt.Errorf("redisstore: Reset: %w", err)
	}
	return nil
}

// Policy returns the policy the limiter enforces.
func (l *Limiter) Policy() core.Policy { return l.policy }

// Close stops the limiter's goroutine, and the fallback's (WithFallback).
// Calls after the first do nothing; afterwards AllowN, Peek and Reset
// return core.ErrClosed. It does not close the Redis client.
func (l *Limiter) Close() error {
	l.once.Do(func() {
		l.closed.Store(true)
		l.b.close()
		if l.fb != nil {
			l.fb.close()
		}
	})
	return nil
}

// do runs the policy's script for key and returns its Decision.
func (l *Limiter) do(ctx context.Context, op, key string, n int64, consume bool) (core.Decision, error) {
	c := getCall()
	// A fresh slice, not one recycled with c: a client hook may keep the
	// command after the call returns.
	args := []any{"evalsha", l.script.sha, "1", l.keys.key(key), n, "0", "", ""}
	if consume {
		args[5] = "1"
	}
	if l.clock != nil {
		ns := l.clock().UnixNano()
		args[6], args[7] = strconv.FormatInt(ns/1000, 10), ns%1000
	}
	c.cmd, c.script, c.src = redis.NewCmd(ctx, args...), true, l.script.src
	c.cmd.SetFirstKeyPos(3)
	var err error
	if l.busy.Add(1) <= maxDirect && l.direct {
		err = l.sendDirect(ctx, op, c)
	} else {
		err = l.wait(ctx, op, c)
	}
	l.busy.Add(-1)
	if err != nil {
		return core.Decision{}, err
	}
	d, err := c.res, c.err
	putCall(c)
	if err != nil {
		return core.Decision{}, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	d.Limit, d.Policy = l.policy.Limit, l.policy
	return d, nil
}

// limit is how long a call with ctx may take: the limiter's timeout, or
// less when ctx's deadline comes first.
func (l *Limiter) limit(ctx context.Context) time.Duration {
	limit := l.timeout
	if dl, ok := ctx.Deadline(); ok {
		limit = min(limit, time.Until(dl))
	}
	return limit
}

// sendDirect sends c from the caller's goroutine, bounded by a context
// deadline, which the client honours (see New). A reply read before the
// deadline is returned even when the deadline has passed since: only a
// call without a reply is an error.
func (l *Limiter) sendDirect(ctx context.Context, op string, c *call) error {
	limit := l.limit(ctx)
	if err := ctx.Err(); err != nil {
		// Ended already: hand the client nothing, rather than rely on
		// it to notice before it writes.
		return l.gaveUp(op, c, limit, err)
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	c.state.Store(callSent)
	l.b.exec(ctx, []*call{c})
	if c.err != nil && ctx.Err() != nil {
		if cause := context.Cause(ctx); !errors.Is(cause, context.DeadlineExceeded) {
			return l.gaveUp(op, c, limit, cause)
		}
		return l.gaveUp(op, c, limit, nil)
	}
	return nil
}

// wait queues c for the batcher and waits for its answer, the timeout or
// the end of ctx, whichever comes first. On an error c is not recycled.
func (l *Limiter) wait(ctx context.Context, op string, c *call) error {
	limit := l.limit(ctx)
	if err := ctx.Err(); err != nil {
		// Ended already: do not queue a call that the batcher could take
		// before the select below notices.
		return l.gaveUp(op, c, limit, err)
	}
	c.timer.Reset(limit)
	select {
	case l.b.queue <- c:
	case <-c.timer.C:
		return l.gaveUp(op, c, limit, nil)
	case <-ctx.Done():
		return l.gaveUp(op, c, limit, ctx.Err())
	case <-l.b.done:
		return fmt.Errorf("redisstore: %s: %w", op, core.ErrClosed)
	}
	return l.await(ctx, op, c, limit)
}

// await waits for the batcher's answer to the queued call c, its timer
// running. When the answer is there by the time the timer fires or ctx
// ends, even at the same instant, the answer wins (select alone would pick
// at random): an error means that no answer had arrived.
func (l *Limiter) await(ctx context.Context, op string, c *call, limit time.Duration) error {
	var err error
	select {
	case <-c.done:
		return nil
	case <-c.timer.C:
	case <-ctx.Done():
		err = ctx.Err()
	case <-l.b.done:
		err = core.ErrClosed
	}
	select {
	case <-c.done:
		return nil
	default:
	}
	if errors.Is(err, core.ErrClosed) {
		return fmt.Errorf("redisstore: %s: %w", op, core.ErrClosed)
	}
	return l.gaveUp(op, c, limit, err)
}

// gaveUp abandons c (if it was not sent yet, Redis never sees it) and
// returns the error for a call that ran out of time or context.
func (l *Limiter) gaveUp(op string, c *call, limit time.Duration, ctxErr error) error {
	c.state.CompareAndSwap(callPending, callAbandoned)
	if ctxErr != nil {
		return fmt.Errorf("redisstore: %s: %w", op, ctxErr)
	}
	return fmt.Errorf("redisstore: %s: no answer from Redis within %v: %w", op, limit, context.DeadlineExceeded)
}

// honoursDeadlines reports whether the client bounds its socket reads and
// writes by a context's deadline, so that a call made on the caller's own
// goroutine cannot outlive its timeout: ContextTimeoutEnabled, and socket
// deadlines not switched off (ReadTimeout or WriteTimeout -2, which the
// options hold as -1 on a Client and as -2 on a ClusterClient; -1, "no
// timeout", is held as 0 and still applies the context's deadline).
func honoursDeadlines(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		o := c.Options()
		return o.ContextTimeoutEnabled && o.ReadTimeout >= 0 && o.WriteTimeout >= 0
	case *redis.ClusterClient:
		o := c.Options()
		return o.ContextTimeoutEnabled && o.ReadTimeout >= 0 && o.WriteTimeout >= 0
	}
	return false
}

func capacityText(p core.Policy) string {
	if p.Algorithm == core.AlgTokenBucket || p.Algorithm == core.AlgLeakyBucket {
		return fmt.Sprintf("%v burst is %d", p.Algorithm, p.Burst)
	}
	return fmt.Sprintf("%v limit is %d per %v", p.Algorithm, p.Limit, p.Window)
}

// maxDirect is how many calls may be in flight on their callers' own
// goroutines before further ones go through the batcher. With one, a
// second concurrent caller always paid the batcher's hand-offs for a
// pipeline of one: 2 callers measured 48 µs per decision against 27 µs with
// four (BenchmarkRedis callers=2, benchstat n=5, p=0.008); 64 callers were
// unchanged (17 and 16 µs), and 16 measured no different from 4.
const maxDirect = 4
