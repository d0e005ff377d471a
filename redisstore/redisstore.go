package redisstore

import (
	"context"
	"errors"
	"fmt"

	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/outage"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/script"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/transport"
)

// Limiter enforces a policy for any number of keys, with the state in
// Redis, so that every process using the same Redis, prefix and algorithm
// shares one limit. It implements core.Limiter and core.PolicyLimiter and
// is safe for simultaneous use by multiple goroutines. Build one with New
// and Close it when done; the zero value is not usable.
type Limiter struct {
	policy  core.Policy
	unnamed core.Policy // policy without its Name: what its state depends on
	ttlPlus time.Duration
	specs   specCache // the policies given with calls (policies.go)
	own     *pspec    // the limiter's policy: its keys' tails, its parts' numbers
	keys    keyLayout
	timeout time.Duration
	deny    *denyCache       // nil when switched off
	local   func() int64     // the deny cache's and breaker's clock, ns: sinceStart
	clock   func() time.Time // tests only: the scripts' now instead of TIME
	tr      *transport.Sender
	br      *outage.Breaker
	fb      *outage.Fallback // nil with WithoutFallback
	closed  atomic.Bool
	once    sync.Once
}

var _ core.PolicyLimiter = (*Limiter)(nil)

// ErrUnavailable is wrapped, with the cause, by the errors of calls that
// Redis failed: it returned an error, refused or broke the connection, or
// did not answer within the timeout (see WithTimeout); and of calls the
// circuit breaker kept from Redis (see ErrBreakerOpen). With the local
// fallback (the default) only Reset, Get, Set, Settle (of a decision
// Redis made) and Ping return them.
//
// The error of a call whose own context ended first wraps ctx.Err() and
// never ErrUnavailable: it is not a store failure. Either way the
// Decision carries only the policy's Limit and Policy.
var ErrUnavailable = errors.New("redisstore: Redis unavailable")

// New returns a limiter enforcing p for every key, with its state in the
// Redis that rdb talks to: a single node, Sentinel, Cluster or Ring client.
// It does not contact Redis (see Ping). It returns an error naming the
// field when p is invalid (core.Policy.Validate) or an option is.
//
// It makes a client of its own from rdb's options, which Close closes
// (closing the limiter does not close rdb): one that applies a call's
// deadline to its sockets, retries nothing (Redis runs a call's script at
// most once; a Cluster client still follows MOVED and ASK) and dials once
// (a refused connection is an error at once), so no option of rdb that
// concerns timeouts or retries matters, and hooks added to rdb do not see
// the limiter's commands. go-redis logs each failed dial through its
// process-wide logger (redis.SetLogger; v9 has no per-client one): during
// an outage the limiter's client adds at most its pool size of such lines
// (10 per CPU by default), after which go-redis stops dialing until its
// own background probe gets through.
//
// Redis 5.0 or newer is needed; on a Cluster, deciding keys of several
// slots in one script call needs Redis 7.0 (older clusters get one call
// per key).
func New(rdb redis.UniversalClient, p core.Policy, opts ...Option) (*Limiter, error) {
	if rdb == nil {
		return nil, errors.New("redisstore: New needs a Redis client, got nil")
	}
	if v := reflect.ValueOf(rdb); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, fmt.Errorf("redisstore: New needs a Redis client, got a nil %T", rdb)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	c := config{prefix: defaultPrefix, timeout: defaultTimeout, denySize: defaultDenyCacheSize, maxFlights: defaultMaxFlights,
		failures: defaultBreakerFailures, interval: defaultBreakerProbeInterval, hook: func(BreakerChange) {}, local: sinceStart}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("redisstore: New: option %d is nil", i+1)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	l := &Limiter{policy: p, unnamed: p, ttlPlus: c.ttlPlus, keys: newKeyLayout(c.prefix, p), timeout: c.timeout, clock: c.clock, local: c.local}
	l.unnamed.Name = ""
	l.own = l.newSpec(l.unnamed, p.Parts() != nil)
	l.br = outage.NewBreaker(c.failures, c.interval, l.local, func(ch outage.Change) {
		c.hook(BreakerChange{From: BreakerState(ch.From), To: BreakerState(ch.To), Err: ch.Err, Policy: p})
	})
	if !c.noFallback {
		l.fb = outage.NewFallback(p, c.clock)
	}
	if c.denySize > 0 {
		l.deny = newDenyCache(c.denySize)
	}
	l.tr = transport.NewSender(rdb, transport.Options{Script: script.New(p, c.ttlPlus), Timeout: c.timeout, MaxFlights: c.maxFlights})
	return l, nil
}

