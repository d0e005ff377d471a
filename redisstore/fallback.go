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

// Defaults of the fallback's circuit breaker (see WithFallback).
const (
	DefaultBreakerFailures      = 5
	DefaultBreakerProbeInterval = time.Second
)

// ErrBreakerOpen is wrapped by the errors of the calls that the circuit
// breaker of WithFallback kept from Redis and that the fallback does not
// answer: a Reset (the key in Redis was not reset), and the denial of a
// cost above the policy's capacity, along with core.ErrCostExceedsCapacity
// (the key's state in Redis is unknown).
var ErrBreakerOpen = errors.New("redisstore: circuit breaker open, Redis not called")

// FallbackOption configures WithFallback.
type FallbackOption func(*fallbackConfig) error

type fallbackConfig struct {
	policy   core.Policy
	failures int
	interval time.Duration
	hook     func(BreakerChange)
	core     []core.Option
}

// WithFallback keeps limiting while Redis is unavailable, with an
// in-memory limiter of this process (core.New) enforcing p, behind a
// circuit breaker. p is what this process alone may admit, typically the
// shared limit divided by the number of app servers: 100 per second shared
// by four servers is 25 per second each while Redis is down. Without
// WithFallback, a Redis failure is returned as an error, which an adapter
// answers by its failure policy (open or closed). With it:
//
//   - A call that Redis fails (its error would wrap ErrUnavailable: an
//     error reply, a broken connection, no answer within WithTimeout) is
//     decided by the fallback, and counted there even if Redis had
//     counted it too (see "Timeouts and errors" in the package docs).
//     BreakerFailures consecutive failures open the breaker: Redis is then
//     not called, and the fallback decides every call at once.
//   - Every BreakerProbeInterval the open breaker lets one ordinary call
//     through to Redis as a probe (half-open), the fallback deciding the
//     others meanwhile. An answer closes the breaker; a failure, decided
//     by the fallback, keeps it open for another interval.
//   - A fallback decision has Source core.SourceFallback, p as its Policy
//     and Limit, and a nil error (or, as in memory, a denial with
//     core.ErrCostExceedsCapacity for a cost above p's capacity): adapters
//     serve it like any decision, and their hooks do not see the Redis
//     error. Count Decision.Source in a hook (nethttp.WithHook), or use
//     OnBreakerChange.
//   - A call whose context ends first (the caller's cancellation, or its
//     own deadline before WithTimeout's) is not a Redis failure: it returns
//     its error, undecided, and the breaker does not count it.
//   - Peek is answered the same way. Reset also forgets the key in the
//     fallback; while the breaker is open it returns an error wrapping
//     ErrBreakerOpen, because the key in Redis was not reset. A denial in
//     the deny cache still answers: it is Redis's own. Close closes the
//     fallback too.
//   - AllowPolicy is decided by the fallback under p too, whatever the
//     call's policy: a fallback decision's Limit and Policy are p's. Get
//     and Set are not answered by the fallback: while Redis fails them
//     or the breaker is open they return an error wrapping ErrUnavailable
//     (and ErrBreakerOpen when the breaker kept them from Redis), and
//     they count for the breaker as Reset does.
//   - The two states stay apart: when the breaker closes, Redis's state
//     resumes, and what only the fallback counted is not written back. The
//     fallback keeps its state across outages, until it recovers under p.
func WithFallback(p core.Policy, opts ...FallbackOption) Option {
	return func(c *config) error {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("redisstore: WithFallback: %w", err)
		}
		fc := &fallbackConfig{policy: p, failures: DefaultBreakerFailures, interval: DefaultBreakerProbeInterval}
		for _, o := range opts {
			if o == nil {
				return errors.New("redisstore: WithFallback: nil FallbackOption")
			}
			if err := o(fc); err != nil {
				return err
			}
		}
		c.fallback = fc
		return nil
	}
}

// BreakerFailures sets how many consecutive failed calls to Redis (errors
// or timeouts; a success in between starts the count again) open the
// circuit breaker. n must be > 0. The default is 5.
func BreakerFailures(n int) FallbackOption {
	return func(c *fallbackConfig) error {
		if n <= 0 {
			return fmt.Errorf("redisstore: BreakerFailures must be > 0, got %d", n)
		}
		c.failures = n
		return nil
	}
}

