package core

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// MemoryLimiter is the in-memory [Limiter] and [PolicyLimiter]: one policy
// applied to any number of keys, each with its own state. Build one with
// New; the zero value is not usable. Deciding for a key already held takes
// no shared lock and allocates nothing. Keys idle for longer than
// [Policy.Recovery] are evicted by a background goroutine, which Close
// stops; dropping them never changes a decision.
type MemoryLimiter struct {
	// One of these is set, by algorithm, for decisions: concrete types
	// rather than an interface, so that the calls are direct and the key
	// and policy never escape. keys is the same registry, for the rest.
	gcra       *registry[gcraState, *gcraState]
	fixed      *registry[fixedState, *fixedState]
	sliding    *registry[slidingState, *slidingState]
	allGcra    *allOf[gcraState, *gcraState] // a policy made with AllOf (composite.go)
	allFixed   *allOf[fixedState, *fixedState]
	allSliding *allOf[slidingState, *slidingState]
	keys       keys
	rule       rule
	rules      ruleCache    // of the policies given with calls (AllowPolicy)
	testNow    func() int64 // WithClock, made monotonic; nil for the real clock
	// testPause, when set (tests only), runs after a test clock is read:
	// it lets a test hold a request between its clock reading and its
	// decision.
	testPause func()
	base      time.Time // the real clock: monotonic time since base ...
	baseNs    int64     // ... plus base's Unix time
	closed    atomic.Bool
	stop      chan struct{}
	done      chan struct{}
	once      sync.Once
}

// Option configures New.
type Option func(*config) error

type config struct {
	maxKeys int
	clock   func() time.Time
	sweep   time.Duration
}

// WithMaxKeys bounds the number of keys held (n > 0), so that a flood of
// distinct keys cannot exhaust memory. The bound is kept per shard, so
// eviction starts slightly before n keys. The default is 1,000,000 keys
// (about 70 MB); for the sliding window, as many as fit in 256 MiB at its
// bucket count (every part's, under AllOf), at most 1,000,000. Size n above the keys you expect per
// Window.
//
// A new key that finds its shard full evicts idle keys first, then the
// least-used key that is not currently limited: a limited key is never
// evicted, so flooding keys cannot free an abuser. Eviction never hands
// quota back: every key that arrives in the shard afterwards starts at
// least as used as the keys it evicted (under each policy given per call,
// converted to its own), until that usage has recovered. Below about
// n × Limit / Window new keys per second that is a few units at most;
// above it, it grows by about one unit per n new keys, and a long flood
// leaves newcomers limited until it stops and their usage recovers. If
// every key it samples is limited, the new key is limited together with the
// other keys that found no room, as one key, until room appears; its
// RetryAfter also waits for the key its retry will evict (it starts from
// that key's usage too), except under a sliding window, whose retry may
// be denied again while that key recovers. A shard
// keeps this for at most 16 policies: beyond that, a key of a further
// policy is not evicted while in use, and one that finds its shard full of
// limited keys is denied until one of the 16 has recovered (its RetryAfter
// is when the first has: its retry may be denied again by the others).
func WithMaxKeys(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("core: WithMaxKeys must be > 0, got %d", n)
		}
		c.maxKeys = n
		return nil
	}
}

// WithClock replaces the clock, for tests; times before 1970 are not
// supported. The default is the process's monotonic clock, so a wall-clock
// step never moves the limiter's time. A clock that steps backwards is
// taken to stand still at the latest instant seen.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return fmt.Errorf("core: WithClock needs a non-nil function")
		}
		c.clock = now
		return nil
	}
}

// WithSweepInterval sets how often the background goroutine evicts idle
// keys. The default is the policy's Recovery time, clamped to [1s, 1m].
func WithSweepInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("core: WithSweepInterval must be > 0, got %v", d)
		}
		c.sweep = d
		return nil
	}
}