// start is the origin of the limiter's local clock (the deny cache's and
// the breaker's): sinceStart reads the monotonic clock as nanoseconds since
// then. Deadlines handed to context and net are time.Time, which those
// APIs take, from time.Now (monotonic as well).
var start = time.Now()

func sinceStart() int64 { return int64(time.Since(start)) }

// Allow is AllowN with cost 1.
func (l *Limiter) Allow(ctx context.Context, key string) (core.Decision, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN decides whether a request of cost n for key may pass now and,
// if so, consumes n, in one round trip to Redis (none when the deny cache
// answers). Besides the core errors (ErrInvalidCost; a denial with
// ErrCostExceedsCapacity; ErrClosed) it returns an error wrapping
// ctx.Err() when ctx ends first. A call that Redis fails, or that the
// circuit breaker keeps from Redis, is decided by the local fallback
// (Source core.SourceFallback, no error), or, WithoutFallback, returns an
// error wrapping ErrUnavailable.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (core.Decision, error) {
	return l.allow(ctx, "AllowN", l.own, &l.policy, key, n)
}

// Peek reports what a unit-cost request for key would be told now,
// without consuming anything or writing to Redis: what the next
// AllowN(ctx, key, 1) would answer. It asks Redis while the circuit
// breaker is closed; while it is not, a denial in the deny cache answers,
// as it would answer AllowN, and otherwise the fallback. Its errors are
// AllowN's.
func (l *Limiter) Peek(ctx context.Context, key string) (core.Decision, error) {
	return l.allow(ctx, "Peek", l.own, &l.policy, key, 0)
}

// allow is AllowN, AllowPolicy (ps the spec of *p) and Peek (n = 0), the
// one path of every decision: the deny cache, then Redis if the breaker
// lets the call through, then the fallback.
func (l *Limiter) allow(ctx context.Context, op string, ps *pspec, p *core.Policy, key string, n int64) (core.Decision, error) {
	switch {
	case l.closed.Load():
		return core.Decision{}, fmt.Errorf("redisstore: %s: %w", op, core.ErrClosed)
	case n < 0 || n == 0 && op != "Peek":
		return core.Decision{}, fmt.Errorf("redisstore: %w, got %d", core.ErrInvalidCost, n)
	case ctx.Err() != nil:
		return core.Decision{Limit: p.Limit, Policy: *p}, fmt.Errorf("redisstore: %s: %w", op, ctx.Err())
	}
	cost, over := n, n > p.Capacity()
	if over {
		cost = 0 // a denial whatever the state: Redis tells the state
	}
	var sent int64
	var gen uint64
	// The deny cache holds the denials of the limiter's own policy and of
	// every policy the spec cache holds.
	cache := l.deny != nil && n <= 1 && ps.id != uncached
	switch {
	case cache:
		sent = l.local()
		e, g, ok := l.deny.get(key, ps.id, sent)
		if ok && (n == 1 || l.br.State() != outage.Closed) {
			// A Peek asks Redis while it can: the cached denial is
			// Redis's answer, and a cache answers no Peek of a store.
			return cachedDenial(e, sent, p), nil
		}
		gen = g // before the call is sent: see Reset
	case l.deny != nil && !over:
		l.deny.other(key, ps.id) // see denyCache
	}
	t, ok := l.br.Admit()
	if !ok {
		return l.unanswered(ctx, op, ps, p, key, n, l.refused(op))
	}
	d, used, err := l.decide(ctx, op, ps, p, key, cost)
	switch {
	case l.done(t, err):
		return l.unanswered(ctx, op, ps, p, key, n, err)
	case err != nil:
	case over:
		d = core.Refusal(d, n)
		err = fmt.Errorf("redisstore: %w: n=%d, %s", core.ErrCostExceedsCapacity, n, capacityText(*p))
	case cache && n == 1:
		l.remember(key, ps.id, d, used, sent, gen)
	}
	return d, err
}