// BreakerProbeInterval sets how long the open breaker waits before it
// lets one call through to Redis as a probe, and again after each probe
// that fails. d must be > 0. The default is 1s.
func BreakerProbeInterval(d time.Duration) FallbackOption {
	return func(c *fallbackConfig) error {
		if d <= 0 {
			return fmt.Errorf("redisstore: BreakerProbeInterval must be > 0, got %v", d)
		}
		c.interval = d
		return nil
	}
}

// OnBreakerChange sets a function called on every change of the breaker's
// state, with the reason. The calls are made one at a time, in the order
// of the changes, each on the goroutine of a call to the Limiter (usually
// the one that caused the change), which waits for it: keep f fast. f may
// call the Limiter.
func OnBreakerChange(f func(BreakerChange)) FallbackOption {
	return func(c *fallbackConfig) error {
		if f == nil {
			return errors.New("redisstore: OnBreakerChange needs a non-nil function")
		}
		c.hook = f
		return nil
	}
}

// FallbackLimiterOptions passes options to the fallback's in-memory
// limiter, core.New: core.WithMaxKeys to bound its memory, for instance.
// The default is core's.
func FallbackLimiterOptions(opts ...core.Option) FallbackOption {
	return func(c *fallbackConfig) error {
		c.core = append(c.core, opts...)
		return nil
	}
}

// BreakerState is the state of the circuit breaker of a fallback.
type BreakerState uint8

