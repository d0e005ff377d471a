package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

var epoch = time.Date(2027, time.January, 15, 0, 0, 0, 0, time.UTC)

// allow is l.AllowN(key, n), failing the test on an error: the calls here
// have valid costs on an open limiter.
func allow(t *testing.T, l *MemoryLimiter, key string, n int64) Decision {
	t.Helper()
	d, err := l.AllowN(context.Background(), key, n)
	if err != nil {
		t.Fatalf("AllowN(%q, %d): %v", key, n, err)
	}
	return d
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func allPolicies() []Policy {
	return []Policy{
		FixedWindow(5, time.Second),
		SlidingWindow(5, time.Second).WithBuckets(4),
		TokenBucket(5, time.Second).WithBurst(3),
		LeakyBucket(5, time.Second).WithBurst(3),
	}
}

// newTestLimiter builds a limiter whose janitor never runs on its own: the
// test sweeps explicitly.
func newTestLimiter(t *testing.T, p Policy, clock *fakeClock, opts ...Option) *MemoryLimiter {
	t.Helper()
	opts = append([]Option{WithClock(clock.now), WithSweepInterval(time.Hour)}, opts...)
	l, err := New(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestEvictionIsLossless runs one random schedule through a limiter that
// sweeps after every request and one that never sweeps: every decision must
// be the same, because a key is only evicted once it equals a new key.
func TestEvictionIsLossless(t *testing.T) {
	for _, p := range allPolicies() {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			clock := &fakeClock{t: epoch}
			swept := newTestLimiter(t, p, clock)
			kept := newTestLimiter(t, p, clock)
			rng := rand.New(rand.NewPCG(3, 4))
			ctx := context.Background()
			evicted := 0
			for i := range 5000 {
				gap := time.Duration(rng.IntN(50)) * time.Millisecond
				if rng.IntN(30) == 0 {
					gap = time.Duration(rng.IntN(3000)) * time.Millisecond
				}
				clock.advance(gap)
				key := "k" + strconv.Itoa(rng.IntN(8))
				n := 1 + rng.Int64N(p.Capacity())
				want, err := kept.AllowN(ctx, key, n)
				if err != nil {
					t.Fatal(err)
				}
				got, err := swept.AllowN(ctx, key, n)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("step %d: got %+v, want %+v", i, got, want)
				}
				before := swept.Len()
				swept.sweep()
				evicted += before - swept.Len()
			}
			if evicted <= 100 {
				t.Errorf("the schedule must actually evict keys: evicted = %+v, want > 100", evicted)
			}
			if got := kept.Len(); got != 8 {
				t.Errorf("kept.Len() = %+v, want 8", got)
			}
		})
	}
}