// unanswered decides a call that Redis did not, for err: in the local
// fallback, or with err.
func (l *Limiter) unanswered(ctx context.Context, op string, ps *pspec, p *core.Policy, key string, n int64, err error) (core.Decision, error) {
	if l.fb != nil {
		return l.fb.Decide(ctx, op, p, ps != l.own, key, n)
	}
	d := core.Decision{Limit: p.Limit, Policy: *p}
	if n > p.Capacity() {
		return d, fmt.Errorf("redisstore: %w: n=%d, %s (key state unknown: %w)", core.ErrCostExceedsCapacity, n, capacityText(*p), err)
	}
	return d, err
}

// remember caches d, Redis's answer to a unit-cost AllowN for key under
// policy pid sent at sent, if it is a denial the cache may repeat: only
// durations the scripts compute exactly (not those of a clock that stepped
// back by decades). Not a Peek's: it leaves a key written under another
// policy there, which a unit AllowN would move (see denyCache). Nor a
// denial decided on a state converted from another policy and not written
// (used -1; see "Policies per call" in package core): that state drains at
// its own policy's rate.
func (l *Limiter) remember(key string, pid uint64, d core.Decision, used, sent int64, gen uint64) {
	if d.Allowed || d.RetryAfter <= 0 || d.Remaining != 0 || d.RetryAfter > core.MaxSpan || d.ResetAfter > core.MaxSpan || used < 0 {
		return
	}
	e := denyEntry{until: sent + int64(d.RetryAfter), resetAt: sent + int64(d.ResetAfter), at: d.At.UnixNano() - sent, pid: pid}
	if parts := d.Parts(); parts != nil {
		e.all = &allDenial{sent: sent, parts: parts}
		for i, q := range d.Policy.Parts() {
			e.until = min(e.until, sent+int64(min(steady(q, parts[i]), core.MaxSpan)))
		}
	}
	l.deny.put(key, e, sent, gen)
}

// cachedDenial is the Decision of a cached unit-cost denial at now under
// p: the same denial, its durations shortened and its At moved on by the
// time elapsed.
func cachedDenial(e denyEntry, now int64, p *core.Policy) core.Decision {
	if e.all != nil {
		el := time.Duration(now - e.all.sent)
		parts := slices.Clone(e.all.parts)
		for i := range parts {
			q := &parts[i]
			q.ResetAfter, q.At, q.Source = max(q.ResetAfter-el, 0), q.At.Add(el), core.SourceDenyCache
			if !q.Allowed {
				q.RetryAfter -= el
			}
		}
		d, _ := core.Combine(*p, parts) // the parts of p, which denied
		return d
	}
	return core.Decision{
		Limit:      p.Limit,
		ResetAfter: time.Duration(max(e.resetAt-now, 0)),
		RetryAfter: time.Duration(e.until - now),
		Policy:     *p,
		Source:     core.SourceDenyCache,
		At:         time.Unix(0, now+e.at).UTC(),
	}
}

// Reset forgets key in Redis, for every process, in this process's deny
// cache and in the fallback: once it returns without an error, this
// process's next unit-cost call for key asks Redis, even if a denial Redis
// produced before the reset is answered only afterwards. Other processes'
// deny caches keep a denial they hold until its RetryAfter passes, and
// their fallbacks their state. A Reset that returns an error may or may
// not have deleted the key in Redis; its errors are AllowN's without a
// fallback (one wrapping ErrBreakerOpen while the breaker keeps it from
// Redis: the key in Redis was not reset). Under a policy made with
// core.AllOf, it deletes the parts of the limiter's own policy and of the
// policies given with its calls that it keeps: a part of a policy that only
// other processes have used stays until it expires.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	// The fallback first, even when the breaker keeps the call from Redis
	// (admin returns the errors of a closed limiter and an ended context).
	if l.fb != nil && !l.closed.Load() && ctx.Err() == nil {
		if err := l.fb.Reset(ctx, key); err != nil {
			return fmt.Errorf("redisstore: Reset: %w", err) // closed meanwhile
		}
	}
	return l.admin(ctx, "Reset", func() error { return l.del(ctx, "Reset", key, nil) })
}