// The states of the breaker.
const (
	// BreakerClosed: calls go to Redis; one that fails is decided by
	// the fallback.
	BreakerClosed BreakerState = iota
	// BreakerOpen: Redis is not called; the fallback decides every call.
	BreakerOpen
	// BreakerHalfOpen: one call, the probe, is on its way to Redis; the
	// fallback decides the others.
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

// BreakerChange is one change of the breaker's state, as OnBreakerChange
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

// BreakerState returns the state of the fallback's circuit breaker:
// BreakerClosed for a limiter without WithFallback.
func (l *Limiter) BreakerState() BreakerState {
	if l.fb == nil {
		return BreakerClosed
	}
	return l.fb.br.state()
}

// fallback is the in-memory limiter and the breaker in front of Redis.
type fallback struct {
	l   *Limiter
	mem *core.MemoryLimiter
	br  *breaker
}

// newFallback builds the fallback of l. now is the test clock of the
// scripts (withClock), which the breaker and the in-memory limiter then
// read too; nil in production.
func newFallback(l *Limiter, c *fallbackConfig, now func() time.Time) (*fallback, error) {
	opts := c.core
	if now != nil {
		opts = append(opts[:len(opts):len(opts)], core.WithClock(now))
	}
	mem, err := core.New(c.policy, opts...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: WithFallback: %w", err)
	}
	br := &breaker{threshold: int32(min(c.failures, 1<<30)), interval: int64(c.interval), hook: c.hook}
	if now != nil {
		br.now = func() int64 { return now().UnixNano() }
	} else {
		base := time.Now()
		br.now = func() int64 { return int64(time.Since(base)) } // monotonic
	}
	return &fallback{l: l, mem: mem, br: br}, nil
}

// allow is AllowN (ps nil) and AllowPolicy (ps the spec of *p) with a
// fallback: Redis while it answers, the in-memory limiter when it fails or
// the breaker is open. The in-memory limiter decides under its own policy,
// whatever p.
func (f *fallback) allow(ctx context.Context, op string, ps *pspec, p *core.Policy, key string, n int64) (core.Decision, error) {
	l := f.l
	if n <= 0 || l.closed.Load() || ctx.Err() != nil {
		// The error as without a fallback (an ended context sends
		// nothing), and nothing for the breaker to learn.
		return l.allow(ctx, op, ps, p, key, n)
	}
	if n > p.Capacity() {
		// A denial whatever the state. Redis, when it is asked, tells
		// the key's state; the breaker does not count such rare calls.
		if f.br.state() == BreakerClosed {
			return l.allow(ctx, op, ps, p, key, n)
		}
		d := core.Decision{Limit: p.Limit, Policy: *p, Source: core.SourceFallback}
		return d, fmt.Errorf("redisstore: %w: n=%d, %s (key state unknown: %w)", core.ErrCostExceedsCapacity, n, capacityText(*p), ErrBreakerOpen)
	}
	if f.br.state() != BreakerClosed {
		if d, ok := f.cached(ps, p, key, n); ok {
			return d, nil
		}
	}
	t, ok := f.br.admit()
	if !ok {
		return f.local(op, key, n)
	}
	d, err := l.allow(ctx, op, ps, p, key, n)
	if f.br.done(t, d.Source, err) {
		return f.local(op, key, n)
	}
	return d, err
}

// cached answers a unit-cost call from the deny cache, as allowN would,
// while the breaker is not closed: a denial Redis gave stands, and a probe
// should be a call that asks Redis. (While it is closed, allowN looks the
// key up itself, and done ignores the answers marked SourceDenyCache.)
func (f *fallback) cached(ps *pspec, p *core.Policy, key string, n int64) (core.Decision, bool) {
	l := f.l
	if l.deny == nil || n != 1 || !ps.cacheable() {
		return core.Decision{}, false
	}
	now := l.local()
	e, _, ok := l.deny.get(key, ps.pid(), now)
	if !ok {
		return core.Decision{}, false
	}
	return cachedDenial(e, now, p), true
}

// peek is Peek with a fallback.
func (f *fallback) peek(ctx context.Context, key string) (core.Decision, error) {
	if f.l.closed.Load() || ctx.Err() != nil {
		return f.l.peek(ctx, key) // the error, without Redis
	}
	t, ok := f.br.admit()
	if !ok {
		return f.local("Peek", key, 0)
	}
	d, err := f.l.peek(ctx, key)
	if f.br.done(t, core.SourceStore, err) {
		return f.local("Peek", key, 0)
	}
	return d, err
}

// reset is Reset with a fallback: the key is forgotten in the fallback
// too, whatever Redis does.
func (f *fallback) reset(ctx context.Context, key string) error {
	if f.l.closed.Load() || ctx.Err() != nil {
		return f.l.reset(ctx, key) // the error, without Redis
	}
	if err := f.mem.Reset(ctx, key); err != nil {
		return fmt.Errorf("redisstore: Reset: %w", err) // closed meanwhile
	}
	t, ok := f.br.admit()
	if !ok {
		return fmt.Errorf("redisstore: Reset: %w", ErrBreakerOpen)
	}
	err := f.l.reset(ctx, key)
	f.br.done(t, core.SourceStore, err)
	return err
}

// local decides in the fallback: AllowN of cost n, or Peek when n is 0.
// Its errors are the in-memory limiter's: a cost above the fallback
// policy's capacity (a denial) and ErrClosed (Close ran meanwhile).
func (f *fallback) local(op, key string, n int64) (core.Decision, error) {
	var d core.Decision
	var err error
	if n == 0 {
		d, err = f.mem.Peek(context.Background(), key)
	} else {
		d, err = f.mem.AllowN(context.Background(), key, n)
	}
	d.Source = core.SourceFallback
	if err != nil {
		err = fmt.Errorf("redisstore: %s in fallback: %w", op, err)
	}
	return d, err
}

func (f *fallback) close() { _ = f.mem.Close() }

// breaker is a circuit breaker in front of Redis.
//
// Closed: every call goes to Redis; threshold consecutive failures open it.
// Open: no call goes to Redis until interval has passed; then the first
// call to arrive becomes the probe (half-open). Half-open: the probe is
// the only call to Redis; its success closes the breaker, its failure
// opens it again for another interval, and a probe that says nothing
// about Redis (its caller gave up, or the deny cache answered it) leaves
// the breaker half-open for the next call to probe.
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

	word    atomic.Uint64 // generation<<2 | state; written under mu
	fails   atomic.Int32  // closed: consecutive failures; written under mu
	probeAt atomic.Int64  // open: when a probe may go
	probing atomic.Bool   // half-open: the probe is out; set under mu

	mu      sync.Mutex
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

// done records the outcome of a call admit let through: err and src as
// the call returned them. It reports whether Redis failed the call (err
// wraps ErrUnavailable), which the fallback then decides.
func (b *breaker) done(t ticket, src core.Source, err error) (failed bool) {
	switch {
	case err == nil && src == core.SourceDenyCache,
		err != nil && !errors.Is(err, ErrUnavailable):
		// Nothing learnt about Redis: not asked (the deny cache took a
		// denial just cached by another call), or the caller (its
		// context) or Close ended the call.
		if t.probe {
			b.mu.Lock()
			if b.word.Load() == t.word {
				b.probing.Store(false)
			}
			b.mu.Unlock()
		}
		return false
	case err == nil:
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
	b.mu.Lock()
	changed := false
	if w := b.word.Load(); w == t.word {
		if t.probe || b.fails.Load()+1 >= b.threshold {
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