// New returns an in-memory limiter enforcing p for every key, or an error
// naming the field when p (see Policy.Validate) or an option is invalid (a
// nil option too). It starts one goroutine that evicts idle keys; Close
// stops it.
func New(p Policy, opts ...Option) (*MemoryLimiter, error) {
	r, err := compile(p)
	if err != nil {
		return nil, err
	}
	// The defaults, which options replace (they refuse zero values).
	c := config{maxKeys: defaultMaxKeys(p), sweep: min(max(p.Recovery(), time.Second), time.Minute)}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("core: New: option %d is nil", i+1)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	now := time.Now()
	l := &MemoryLimiter{rule: r, base: now, baseNs: now.UnixNano(), stop: make(chan struct{}), done: make(chan struct{})}
	if c.clock != nil {
		l.testNow = monotonic(c.clock)
	}
	switch all := len(l.rule.parts) > 0; {
	case all && p.Algorithm == AlgFixedWindow:
		l.allFixed = newRegistry[allState[fixedState, *fixedState]](&l.rule, l.resolve, c.maxKeys)
		l.keys = l.allFixed
	case all && p.Algorithm == AlgSlidingWindow:
		l.allSliding = newRegistry[allState[slidingState, *slidingState]](&l.rule, l.resolve, c.maxKeys)
		l.keys = l.allSliding
	case all:
		l.allGcra = newRegistry[allState[gcraState, *gcraState]](&l.rule, l.resolve, c.maxKeys)
		l.keys = l.allGcra
	case p.Algorithm == AlgTokenBucket || p.Algorithm == AlgLeakyBucket:
		l.gcra = newRegistry[gcraState](&l.rule, l.resolve, c.maxKeys)
		l.keys = l.gcra
	case p.Algorithm == AlgFixedWindow:
		l.fixed = newRegistry[fixedState](&l.rule, l.resolve, c.maxKeys)
		l.keys = l.fixed
	default:
		l.sliding = newRegistry[slidingState](&l.rule, l.resolve, c.maxKeys)
		l.keys = l.sliding
	}
	go l.janitor(c.sweep)
	return l, nil
}

// MustNew is New for policies and options written in the program: it panics
// with New's error. Use New for policies read from configuration.
func MustNew(p Policy, opts ...Option) *MemoryLimiter {
	l, err := New(p, opts...)
	if err != nil {
		panic(err)
	}
	return l
}

// clock returns now in Unix nanoseconds. The real clock reads only the
// monotonic clock (one vDSO call, where time.Now makes two), inline rather
// than through a function value: it is a large share of a decision's time.
func (l *MemoryLimiter) clock() int64 {
	if l.testNow != nil {
		now := l.testNow()
		if l.testPause != nil {
			l.testPause()
		}
		return now
	}
	return l.baseNs + int64(time.Since(l.base))
}

// monotonic wraps a test clock so that it never goes backwards: otherwise a
// key evicted at t could be recreated, full, at an earlier t.
func monotonic(clock func() time.Time) func() int64 {
	var last atomic.Int64
	return func() int64 {
		t := clock().UnixNano()
		for {
			seen := last.Load()
			if t <= seen {
				return seen
			}
			if last.CompareAndSwap(seen, t) {
				return t
			}
		}
	}
}

func defaultMaxKeys(p Policy) int {
	const budget = 256 << 20
	if p.Algorithm != AlgSlidingWindow {
		return 1_000_000
	}
	parts := p.Parts()
	if parts == nil {
		parts = []Policy{p}
	}
	perKey := int64(160 - 128) // the entry, its key, its slot and, with each part's ring, its state
	for _, q := range parts {
		perKey += 128 + 4*(q.Buckets+1)
	}
	return int(min(budget/perKey, 1_000_000))
}