// TestKeyFloodIsBounded floods a limiter bounded to 100,000 keys with
// 1,000,000 distinct keys, a thousand new ones a second: memory stays
// bounded, keys that were limited before the flood are still limited after
// it, and the flood's own keys (each a first request) are all admitted,
// because the usage the evicted keys leave behind recovers faster than the
// flood turns the table over.
func TestKeyFloodIsBounded(t *testing.T) {
	flood := 1_000_000
	if raceEnabled || testing.Short() {
		flood = 200_000 // the race detector makes each insertion ~10x slower
	}
	clock := &fakeClock{t: epoch}
	p := TokenBucket(10, time.Minute)
	before := heapInUse()
	l := newTestLimiter(t, p, clock, WithMaxKeys(100_000))

	abusers := make([]string, 100)
	for i := range abusers {
		abusers[i] = "abuser-" + strconv.Itoa(i)
		d := allow(t, l, abusers[i], 10)
		if !d.Allowed {
			t.Fatalf("denied, want allowed: %+v", d)
		}
	}
	for i := range flood {
		clock.advance(time.Millisecond)
		d := allow(t, l, "flood-"+strconv.Itoa(i), 1)
		if !d.Allowed {
			t.Fatalf("a flood of fresh keys is still admitted (key %d): denied, want allowed: %+v", i, d)
		}
		if i%1000 == 0 {
			// The abusers keep hammering through the flood (a request a
			// second each, six times their rate).
			for _, k := range abusers {
				allow(t, l, k, 1)
			}
		}
	}
	grown := heapInUse() - before
	t.Logf("heap after %d keys bounded to 100,000: +%.1f MiB, %d keys held", flood, float64(grown)/(1<<20), l.Len())
	if got := l.Len(); got > 100_000 {
		t.Errorf("l.Len() = %+v, want <= 100_000", got)
	}
	if grown >= 32<<20 {
		t.Errorf("heap grew by %d bytes, want less than 32 MiB", grown)
	}
	for _, k := range abusers {
		allow(t, l, k, 1) // takes the token that may have come back since the last round
		d := allow(t, l, k, 1)
		if d.Allowed {
			t.Errorf("limited key %s must survive the flood: allowed, want denied: %+v", k, d)
		}
	}
	runtime.KeepAlive(l)
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestFullRegistryOfLimitedKeys: when every key held is limited, a new key
// is neither admitted freely nor refused outright: it shares one overflow
// state with the other newcomers, limited by the same policy.
func TestFullRegistryOfLimitedKeys(t *testing.T) {
	clock := &fakeClock{t: epoch}
	p := TokenBucket(2, time.Minute)
	l := newTestLimiter(t, p, clock, WithMaxKeys(64))
	for i := range 64 {
		d := allow(t, l, "held-"+strconv.Itoa(i), 2)
		if !d.Allowed {
			t.Fatalf("denied, want allowed: %+v", d)
		}
	}
	if got := l.Len(); got != 64 {
		t.Fatalf("l.Len() = %+v, want 64", got)
	}

	var got []bool
	for _, k := range []string{"new-a", "new-a", "new-b", "new-c"} {
		d := allow(t, l, k, 1)
		got = append(got, d.Allowed)
	}
	if want := []bool{true, true, false, false}; !slices.Equal(got, want) {
		t.Errorf("newcomers share one bucket of 2: allowed %v, want %v", got, want)
	}
	if got := l.Len(); got != 64 {
		t.Errorf("no limited key was evicted: l.Len() = %+v, want 64", got)
	}
	d := allow(t, l, "held-7", 1)
	if d.Allowed {
		t.Errorf("allowed, want denied: %+v", d)
	}

	// Once the held keys recover, the janitor frees them and newcomers get
	// their own state again.
	clock.advance(p.Recovery())
	l.sweep()
	if got := l.Len(); got != 0 {
		t.Errorf("l.Len() = %+v, want 0", got)
	}
	d = allow(t, l, "new-b", 1)
	if !d.Allowed {
		t.Errorf("denied, want allowed: %+v", d)
	}
	if d.Remaining != 1 {
		t.Errorf("d.Remaining = %+v, want 1", d.Remaining)
	}
}

// TestFullRegistryEvictsTheLeastUsedUnlimitedKey: with room needed and no
// idle key, the key nearest its full quota goes, never a limited one, and
// what it had used stays counted: the newcomer inherits it.
func TestFullRegistryEvictsTheLeastUsedUnlimitedKey(t *testing.T) {
	clock := &fakeClock{t: epoch}
	p := TokenBucket(10, time.Minute)
	l := newTestLimiter(t, p, clock, WithMaxKeys(32))
	ctx := context.Background()
	for i := range 31 {
		allow(t, l, "limited-"+strconv.Itoa(i), 10)
	}
	allow(t, l, "light", 1)
	if got := l.Len(); got != 32 {
		t.Fatalf("l.Len() = %+v, want 32", got)
	}

	d := allow(t, l, "newcomer", 1)
	if !d.Allowed {
		t.Errorf("denied, want allowed: %+v", d)
	}
	if d.Remaining != 8 {
		t.Errorf("the newcomer starts from the evicted key's usage (1): d.Remaining = %+v, want 8", d.Remaining)
	}
	if got := l.Len(); got != 32 {
		t.Errorf("l.Len() = %+v, want 32", got)
	}
	for i := range 31 {
		d, err := l.Peek(ctx, "limited-"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			t.Errorf("limited-%d kept: allowed, want denied: %+v", i, d)
		}
	}
	admitted := 1 // light's first request
	for range 20 {
		d := allow(t, l, "light", 1)
		if d.Allowed {
			admitted++
		}
	}
	if admitted > 10 {
		t.Errorf("the evicted key never gets more than its limit: admitted = %+v, want <= 10", admitted)
	}
}

// TestEvictedKeyIsNotAdmittedBeyondItsLimit is defect 2 of the review: a
// fixed-window key that used 9 of 10 was evicted to make room, instead of
// one that used 1, and then got 10 more in the same window.
func TestEvictedKeyIsNotAdmittedBeyondItsLimit(t *testing.T) {
	for trial := range 40 {
		clock := &fakeClock{t: epoch}
		l := newTestLimiter(t, FixedWindow(10, time.Minute), clock, WithMaxKeys(2))
		ctx := context.Background()
		allow(t, l, "heavy", 9)
		allow(t, l, "light", 1)
		d := allow(t, l, "newcomer-"+strconv.Itoa(trial), 1)
		if !d.Allowed {
			t.Fatalf("denied, want allowed: %+v", d)
		}
		h, err := l.Peek(ctx, "heavy")
		if err != nil {
			t.Fatal(err)
		}
		if h.Remaining != 1 {
			t.Errorf("trial %d: the heavy key was kept, the light one evicted: h.Remaining = %+v, want 1", trial, h.Remaining)
		}
		admitted := int64(9)
		for range 20 {
			d := allow(t, l, "heavy", 1)
			if d.Allowed {
				admitted++
			}
		}
		if admitted != 10 {
			t.Errorf("trial %d: heavy gets exactly its limit in the window: admitted = %+v, want 10", trial, admitted)
		}
		clock.advance(time.Second)
		admitted = 1
		for range 20 {
			d := allow(t, l, "light", 1)
			if d.Allowed {
				admitted++
			}
		}
		if admitted > 10 {
			t.Errorf("trial %d: the evicted light key never exceeds its limit: admitted = %+v, want <= 10", trial, admitted)
		}
	}
}

// TestOverflowKeysPeekAndReset is defect 3 of the review: keys sharing the
// overflow state were told Allowed by Peek while the next AllowN at the
// same instant was denied, and Reset did nothing for them.
func TestOverflowKeysPeekAndReset(t *testing.T) {
	for _, p := range allPolicies() {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			clock := &fakeClock{t: epoch}
			l := newTestLimiter(t, p, clock, WithMaxKeys(4))
			ctx := context.Background()
			for i := range 4 {
				d := allow(t, l, "held-"+strconv.Itoa(i), p.Capacity())
				if !d.Allowed {
					t.Fatalf("denied, want allowed: %+v", d)
				}
			}
			for i := range 3 * int(p.Capacity()) {
				key := "new-" + strconv.Itoa(i%3)
				peek, err := l.Peek(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				d := allow(t, l, key, 1)
				if d.Allowed != peek.Allowed {
					t.Fatalf("request %d: Peek agrees with the next Allow: d.Allowed = %+v, want %+v", i, d.Allowed, peek.Allowed)
				}
				if peek.Allowed {
					if d.Remaining != peek.Remaining-1 {
						t.Fatalf("request %d: d.Remaining = %+v, want %+v", i, d.Remaining, peek.Remaining-1)
					}
				}
			}
			d := allow(t, l, "new-1", 1)
			if d.Allowed {
				t.Fatalf("the newcomers share one used-up state: allowed, want denied: %+v", d)
			}
			if err := l.Reset(ctx, "new-1"); err != nil {
				t.Fatalf("l.Reset(ctx, \"new-1\"): %v", err)
			}
			peek, err := l.Peek(ctx, "new-1")
			if err != nil {
				t.Fatal(err)
			}
			if !peek.Allowed {
				t.Errorf("denied, want allowed: %+v", peek)
			}
			if peek.Remaining != p.Capacity() {
				t.Errorf("Peek after Reset: a full quota: peek.Remaining = %+v, want %+v", peek.Remaining, p.Capacity())
			}
			d = allow(t, l, "new-1", 1)
			if !d.Allowed {
				t.Errorf("Reset gives an overflowed key its first request back: denied, want allowed: %+v", d)
			}
			d = allow(t, l, "new-2", 1)
			if d.Allowed {
				t.Errorf("the others stay limited: allowed, want denied: %+v", d)
			}
		})
	}
}