// del deletes key in Redis: under a limiter of policies made with
// core.AllOf, the parts of its own policy, those of also (Set passes its
// policy's spec, cached or not; Reset nil) and those of the policies given
// with its calls that it keeps; a part only other processes' policies have
// stays until it expires.
func (l *Limiter) del(ctx context.Context, op, key string, also *pspec) error {
	// After the DEL, whatever its outcome: a denial cached before the DEL
	// was answered (say, one Redis produced before the DEL but this process
	// received while it was in flight) is dropped, and forget turns away
	// every denial whose call was sent before now (put's gen), so one still
	// in flight cannot cache itself. A call sent after this is decided by
	// Redis after the DEL.
	defer l.deny.forget(key)
	c := l.call(l.own, key)
	c.Del = true
	if l.own.all {
		seen := map[string]bool{c.Key: true}
		for _, q := range c.More {
			seen[q.Key] = true
		}
		add := func(ps *pspec) bool {
			for _, q := range ps.parts {
				if k := l.keys.head + tagged(key) + q.tail; !seen[k] {
					seen[k] = true
					c.More = append(c.More, script.Part{Key: k})
				}
			}
			return true
		}
		if also != nil {
			add(also)
		}
		l.specs.m.Range(func(_, v any) bool { return add(v.(*pspec)) })
	}
	if err := l.wait(ctx, op, c); err != nil {
		return err
	}
	c.Release()
	return nil
}

