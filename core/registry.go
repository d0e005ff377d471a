package core

import (
	"context"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MemoryLimiter is the in-memory Limiter: one policy applied to any number
// of keys, each with its own state, in a sharded map. It is safe for
// simultaneous use by multiple goroutines. Build one with New; the zero value
// is not usable.
//
// Deciding for a key already present takes a shard's read lock and one
// CompareAndSwap (a small per-key mutex for the sliding window) and allocates
// nothing. A new key takes the shard's write lock once.
//
// Idle keys are evicted by a background goroutine, which Close stops: a key
// idle for longer than its policy's Recovery time is the same as a key never
// seen, so dropping it never changes a decision.
type MemoryLimiter struct {
	keys   keyed
	rule   rule
	clock  func() int64
	closed atomic.Bool
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

var _ Limiter = (*MemoryLimiter)(nil)

// keyed is the per-key store of one algorithm (a registry instantiated for
// its state type).
type keyed interface {
	decide(key string, now, n int64, consume bool) Decision
	reset(key string)
	len() int
	sweep(now int64)
}

// Option configures New.
type Option func(*config) error

type config struct {
	maxKeys int
	clock   func() time.Time
	sweep   time.Duration
}

// WithMaxKeys bounds the number of keys held, so that a flood of distinct
// keys cannot exhaust memory. n must be > 0.
//
// When a new key arrives and its shard is full, the limiter first evicts idle
// keys (lossless), then the least-used key that is not currently limited
// (the one closest to its full quota: that client may get some of its quota
// back early, never less). A key that is currently limited is never evicted,
// so flooding keys cannot free an abuser. Only if every sampled key is
// limited does the new key share an overflow state with the other keys that
// found no room in its shard: such keys are limited together, as one key, by
// the same policy, until room appears. The bound is enforced per shard (1/256
// of n each, for n >= 16384), so eviction starts slightly before n keys.
//
// The default is 1,000,000 keys for the token bucket, leaky bucket and fixed
// window (about 70 MB), and for the sliding window as many as fit in 256 MiB
// at its bucket count, at most 1,000,000.
func WithMaxKeys(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("core: WithMaxKeys must be > 0, got %d", n)
		}
		c.maxKeys = n
		return nil
	}
}

// WithClock replaces the clock, for tests: every decision reads now from it.
// The default is the process's monotonic clock anchored to the wall clock at
// New, so a wall-clock step never moves the limiter's time. Times before
// 1970 are not supported. A clock that steps backwards never adds capacity:
// the limiter keeps using the latest instant it has seen.
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

// New returns an in-memory limiter enforcing p for every key. It returns an
// error naming the field when p is invalid (see Policy.Validate) or an option
// is, and starts one goroutine that evicts idle keys; call Close to stop it.
func New(p Policy, opts ...Option) (*MemoryLimiter, error) {
	r, err := compile(p)
	if err != nil {
		return nil, err
	}
	var c config
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	if c.maxKeys == 0 {
		c.maxKeys = defaultMaxKeys(p)
	}
	if c.sweep == 0 {
		c.sweep = min(max(p.Recovery(), time.Second), time.Minute)
	}
	l := &MemoryLimiter{rule: r, stop: make(chan struct{}), done: make(chan struct{})}
	if c.clock != nil {
		l.clock = monotonic(c.clock)
	} else {
		base := time.Now()
		baseNs := base.UnixNano()
		l.clock = func() int64 { return baseNs + int64(time.Since(base)) }
	}
	switch p.Algorithm {
	case AlgTokenBucket, AlgLeakyBucket:
		l.keys = newRegistry(&l.rule, c.maxKeys, func() *gcraState { return new(gcraState) })
	case AlgFixedWindow:
		l.keys = newRegistry(&l.rule, c.maxKeys, func() *fixedState { return new(fixedState) })
	case AlgSlidingWindow:
		l.keys = newRegistry(&l.rule, c.maxKeys, func() *slidingState { return newSlidingState(&l.rule) })
	}
	go l.janitor(c.sweep)
	return l, nil
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
	if p.Algorithm == AlgSlidingWindow {
		perKey := int64(160 + 4*(p.Buckets+1))
		return int(min(budget/perKey, 1_000_000))
	}
	return 1_000_000
}

