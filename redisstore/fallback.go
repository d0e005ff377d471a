package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// Defaults of the circuit breaker (see "Outages" in the package docs).
const (
	defaultBreakerFailures      = 5
	defaultBreakerProbeInterval = time.Second
)

// ErrBreakerOpen is wrapped, with ErrUnavailable and the error of the
// failure that opened the breaker, by the errors of the calls that the
// circuit breaker kept from Redis and that no local fallback answered:
// every such call with WithoutFallback, and a Reset, Get or Set.
var ErrBreakerOpen = errors.New("redisstore: circuit breaker open, Redis not called")

// WithoutFallback switches off the local fallback: a call that Redis fails,
// or that the circuit breaker keeps from Redis, returns an error wrapping
// ErrUnavailable, for the adapter's failure policy (see "Outages" in the
// package docs); a cost above the policy's capacity stays a denial (its
// error wrapping core.ErrCostExceedsCapacity and ErrUnavailable).
func WithoutFallback() Option {
	return func(c *config) error { c.noFallback = true; return nil }
}

// WithBreakerFailures sets how many consecutive round trips that Redis
// fails (errors, refused connections, timeouts of commands written; a
// success in between starts the count again) open the circuit breaker. n
// must be > 0. The default is 5.
func WithBreakerFailures(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("redisstore: WithBreakerFailures must be > 0, got %d", n)
		}
		c.failures = n
		return nil
	}
}

// WithBreakerProbeInterval sets how long the open breaker waits before it
// lets one call through to Redis as a probe, and again after each probe
// that fails. d must be > 0. The default is 1s.
func WithBreakerProbeInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("redisstore: WithBreakerProbeInterval must be > 0, got %v", d)
		}
		c.interval = d
		return nil
	}
}

// WithBreakerHook sets a function called on every change of the circuit
// breaker's state, with the reason. The calls are made one at a time, in
// the order of the changes, each on the goroutine of a call to the Limiter
// (usually the one that caused the change), which waits for it: keep f
// fast. f may call the Limiter.
func WithBreakerHook(f func(BreakerChange)) Option {
	return func(c *config) error {
		if f == nil {
			return errors.New("redisstore: WithBreakerHook needs a non-nil function")
		}
		c.hook = f
		return nil
	}
}

// BreakerState is the state of the circuit breaker in front of Redis.
type BreakerState uint8

// The states of the breaker.
const (
	// BreakerClosed: calls go to Redis.
	BreakerClosed BreakerState = iota
	// BreakerOpen: Redis is not called.
	BreakerOpen
	// BreakerHalfOpen: one call, the probe, is on its way to Redis; the
	// others are not sent.
	BreakerHalfOpen
)

// String returns "closed", "open" or "half-open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("BreakerState(%d)", uint8(s))
}

// BreakerChange is one change of the breaker's state, as WithBreakerHook
// reports it.
type BreakerChange struct {
	From, To BreakerState
	// Err is the reason for opening: the Redis error of the call that
	// made the failures consecutive enough (closed to open) or of the
	// failed probe (half-open to open). It is nil when the probe interval
	// has passed (open to half-open) and when the probe succeeded
	// (half-open to closed).
	Err error
}

// newFallback returns the local fallback: an in-memory limiter of l's
// policy, on the test clock now when there is one (withClock).
func newFallback(p core.Policy, now func() time.Time) (*core.MemoryLimiter, error) {
	var opts []core.Option
	if now != nil {
		opts = append(opts, core.WithClock(now))
	}
	return core.New(p, opts...)
}

// fallback decides a call in the local fallback under p (ps nil: the
// limiter's own policy, p's Name aside): AllowN of cost n, or Peek when n
// is 0. Its errors are the in-memory limiter's: a cost above p's capacity
// (a denial) and ErrClosed (Close ran meanwhile).
func (l *Limiter) fallback(ctx context.Context, op string, ps *pspec, p *core.Policy, key string, n int64) (core.Decision, error) {
	var d core.Decision
	var err error
	switch { // core's limiter never fails on an ended context
	case n == 0:
		d, err = l.fb.Peek(ctx, key)
	case ps == nil:
		d, err = l.fb.AllowN(ctx, key, n)
	default:
		d, err = l.fb.AllowPolicy(ctx, *p, key, n)
	}
	d.Limit, d.Policy, d.Source = p.Limit, *p, core.SourceFallback
	if err != nil {
		err = fmt.Errorf("redisstore: %s in fallback: %w", op, err)
	}
	return d, err
}

// openError is the error of a call the open breaker kept from Redis:
// ErrBreakerOpen and the failure that opened it.
type openError struct {
	cause error
	retry time.Duration // until the breaker lets a probe through; 0: unknown
}

// RetryAfter is how long until the breaker lets a call through to Redis
// again, for a fail-closed answer's Retry-After (see nethttp.WithFailClosed).
func (e openError) RetryAfter() time.Duration { return e.retry }

func (e openError) Error() string {
	return "circuit breaker open, Redis not called (last failure: " + e.cause.Error() + ")"
}
func (e openError) Unwrap() []error { return []error{ErrBreakerOpen, e.cause} }