// Ping checks that Redis answers a PING, through the limiter's own client:
// a refused connection fails at once, a Redis that does not answer by
// ctx's deadline (the limiter's timeout if ctx has none) fails then, with
// an error wrapping ErrUnavailable and the cause. New does not contact
// Redis: ping it at startup to find a mistyped address or a dead server.
// (rdb.Ping on a client with go-redis's defaults is not bounded by its
// context: its retries and socket timeouts took 5 s against a hung Redis.)
func (l *Limiter) Ping(ctx context.Context) error {
	if l.closed.Load() {
		return fmt.Errorf("redisstore: Ping: %w", core.ErrClosed)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	if err := l.tr.Ping(ctx); err != nil {
		if transport.IsTimeout(err) {
			err = fmt.Errorf("no answer from Redis by the deadline: %w", context.DeadlineExceeded)
		}
		return &storeError{op: "Ping", err: err}
	}
	return nil
}

// Policy returns the policy the limiter enforces.
func (l *Limiter) Policy() core.Policy { return l.policy }

// Close closes the limiter's own client and stops the fallback's
// goroutine, once the calls already made have their answers (or their
// round trips failed). Calls after the first do nothing; afterwards every
// call returns core.ErrClosed. It does not close the Redis client.
func (l *Limiter) Close() error {
	l.once.Do(func() {
		l.closed.Store(true)
		l.tr.Close()
		if l.fb != nil {
			_ = l.fb.Close()
		}
	})
	return nil
}

// decide runs the script for key under policy p (ps its spec) and returns
// its Decision: cost n consumed if admitted, or, for n = 0, a unit cost
// without consuming, and then the key's usage too; n < 0 sets the usage to
// -1-n.
func (l *Limiter) decide(ctx context.Context, op string, ps *pspec, p *core.Policy, key string, n int64) (core.Decision, int64, error) {
	c := l.call(ps, key)
	c.N = n
	if err := l.wait(ctx, op, c); err != nil {
		return core.Decision{Limit: p.Limit, Policy: *p}, 0, err
	}
	d, used := c.Res, c.Used
	if !ps.all {
		d.Limit, d.Policy = p.Limit, *p
		c.Release()
		return d, used, nil
	}
	// The parts, each decided with the call's cost (core.Combine): a
	// look's usage is the most used part's; one denial not to be cached
	// (-1) spoils the whole.
	var buf [core.MaxParts]core.Decision // on the stack
	parts := append(buf[:0], d)
	for _, q := range c.More {
		parts = append(parts, q.Res)
		if n == 0 {
			used = max(used, q.Used)
		} else {
			used = min(used, q.Used)
		}
	}
	c.Release()
	d, err := core.Combine(*p, parts)
	return d, used, err
}

// call returns the call for key under ps: under a limiter of policies made
// with core.AllOf, one row per part.
func (l *Limiter) call(ps *pspec, key string) *transport.Call {
	c := transport.NewCall()
	if l.clock != nil {
		c.Now = l.clock().UnixNano()
	}
	k := tagged(key)
	c.Key, c.Policy = l.keys.head+k+ps.parts[0].tail, ps.parts[0].args
	for _, q := range ps.parts[1:] {
		c.More = append(c.More, script.Part{Key: l.keys.head + k + q.tail, Policy: q.args})
	}
	return c
}

// wait sends c (transport.Sender), with the limiter's timeout from now. It
// returns an error when c has no answer by then, ctx ended first or Redis
// failed it; then c is not recycled. A call whose context has ended
// already is never sent.
func (l *Limiter) wait(ctx context.Context, op string, c *transport.Call) error {
	if err := ctx.Err(); err != nil {
		return l.gaveUp(op, c, err)
	}
	c.Deadline = time.Now().Add(l.timeout)
	switch err := l.tr.Send(ctx, c); {
	case err != nil: // core.ErrClosed as well
		return l.gaveUp(op, c, err)
	case c.Err != nil && (transport.IsTimeout(c.Err) || ctx.Err() != nil):
		// The round trip ran out of time (the limiter's timeout), or the
		// caller's context ended first: its deadline, if earlier, was the
		// round trip's.
		err := ctx.Err()
		if d, ok := ctx.Deadline(); ok && err == nil && d.Before(c.Deadline) {
			err = context.DeadlineExceeded
		}
		return l.gaveUp(op, c, err)
	case c.Err != nil:
		return &storeError{op: op, err: c.Err, rt: c.RoundTrip()}
	}
	return nil
}

// gaveUp returns the error for a call that Redis did not answer in time
// (ctxErr nil or transport.ErrDeadline), whose context ended (ctxErr), or
// that a closed limiter did not send (ctxErr core.ErrClosed).
func (l *Limiter) gaveUp(op string, c *transport.Call, ctxErr error) error {
	rt := c.RoundTrip()
	switch {
	case ctxErr != nil && ctxErr != transport.ErrDeadline:
		return fmt.Errorf("redisstore: %s: %w", op, ctxErr)
	case rt == 0:
		return &storeError{op: op, err: fmt.Errorf("not sent to Redis within %v, this process too busy to send it: %w", l.timeout, context.DeadlineExceeded)}
	case ctxErr == transport.ErrDeadline:
		// The caller stopped waiting before its round trip ended, which
		// may not even have been written yet: the round trip's sender
		// counts what became of it.
		rt = 0
	}
	return &storeError{op: op, err: fmt.Errorf("no answer from Redis within %v: %w", l.timeout, context.DeadlineExceeded), rt: rt}
}

// storeError is the error of a call that Redis failed (rt, the breaker
// counts it), or that tells nothing about Redis (rt 0): this process did
// not send it in time, or its caller stopped waiting first.
type storeError struct {
	op  string
	err error
	rt  uint64 // the round trip that failed; 0: none was sent
}

func (e *storeError) Error() string   { return "redisstore: " + e.op + ": " + e.err.Error() }
func (e *storeError) Unwrap() []error { return []error{ErrUnavailable, e.err} }

func capacityText(p core.Policy) string {
	if p.Algorithm == core.AlgTokenBucket || p.Algorithm == core.AlgLeakyBucket {
		return fmt.Sprintf("%v burst is %d", p.Algorithm, p.Burst)
	}
	return fmt.Sprintf("%v limit is %d per %v", p.Algorithm, p.Limit, p.Window)
}

// refused is the error of a call op that the breaker kept from Redis.
func (l *Limiter) refused(op string) error {
	retry, cause := l.br.Refused()
	var se *storeError
	switch {
	case errors.As(cause, &se):
		cause = se.err // without the call's name
	case cause == nil:
		cause = errors.New("none recorded")
	}
	return &storeError{op: op, err: openError{cause: cause, retry: retry}}
}

// done tells the breaker the outcome of a call it admitted with t, and
// reports whether Redis failed the call (err wraps ErrUnavailable).
func (l *Limiter) done(t outage.Ticket, err error) (failed bool) {
	// The round trip of Redis's failure; an error that is not Redis's
	// counts for nothing. errors.As would allocate on the request path.
	var rt uint64
	if err != nil {
		var se *storeError
		if failed = errors.As(err, &se); failed {
			rt = se.rt
		}
	}
	l.br.Done(t, rt, err)
	return failed
}