// TestEvictionRacingAnOlderClockReading is defect 4 of the review: a
// request reads the clock, is descheduled, the janitor evicts its key at a
// later instant, and the request then decided on a fresh state at its
// older instant, getting quota the key did not have then.
func TestEvictionRacingAnOlderClockReading(t *testing.T) {
	for _, tc := range []struct {
		p       Policy
		reading time.Duration // the paused request's clock, after the key used its capacity at epoch
		sweep   time.Duration // when the janitor evicts the key (idle by then)
	}{
		{FixedWindow(10, time.Minute), 30 * time.Second, 121 * time.Second}, // idle one window after its own: see Policy.Recovery
		{TokenBucket(10, time.Minute), 30 * time.Second, 61 * time.Second},
		{LeakyBucket(10, time.Minute).AsMeter(), 30 * time.Second, 61 * time.Second},
		{SlidingWindow(10, time.Minute), 30 * time.Second, 2 * time.Minute},
	} {
		t.Run(tc.p.Algorithm.String(), func(t *testing.T) {
			clock := &fakeClock{t: epoch}
			var mu sync.Mutex
			l := newTestLimiter(t, tc.p, &fakeClock{t: epoch}, WithClock(func() time.Time {
				mu.Lock()
				defer mu.Unlock()
				return clock.t
			}))
			ctx := context.Background()
			d := allow(t, l, "k", 10)
			if !d.Allowed {
				t.Fatalf("denied, want allowed: %+v", d)
			}

			paused, resume := make(chan struct{}), make(chan struct{})
			var armed atomic.Bool
			armed.Store(true)
			l.testPause = func() {
				if armed.CompareAndSwap(true, false) { // the first reading only
					close(paused)
					<-resume
				}
			}
			mu.Lock()
			clock.t = epoch.Add(tc.reading)
			mu.Unlock()
			got := make(chan Decision)
			go func() {
				d, _ := l.Allow(ctx, "k")
				got <- d
			}()
			<-paused // the request holds the reading epoch+reading
			mu.Lock()
			clock.t = epoch.Add(tc.sweep)
			mu.Unlock()
			l.sweep()
			if got := l.Len(); got != 0 {
				t.Fatalf("the janitor evicted the idle key: l.Len() = %+v, want 0", got)
			}
			close(resume)
			d = <-got
			if !d.Allowed {
				t.Fatalf("idle at the sweep's instant, so admitted: denied, want allowed: %+v", d)
			}

			// The request was decided at the sweep's instant, not at its
			// older reading: at that instant the key has used exactly 1.
			peek, err := l.Peek(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if peek.Remaining != 9 {
				t.Errorf("peek.Remaining = %+v, want 9", peek.Remaining)
			}
		})
	}
}

// TestFixedWindowKeyUnsweptForBillionsOfWindows: a key's window number is
// kept in 64-bits-of-count bits, so a key last used 2^31+ windows ago (a
// clock that leapt, with no sweep between) is not mistaken for the future.
func TestFixedWindowKeyUnsweptForBillionsOfWindows(t *testing.T) {
	clock := &fakeClock{t: epoch}
	l := newTestLimiter(t, FixedWindow(100, time.Millisecond), clock)
	d := allow(t, l, "k", 100)
	if !d.Allowed {
		t.Fatalf("denied, want allowed: %+v", d)
	}
	for _, leap := range []int64{1 << 31, 1<<31 + 1, 1 << 32, 1<<33 + 7} {
		clock.advance(time.Duration(leap) * time.Millisecond)
		d := allow(t, l, "k", 100)
		if !d.Allowed {
			t.Errorf("%d windows later the key has its full quota: denied, want allowed: %+v", leap, d)
		}
	}
}

// TestBackwardClockAtTheAlgorithm bypasses the limiter's monotonic guard to
// show that each algorithm, given an earlier instant, adds no capacity.
func TestBackwardClockAtTheAlgorithm(t *testing.T) {
	now := epoch.Add(1500 * time.Millisecond).UnixNano()
	for _, p := range allPolicies() {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			r, err := compile(p)
			if err != nil {
				t.Fatal(err)
			}
			var s interface {
				init(r *rule)
				decide(r *rule, now, n int64, consume bool) (verdict, *verdict, bool)
			}
			switch p.Algorithm {
			case AlgFixedWindow:
				s = new(fixedState)
			case AlgSlidingWindow:
				s = new(slidingState)
			default:
				s = new(gcraState)
			}
			s.init(&r)
			d, _, ok := s.decide(&r, now, p.Capacity(), true)
			if !ok {
				t.Fatalf("ok is false")
			}
			if !d.allowed {
				t.Fatalf("d.allowed is false")
			}
			for _, back := range []time.Duration{time.Millisecond, 600 * time.Millisecond, time.Hour, 50 * 365 * 24 * time.Hour} {
				d, _, _ = s.decide(&r, now-int64(back), 1, true)
				if d.allowed {
					t.Errorf("stepped back %v: d.allowed is true", back)
				}
				if d.remaining != 0 {
					t.Errorf("d.remaining = %+v, want 0", d.remaining)
				}
			}
			d, _, _ = s.decide(&r, now+int64(p.Recovery()), p.Capacity(), true)
			if !d.allowed {
				t.Errorf("time moving on again recovers: d.allowed is false")
			}
		})
	}
}