// Allow is AllowN with cost 1.
func (l *MemoryLimiter) Allow(ctx context.Context, key string) (Decision, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN decides whether a request of cost n for key may pass now and, if
// so, consumes n. It returns an error only for an invalid cost
// (ErrInvalidCost), a cost above the policy's capacity (a denial and
// ErrCostExceedsCapacity) or a closed limiter (ErrClosed). ctx is not used:
// an in-memory decision never blocks.
func (l *MemoryLimiter) AllowN(_ context.Context, key string, n int64) (Decision, error) {
	if err := l.check(n); err != nil {
		return l.refuse(key, n, err)
	}
	return l.keys.decide(key, l.clock(), n, true), nil
}

// Peek reports what a unit-cost request for key would be told now, without
// consuming anything. A key never seen is reported full and is not stored.
func (l *MemoryLimiter) Peek(_ context.Context, key string) (Decision, error) {
	if l.closed.Load() {
		return Decision{}, ErrClosed
	}
	return l.keys.decide(key, l.clock(), 1, false), nil
}

// Reset forgets key, so that its next request is treated as its first.
func (l *MemoryLimiter) Reset(_ context.Context, key string) error {
	if l.closed.Load() {
		return ErrClosed
	}
	l.keys.reset(key)
	return nil
}

// Policy returns the policy the limiter enforces.
func (l *MemoryLimiter) Policy() Policy { return l.rule.policy }

// Len returns the number of keys currently held.
func (l *MemoryLimiter) Len() int { return l.keys.len() }

// Wait blocks until a request of cost n for key is admitted, then returns
// nil, or returns an error when ctx ends first (or would end before the
// earliest admission, in which case nothing is consumed). For an admitted
// leaky-bucket request it also waits out Decision.Delay; if ctx ends during
// that delay the capacity stays consumed, as the request was admitted. Waiting
// uses real timers, whatever WithClock says.
func (l *MemoryLimiter) Wait(ctx context.Context, key string, n int64) error {
	for {
		d, err := l.AllowN(ctx, key, n)
		if err != nil {
			return err
		}
		wait := d.RetryAfter
		if d.Allowed {
			wait = d.Delay
		}
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

func (l *MemoryLimiter) check(n int64) error {
	switch {
	case l.closed.Load():
		return ErrClosed
	case n <= 0:
		return fmt.Errorf("%w, got %d", ErrInvalidCost, n)
	case n > l.rule.policy.Capacity():
		return fmt.Errorf("%w: n=%d, %v", ErrCostExceedsCapacity, n, capacityText(l.rule.policy))
	}
	return nil
}

func capacityText(p Policy) string {
	if p.Algorithm == AlgTokenBucket || p.Algorithm == AlgLeakyBucket {
		return fmt.Sprintf("%v burst is %d", p.Algorithm, p.Burst)
	}
	return fmt.Sprintf("%v limit is %d per %v", p.Algorithm, p.Limit, p.Window)
}

// refuse answers a call that check rejected: a cost that can never pass is
// a denial reporting the key's current state, with no RetryAfter.
func (l *MemoryLimiter) refuse(key string, n int64, err error) (Decision, error) {
	if n <= 0 || l.closed.Load() {
		return Decision{}, err
	}
	d := l.keys.decide(key, l.clock(), 1, false)
	d.Allowed, d.RetryAfter = false, 0
	return d, err
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
			l.keys.sweep(l.clock())
		}
	}
}

// stateOf is what the registry needs of a per-key state type.
type stateOf[S any] interface {
	*S
	decide(r *rule, now, n int64, consume bool) Decision
	idle(r *rule, now int64) bool
}

// registry holds the keys of one limiter in shards, each a map under a
// read-write lock: requests for present keys share the read lock and update
// their state atomically, so shards only serialise insertions and sweeps.
type registry[S any, P stateOf[S]] struct {
	rule     *rule
	seed     maphash.Seed
	mask     uint64
	perShard int
	newState func() P
	shards   []shard[S]
}

type shard[S any] struct {
	mu       sync.RWMutex
	m        map[string]*S
	peak     int      // largest len(m) since the map was last rebuilt
	overflow *S       // shared by new keys that found the shard full of limited keys
	_        [16]byte // one shard per 64-byte cache line: readers of neighbouring shards do not contend
}

// evictSample is how many entries a full shard looks at to make room.
const evictSample = 32

func newRegistry[S any, P stateOf[S]](r *rule, maxKeys int, newState func() P) *registry[S, P] {
	// Enough shards that writers rarely meet, few enough that each holds at
	// least 64 keys so that the per-shard bound stays close to maxKeys.
	n := 256
	for n > 1 && maxKeys/n < 64 {
		n /= 2
	}
	g := &registry[S, P]{
		rule:     r,
		seed:     maphash.MakeSeed(),
		mask:     uint64(n - 1),
		perShard: max(1, maxKeys/n),
		newState: newState,
		shards:   make([]shard[S], n),
	}
	for i := range g.shards {
		g.shards[i].m = make(map[string]*S)
	}
	return g
}

func (g *registry[S, P]) shard(key string) *shard[S] {
	return &g.shards[maphash.String(g.seed, key)&g.mask]
}

func (g *registry[S, P]) decide(key string, now, n int64, consume bool) Decision {
	sh := g.shard(key)
	sh.mu.RLock()
	if s, ok := sh.m[key]; ok {
		d := P(s).decide(g.rule, now, n, consume)
		sh.mu.RUnlock()
		return d
	}
	sh.mu.RUnlock()
	if !consume {
		return g.newState().decide(g.rule, now, n, false)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s, ok := sh.m[key]
	if !ok {
		if len(sh.m) >= g.perShard && !g.makeRoom(sh, now) {
			if sh.overflow == nil {
				sh.overflow = (*S)(g.newState())
			}
			return P(sh.overflow).decide(g.rule, now, n, true)
		}
		s = (*S)(g.newState())
		// Clone: the key may point into a larger buffer (a header line)
		// that the map must not keep alive.
		sh.m[strings.Clone(key)] = s
		sh.peak = max(sh.peak, len(sh.m))
	}
	return P(s).decide(g.rule, now, n, true)
}

// makeRoom evicts from a full shard, holding its write lock. It samples
// evictSample entries (map iteration starts at a random place) and drops
// every idle one; if none is idle, it drops the sampled key that is not
// currently limited and is nearest its full quota. It reports whether room
// was made: false when every sampled key is limited.
func (g *registry[S, P]) makeRoom(sh *shard[S], now int64) bool {
	var (
		victim   string
		best     time.Duration
		found    bool
		idle     []string
		idleBuf  [evictSample]string
		examined int
	)
	idle = idleBuf[:0]
	for k, s := range sh.m {
		if examined++; examined > evictSample {
			break
		}
		if P(s).idle(g.rule, now) {
			idle = append(idle, k)
			continue
		}
		d := P(s).decide(g.rule, now, 1, false)
		if d.Allowed && (!found || d.ResetAfter < best) {
			victim, best, found = k, d.ResetAfter, true
		}
	}
	if len(idle) > 0 {
		for _, k := range idle {
			delete(sh.m, k)
		}
		return true
	}
	if found {
		delete(sh.m, victim)
	}
	return found
}

func (g *registry[S, P]) reset(key string) {
	sh := g.shard(key)
	sh.mu.Lock()
	delete(sh.m, key)
	sh.mu.Unlock()
}

func (g *registry[S, P]) len() int {
	total := 0
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.RLock()
		total += len(sh.m)
		sh.mu.RUnlock()
	}
	return total
}

// sweep evicts the idle keys of every shard, one shard at a time, so a
// request waits at most for one shard's sweep (maxKeys/256 entries), never
// for the whole map. A Go map never shrinks, so a shard that fell below a
// quarter of its peak is copied into a fresh map and its memory returned.
func (g *registry[S, P]) sweep(now int64) {
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		for k, s := range sh.m {
			if P(s).idle(g.rule, now) {
				delete(sh.m, k)
			}
		}
		if sh.overflow != nil && P(sh.overflow).idle(g.rule, now) {
			sh.overflow = nil
		}
		if sh.peak >= 64 && len(sh.m) < sh.peak/4 {
			fresh := make(map[string]*S, len(sh.m))
			for k, s := range sh.m {
				fresh[k] = s
			}
			sh.m, sh.peak = fresh, len(fresh)
		}
		sh.mu.Unlock()
	}
}