// breaker is a circuit breaker in front of Redis.
//
// Closed: every call goes to Redis; threshold consecutive failed round
// trips open it (done).
// Open: no call goes to Redis until interval has passed; then the first
// call to arrive becomes the probe (half-open). Half-open: the probe is
// the only call to Redis; its success closes the breaker, its failure
// opens it again for another interval, and a probe that says nothing
// about Redis (its caller gave up) leaves the
// breaker half-open for the next call to probe.
//
// The request path takes no lock: in the closed state, admit is one atomic
// load and a success one more; in the open state, a clock reading. Only
// failures, probes and changes take mu. Each change also starts a new
// generation (word's upper bits), so that the outcome of a call admitted
// before a change (one in flight when the breaker opened, say) never
// counts after it.
type breaker struct {
	threshold int32
	interval  int64 // ns
	now       func() int64
	hook      func(BreakerChange)
	cause     atomic.Pointer[error] // the failure that last opened it

	word    atomic.Uint64 // generation<<2 | state; written under mu
	fails   atomic.Int32  // closed: consecutive failures; written under mu
	probeAt atomic.Int64  // open: when a probe may go
	probing atomic.Bool   // half-open: the probe is out; set under mu

	mu      sync.Mutex
	lastRT  uint64          // the round trip of the last failure counted; under mu
	changes []BreakerChange // not yet given to hook; under mu
	calling sync.Mutex      // held while hook runs
}

// ticket is what admit hands a call sent to Redis: the breaker's word at
// that time, so that done can tell whether the call's outcome still
// counts.
type ticket struct {
	word  uint64
	probe bool
}

func (b *breaker) state() BreakerState { return BreakerState(b.word.Load() & 3) }

// admit reports whether a call may go to Redis now.
func (b *breaker) admit() (ticket, bool) {
	w := b.word.Load()
	switch BreakerState(w & 3) {
	case BreakerClosed:
		return ticket{word: w}, true
	case BreakerOpen:
		if b.now() < b.probeAt.Load() {
			return ticket{}, false
		}
	case BreakerHalfOpen:
		if b.probing.Load() {
			return ticket{}, false
		}
	}
	b.mu.Lock()
	w = b.word.Load()
	switch {
	case BreakerState(w&3) == BreakerOpen && b.now() >= b.probeAt.Load():
		w = b.change(w, BreakerHalfOpen, nil)
	case BreakerState(w&3) == BreakerHalfOpen && !b.probing.Load():
	default:
		b.mu.Unlock()
		return ticket{}, false
	}
	b.probing.Store(true)
	b.mu.Unlock()
	b.report()
	return ticket{word: w, probe: true}, true
}

// done records the outcome of a call admit let through: err as the call
// returned it. It reports whether Redis failed the call (err wraps
// ErrUnavailable). The calls of one round trip count as one failure; a
// call whose deadline passed before it was sent counts as none: it tells
// that this process was busy, not that Redis failed.
func (b *breaker) done(t ticket, err error) (failed bool) {
	if err == nil {
		if !t.probe && b.fails.Load() == 0 {
			return false // the request path: nothing to change
		}
		b.mu.Lock()
		changed := false
		if w := b.word.Load(); w == t.word {
			if t.probe {
				b.change(w, BreakerClosed, nil)
				changed = true
			} else {
				b.fails.Store(0)
			}
		}
		b.mu.Unlock()
		if changed {
			b.report()
		}
		return false
	}
	var se *storeError
	if failed = errors.As(err, &se); !failed || se.rt == 0 {
		// Nothing learnt about Redis: the caller (its context) or Close
		// ended the call, or it was never sent.
		if t.probe {
			b.mu.Lock()
			if b.word.Load() == t.word {
				b.probing.Store(false)
			}
			b.mu.Unlock()
		}
		return failed
	}
	b.mu.Lock()
	changed := false
	if w := b.word.Load(); w == t.word && (t.probe || se.rt != b.lastRT) {
		b.lastRT = se.rt
		if t.probe || b.fails.Load()+1 >= b.threshold {
			cause := se.err // without the call's name
			b.cause.Store(&cause)
			b.probeAt.Store(b.now() + b.interval)
			b.change(w, BreakerOpen, err)
			changed = true
		} else {
			b.fails.Add(1)
		}
	}
	b.mu.Unlock()
	if changed {
		b.report()
	}
	return true
}

// refused is the error of a call op that admit kept from Redis.
func (b *breaker) refused(op string) error {
	cause := errors.New("none recorded")
	if c := b.cause.Load(); c != nil {
		cause = *c
	}
	var retry time.Duration
	if b.state() == BreakerOpen {
		retry = time.Duration(max(b.probeAt.Load()-b.now(), 0))
	}
	return &storeError{op: op, err: openError{cause: cause, retry: retry}}
}

// change moves the breaker from the state in w to to, under mu, and
// queues the change for the hook. It returns the new word.
func (b *breaker) change(w uint64, to BreakerState, err error) uint64 {
	b.fails.Store(0)
	b.probing.Store(false)
	next := (w>>2+1)<<2 | uint64(to)
	b.word.Store(next)
	if b.hook != nil {
		b.changes = append(b.changes, BreakerChange{From: BreakerState(w & 3), To: to, Err: err})
	}
	return next
}

// report gives the queued changes to the hook, in order, one call at a
// time. A goroutine that finds another one calling the hook leaves its
// changes to it (which also lets the hook call the Limiter without
// deadlocking); the check after unlocking catches a change queued just
// before.
func (b *breaker) report() {
	if b.hook == nil {
		return
	}
	for b.calling.TryLock() {
		b.drain()
		b.mu.Lock()
		more := len(b.changes) > 0
		b.mu.Unlock()
		if !more {
			return
		}
	}
}

// drain calls the hook for every queued change; the caller holds calling,
// which drain releases, even when the hook panics.
func (b *breaker) drain() {
	defer b.calling.Unlock()
	for {
		b.mu.Lock()
		if len(b.changes) == 0 {
			b.mu.Unlock()
			return
		}
		c := b.changes[0]
		b.changes = b.changes[1:]
		b.mu.Unlock()
		b.hook(c)
	}
}