// TestFixedWindowClockStepsBackIntoTheStoredWindow: a request whose clock
// is in an earlier window counts in the window already stored, so its
// ResetAfter and RetryAfter run to that window's end and nothing reopens.
func TestFixedWindowClockStepsBackIntoTheStoredWindow(t *testing.T) {
	r, err := compile(FixedWindow(2, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var s fixedState
	at := epoch.Add(5*time.Second + 100*time.Millisecond).UnixNano()
	end := epoch.Add(6 * time.Second).UnixNano()
	v, _, _ := s.decide(&r, at, 1, true)
	if !v.allowed {
		t.Fatalf("v.allowed is false")
	}
	back := at - int64(1500*time.Millisecond) // two windows earlier
	v, _, _ = s.decide(&r, back, 1, true)
	if !v.allowed {
		t.Errorf("the stored window still has room for one: v.allowed is false")
	}
	if v.reset != time.Duration(end-back) {
		t.Errorf("counted in the stored window: v.reset = %+v, want %+v", v.reset, time.Duration(end-back))
	}
	v, _, _ = s.decide(&r, back, 1, true)
	if v.allowed {
		t.Errorf("the stored window is full: v.allowed is true")
	}
	if v.wait != time.Duration(end-back) {
		t.Errorf("v.wait = %+v, want %+v", v.wait, time.Duration(end-back))
	}
	v, _, _ = s.decide(&r, at, 1, true)
	if v.allowed {
		t.Errorf("back at the original time: still full: v.allowed is true")
	}
	v, _, _ = s.decide(&r, end, 1, true)
	if !v.allowed {
		t.Errorf("the next window opens on time: v.allowed is false")
	}
}

func TestCloseStopsTheJanitorAndRefusesCalls(t *testing.T) {
	l, err := New(TokenBucket(1, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("l.Close(): %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close is idempotent: l.Close(): %v", err)
	}
	ctx := context.Background()
	_, err = l.Allow(ctx, "k")
	if !errors.Is(err, ErrClosed) {
		t.Errorf("got %v, want %v", err, ErrClosed)
	}
	_, err = l.Peek(ctx, "k")
	if !errors.Is(err, ErrClosed) {
		t.Errorf("got %v, want %v", err, ErrClosed)
	}
	if err := l.Reset(ctx, "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("l.Reset(ctx, \"k\"): got %v, want %v", err, ErrClosed)
	}
	if err := l.Wait(ctx, "k", 1); !errors.Is(err, ErrClosed) {
		t.Errorf("l.Wait(ctx, \"k\", 1): got %v, want %v", err, ErrClosed)
	}
}

func TestOptionsAreValidated(t *testing.T) {
	p := TokenBucket(1, time.Second)
	for _, tc := range []struct {
		opt Option
		err string
	}{
		{WithMaxKeys(0), "core: WithMaxKeys must be > 0, got 0"},
		{WithMaxKeys(-7), "core: WithMaxKeys must be > 0, got -7"},
		{WithClock(nil), "core: WithClock needs a non-nil function"},
		{WithSweepInterval(0), "core: WithSweepInterval must be > 0, got 0s"},
		{nil, "core: New: option 1 is nil"}, // an option slice built from configuration
	} {
		l, err := New(p, tc.opt)
		if got, want := fmt.Sprint(err), tc.err; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
		if l != nil {
			t.Errorf("l = %+v, want nil", l)
		}
	}
}

func TestDefaultMaxKeysStaysWellUnderAGigabyte(t *testing.T) {
	for _, p := range []Policy{
		TokenBucket(1, time.Second), FixedWindow(1, time.Second),
		SlidingWindow(1, time.Second), SlidingWindow(1, time.Hour).WithBuckets(3600),
		AllOf(SlidingWindow(10, time.Minute).WithName("a"), SlidingWindow(1000, 24*time.Hour).WithBuckets(1440).WithName("b")),
	} {
		n := defaultMaxKeys(p)
		perKey := 80 // measured by BenchmarkMemoryPerKey for one-word states
		switch {
		case p.Parts() != nil:
			perKey = 6578 // measured (HeapAlloc over 20,000 keys, 2026-12-05): the rings' size classes
		case p.Algorithm == AlgSlidingWindow:
			perKey = 160 + 4*int(p.Buckets+1)
		}
		if got := n * perKey; got >= 300<<20 {
			t.Errorf("%v: %d keys of %d bytes take %d bytes, want less than 300 MiB", p, n, perKey, got)
		}
		if n < 1000 {
			t.Errorf("%v: n = %+v, want >= 1000", p, n)
		}
	}
}

func TestShardsKeepAtLeast64KeysEach(t *testing.T) {
	for _, tc := range []struct{ maxKeys, shards, perShard int }{
		{1, 1, 1}, {64, 1, 64}, {200, 2, 100}, {16384, 256, 64}, {1_000_000, 256, 3906},
	} {
		g := newRegistry[gcraState, *gcraState](&rule{}, nil, tc.maxKeys)
		if got := len(g.shards); got != tc.shards {
			t.Errorf("maxKeys %d: len(g.shards) = %+v, want %+v", tc.maxKeys, got, tc.shards)
		}
		if g.perShard != tc.perShard {
			t.Errorf("maxKeys %d: g.perShard = %+v, want %+v", tc.maxKeys, g.perShard, tc.perShard)
		}
	}
}

// TestSweepReturnsMapMemory: after a burst of keys expires, the shard maps
// are rebuilt so their memory goes back to the runtime.
func TestSweepReturnsMapMemory(t *testing.T) {
	clock := &fakeClock{t: epoch}
	p := TokenBucket(10, time.Second)
	base := heapInUse()
	l := newTestLimiter(t, p, clock)
	for i := range 200_000 {
		allow(t, l, fmt.Sprintf("key-%d", i), 1)
	}
	full := heapInUse() - base
	clock.advance(p.Recovery())
	l.sweep()
	left := heapInUse() - base
	t.Logf("200,000 keys: %d KiB; after their TTL: %d KiB", full>>10, left>>10)
	if got := l.Len(); got != 0 {
		t.Errorf("l.Len() = %+v, want 0", got)
	}
	if left >= full/10 {
		t.Errorf("%d of %d left, want at least 90%% returned", left, full)
	}
	runtime.KeepAlive(l)
}

// TestMakeRoomRetriesALostCompareAndSwap: a request on the chosen victim
// between makeRoom's read of its state and the swap that retires it made
// makeRoom give up, and the newcomer went to the shared state although an
// unlimited key could go.
func TestMakeRoomRetriesALostCompareAndSwap(t *testing.T) {
	for _, p := range []Policy{FixedWindow(10, time.Minute), TokenBucket(10, time.Minute)} {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			clock := &fakeClock{t: epoch}
			l := newTestLimiter(t, p, clock, WithMaxKeys(2))
			ctx := context.Background()
			allow(t, l, "light", 1)
			allow(t, l, "heavy", 5)

			var raced atomic.Bool
			testBeforeRetire = func() {
				if raced.CompareAndSwap(false, true) {
					d := allow(t, l, "light", 1) // lock-free: the victim's word changes
					if !d.Allowed {
						t.Fatalf("denied, want allowed: %+v", d)
					}
				}
			}
			t.Cleanup(func() { testBeforeRetire = nil })
			d := allow(t, l, "newcomer", 1)
			if !raced.Load() {
				t.Fatalf("the race was staged: raced.Load() is false")
			}
			if !d.Allowed {
				t.Errorf("denied, want allowed: %+v", d)
			}
			if d.Remaining != 7 {
				t.Errorf("the newcomer got light's slot and inherited its 2: d.Remaining = %+v, want 7", d.Remaining)
			}
			if got := l.Len(); got != 2 {
				t.Errorf("l.Len() = %+v, want 2", got)
			}
			h, err := l.Peek(ctx, "heavy")
			if err != nil {
				t.Fatal(err)
			}
			if h.Remaining != 5 {
				t.Errorf("heavy kept: h.Remaining = %+v, want 5", h.Remaining)
			}
		})
	}
}

func TestShardIsOneCacheLine(t *testing.T) {
	if got := unsafe.Sizeof(shard[gcraState]{}); got != uintptr(64) {
		t.Errorf("unsafe.Sizeof(shard[gcraState]{}) = %+v, want %+v", got, uintptr(64))
	}
}