// Allow is AllowN with cost 1.
func (l *MemoryLimiter) Allow(ctx context.Context, key string) (Decision, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN is [Limiter.AllowN]. Its only errors are ErrInvalidCost,
// ErrCostExceedsCapacity and ErrClosed; ctx is not used.
func (l *MemoryLimiter) AllowN(_ context.Context, key string, n int64) (d Decision, err error) {
	if n <= 0 || n > l.rule.capacity || l.closed.Load() {
		return l.refuse(&l.rule, &l.rule.policy, key, n)
	}
	now := l.clock()
	v, pv, _, _ := l.decide(&l.rule, &l.rule.policy, key, now, n, true)
	l.rule.fill(&d, v, pv, now)
	return d, nil
}

// Peek is [Limiter.Peek]. A key not held is not stored.
func (l *MemoryLimiter) Peek(_ context.Context, key string) (d Decision, err error) {
	if l.closed.Load() {
		return Decision{}, ErrClosed
	}
	now := l.clock()
	v, pv, _, _ := l.decide(&l.rule, &l.rule.policy, key, now, 1, false)
	l.rule.fill(&d, v, pv, now)
	return d, nil
}

// Reset forgets key: its next request has the full quota, even in a shard
// that a flood of keys has filled (see WithMaxKeys).
func (l *MemoryLimiter) Reset(_ context.Context, key string) error {
	if l.closed.Load() {
		return ErrClosed
	}
	l.keys.reset(key, l.clock())
	return nil
}

// Policy returns the policy the limiter enforces.
func (l *MemoryLimiter) Policy() Policy { return l.rule.policy }

// Len returns the number of keys currently held.
func (l *MemoryLimiter) Len() int { return l.keys.len() }

// decide is the registry's decide (registry.go), for the limiter's
// algorithm.
func (l *MemoryLimiter) decide(r *rule, p *Policy, key string, now, n int64, consume bool) (verdict, *verdict, *rule, error) {
	switch {
	case l.gcra != nil:
		return l.gcra.decide(r, p, key, now, n, consume)
	case l.fixed != nil:
		return l.fixed.decide(r, p, key, now, n, consume)
	case l.sliding != nil:
		return l.sliding.decide(r, p, key, now, n, consume)
	case l.allGcra != nil:
		return l.allGcra.decide(r, p, key, now, n, consume)
	case l.allFixed != nil:
		return l.allFixed.decide(r, p, key, now, n, consume)
	}
	return l.allSliding.decide(r, p, key, now, n, consume)
}

func (l *MemoryLimiter) sweep() { l.keys.sweep(l.clock()) }

// Wait blocks until a request of cost n for key is admitted, and then for
// its Decision.Delay, or returns an error wrapping ctx's when ctx ends
// first or would end before the admission (nothing is then consumed; during
// the delay, the capacity stays consumed). It uses real timers, whatever
// WithClock says.
func (l *MemoryLimiter) Wait(ctx context.Context, key string, n int64) error {
	for {
		d, err := l.AllowN(ctx, key, n)
		if err != nil {
			return err
		}
		wait := d.RetryAfter + d.Delay // AllowN sets one of them at most
		if wait <= 0 {
			if d.Allowed {
				return nil
			}
			continue // the admission instant is now: ask again
		}
		if deadline, ok := ctx.Deadline(); ok && !d.Allowed && time.Until(deadline) < wait {
			return fmt.Errorf("core: Wait(n=%d) needs %v, beyond the context deadline: %w", n, wait, context.DeadlineExceeded)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
			if d.Allowed {
				return nil
			}
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// Close stops the eviction goroutine. Calls after the first do nothing;
// afterwards every method returns ErrClosed (Len and Policy still answer).
func (l *MemoryLimiter) Close() error {
	l.once.Do(func() {
		l.closed.Store(true)
		close(l.stop)
		<-l.done
	})
	return nil
}

func capacityText(p Policy) string {
	if p.Algorithm == AlgTokenBucket || p.Algorithm == AlgLeakyBucket {
		return fmt.Sprintf("%v burst is %d", p.Algorithm, p.Burst)
	}
	return fmt.Sprintf("%v limit is %d per %v", p.Algorithm, p.Limit, p.Window)
}

// refuse answers the calls AllowN and AllowPolicy (under r, or p's rule)
// do not decide: a closed limiter, a cost <= 0, and a cost that can never
// pass, which is a denial reporting the key's state as Peek would, with no
// RetryAfter, and the key left as it is (under its own policy), as for
// every call that errs. Kept out of AllowN so that the request path stays
// small.
func (l *MemoryLimiter) refuse(r *rule, p *Policy, key string, n int64) (d Decision, err error) {
	switch {
	case l.closed.Load():
		return Decision{}, ErrClosed
	case n <= 0:
		return Decision{}, fmt.Errorf("%w, got %d", ErrInvalidCost, n)
	}
	now := l.clock()
	v, pv, r, err := l.decide(r, p, key, now, 1, false)
	if err != nil {
		return Decision{}, err
	}
	r.fill(&d, v, pv, now)
	return Refusal(d, n), fmt.Errorf("%w: n=%d, %v", ErrCostExceedsCapacity, n, capacityText(r.policy))
}

func (l *MemoryLimiter) janitor(every time.Duration) {
	defer close(l.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.sweep()
		}
	}
}
