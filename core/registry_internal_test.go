package core

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/internal/testkit/assert"
	"github.com/go-ratelimit/ratelimit/internal/testkit/require"
)

var epoch = time.Date(2027, time.January, 15, 0, 0, 0, 0, time.UTC)

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
	require.NoError(t, err)
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
				require.NoError(t, err)
				got, err := swept.AllowN(ctx, key, n)
				require.NoError(t, err)
				require.Equal(t, want, got, "step %d", i)
				before := swept.Len()
				swept.sweep()
				evicted += before - swept.Len()
			}
			assert.Greater(t, evicted, 100, "the schedule must actually evict keys")
			assert.Equal(t, 8, kept.Len())
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
	ctx := context.Background()

	abusers := make([]string, 100)
	for i := range abusers {
		abusers[i] = "abuser-" + strconv.Itoa(i)
		d, err := l.AllowN(ctx, abusers[i], 10)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	for i := range flood {
		clock.advance(time.Millisecond)
		d, err := l.Allow(ctx, "flood-"+strconv.Itoa(i))
		require.NoError(t, err)
		require.True(t, d.Allowed, "a flood of fresh keys is still admitted (key %d)", i)
		if i%1000 == 0 {
			// The abusers keep hammering through the flood (a request a
			// second each, six times their rate).
			for _, k := range abusers {
				_, err := l.Allow(ctx, k)
				require.NoError(t, err)
			}
		}
	}
	grown := heapInUse() - before
	t.Logf("heap after %d keys bounded to 100,000: +%.1f MiB, %d keys held", flood, float64(grown)/(1<<20), l.Len())
	assert.LessOrEqual(t, l.Len(), 100_000)
	assert.Less(t, grown, int64(32<<20), "heap increase")
	for _, k := range abusers {
		_, err := l.Allow(ctx, k) // takes the token that may have come back since the last round
		require.NoError(t, err)
		d, err := l.Allow(ctx, k)
		require.NoError(t, err)
		assert.False(t, d.Allowed, "limited key %s must survive the flood", k)
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
	ctx := context.Background()
	for i := range 64 {
		d, err := l.AllowN(ctx, "held-"+strconv.Itoa(i), 2)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	require.Equal(t, 64, l.Len())

	var got []bool
	for _, k := range []string{"new-a", "new-a", "new-b", "new-c"} {
		d, err := l.Allow(ctx, k)
		require.NoError(t, err)
		got = append(got, d.Allowed)
	}
	assert.Equal(t, []bool{true, true, false, false}, got, "newcomers share one bucket of 2")
	assert.Equal(t, 64, l.Len(), "no limited key was evicted")
	d, err := l.Allow(ctx, "held-7")
	require.NoError(t, err)
	assert.False(t, d.Allowed)

	// Once the held keys recover, the janitor frees them and newcomers get
	// their own state again.
	clock.advance(p.Recovery())
	l.sweep()
	assert.Zero(t, l.Len())
	d, err = l.Allow(ctx, "new-b")
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.Equal(t, int64(1), d.Remaining)
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
		_, err := l.AllowN(ctx, "limited-"+strconv.Itoa(i), 10)
		require.NoError(t, err)
	}
	_, err := l.AllowN(ctx, "light", 1)
	require.NoError(t, err)
	require.Equal(t, 32, l.Len())

	d, err := l.Allow(ctx, "newcomer")
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.Equal(t, int64(8), d.Remaining, "the newcomer starts from the evicted key's usage (1)")
	assert.Equal(t, 32, l.Len())
	for i := range 31 {
		d, err := l.Peek(ctx, "limited-"+strconv.Itoa(i))
		require.NoError(t, err)
		assert.False(t, d.Allowed, "limited-%d kept", i)
	}
	admitted := 1 // light's first request
	for range 20 {
		d, err := l.Allow(ctx, "light")
		require.NoError(t, err)
		if d.Allowed {
			admitted++
		}
	}
	assert.LessOrEqual(t, admitted, 10, "the evicted key never gets more than its limit")
}

// TestEvictedKeyIsNotAdmittedBeyondItsLimit is defect 2 of the review: a
// fixed-window key that used 9 of 10 was evicted to make room, instead of
// one that used 1, and then got 10 more in the same window.
func TestEvictedKeyIsNotAdmittedBeyondItsLimit(t *testing.T) {
	for trial := range 40 {
		clock := &fakeClock{t: epoch}
		l := newTestLimiter(t, FixedWindow(10, time.Minute), clock, WithMaxKeys(2))
		ctx := context.Background()
		_, err := l.AllowN(ctx, "heavy", 9)
		require.NoError(t, err)
		_, err = l.AllowN(ctx, "light", 1)
		require.NoError(t, err)
		d, err := l.Allow(ctx, "newcomer-"+strconv.Itoa(trial))
		require.NoError(t, err)
		require.True(t, d.Allowed)
		h, err := l.Peek(ctx, "heavy")
		require.NoError(t, err)
		assert.Equal(t, int64(1), h.Remaining, "trial %d: the heavy key was kept, the light one evicted", trial)
		admitted := int64(9)
		for range 20 {
			d, err := l.Allow(ctx, "heavy")
			require.NoError(t, err)
			if d.Allowed {
				admitted++
			}
		}
		assert.Equal(t, int64(10), admitted, "trial %d: heavy gets exactly its limit in the window", trial)
		clock.advance(time.Second)
		admitted = 1
		for range 20 {
			d, err := l.Allow(ctx, "light")
			require.NoError(t, err)
			if d.Allowed {
				admitted++
			}
		}
		assert.LessOrEqual(t, admitted, int64(10), "trial %d: the evicted light key never exceeds its limit", trial)
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
				d, err := l.AllowN(ctx, "held-"+strconv.Itoa(i), p.Capacity())
				require.NoError(t, err)
				require.True(t, d.Allowed)
			}
			for i := range 3 * int(p.Capacity()) {
				key := "new-" + strconv.Itoa(i%3)
				peek, err := l.Peek(ctx, key)
				require.NoError(t, err)
				d, err := l.Allow(ctx, key)
				require.NoError(t, err)
				require.Equal(t, peek.Allowed, d.Allowed, "request %d: Peek agrees with the next Allow", i)
				if peek.Allowed {
					require.Equal(t, peek.Remaining-1, d.Remaining, "request %d", i)
				}
			}
			d, err := l.Allow(ctx, "new-1")
			require.NoError(t, err)
			require.False(t, d.Allowed, "the newcomers share one used-up state")
			require.NoError(t, l.Reset(ctx, "new-1"))
			peek, err := l.Peek(ctx, "new-1")
			require.NoError(t, err)
			assert.True(t, peek.Allowed)
			assert.Equal(t, p.Capacity(), peek.Remaining, "Peek after Reset: a full quota")
			d, err = l.Allow(ctx, "new-1")
			require.NoError(t, err)
			assert.True(t, d.Allowed, "Reset gives an overflowed key its first request back")
			d, err = l.Allow(ctx, "new-2")
			require.NoError(t, err)
			assert.False(t, d.Allowed, "the others stay limited")
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
			d, err := l.AllowN(ctx, "k", 10)
			require.NoError(t, err)
			require.True(t, d.Allowed)

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
			require.Zero(t, l.Len(), "the janitor evicted the idle key")
			close(resume)
			d = <-got
			require.True(t, d.Allowed, "idle at the sweep's instant, so admitted")

			// The request was decided at the sweep's instant, not at its
			// older reading: at that instant the key has used exactly 1.
			peek, err := l.Peek(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, int64(9), peek.Remaining)
		})
	}
}

// TestFixedWindowKeyUnsweptForBillionsOfWindows: a key's window number is
// kept in 64-bits-of-count bits, so a key last used 2^31+ windows ago (a
// clock that leapt, with no sweep between) is not mistaken for the future.
func TestFixedWindowKeyUnsweptForBillionsOfWindows(t *testing.T) {
	clock := &fakeClock{t: epoch}
	l := newTestLimiter(t, FixedWindow(100, time.Millisecond), clock)
	ctx := context.Background()
	d, err := l.AllowN(ctx, "k", 100)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	for _, leap := range []int64{1 << 31, 1<<31 + 1, 1 << 32, 1<<33 + 7} {
		clock.advance(time.Duration(leap) * time.Millisecond)
		d, err := l.AllowN(ctx, "k", 100)
		require.NoError(t, err)
		assert.True(t, d.Allowed, "%d windows later the key has its full quota", leap)
	}
}

// TestBackwardClockAtTheAlgorithm bypasses the limiter's monotonic guard to
// show that each algorithm, given an earlier instant, adds no capacity.
func TestBackwardClockAtTheAlgorithm(t *testing.T) {
	now := epoch.Add(1500 * time.Millisecond).UnixNano()
	for _, p := range allPolicies() {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			r, err := compile(p)
			require.NoError(t, err)
			var s interface {
				init(r *rule)
				decide(r *rule, now, n int64, consume bool) (verdict, bool)
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
			d, ok := s.decide(&r, now, p.Capacity(), true)
			require.True(t, ok)
			require.True(t, d.allowed)
			for _, back := range []time.Duration{time.Millisecond, 600 * time.Millisecond, time.Hour, 50 * 365 * 24 * time.Hour} {
				d, _ = s.decide(&r, now-int64(back), 1, true)
				assert.False(t, d.allowed, "stepped back %v", back)
				assert.Zero(t, d.remaining)
			}
			d, _ = s.decide(&r, now+int64(p.Recovery()), p.Capacity(), true)
			assert.True(t, d.allowed, "time moving on again recovers")
		})
	}
}

// TestFixedWindowClockStepsBackIntoTheStoredWindow: a request whose clock
// is in an earlier window counts in the window already stored, so its
// ResetAfter and RetryAfter run to that window's end and nothing reopens.
func TestFixedWindowClockStepsBackIntoTheStoredWindow(t *testing.T) {
	r, err := compile(FixedWindow(2, time.Second))
	require.NoError(t, err)
	var s fixedState
	at := epoch.Add(5*time.Second + 100*time.Millisecond).UnixNano()
	end := epoch.Add(6 * time.Second).UnixNano()
	v, _ := s.decide(&r, at, 1, true)
	require.True(t, v.allowed)
	back := at - int64(1500*time.Millisecond) // two windows earlier
	v, _ = s.decide(&r, back, 1, true)
	assert.True(t, v.allowed, "the stored window still has room for one")
	assert.Equal(t, time.Duration(end-back), v.reset, "counted in the stored window")
	v, _ = s.decide(&r, back, 1, true)
	assert.False(t, v.allowed, "the stored window is full")
	assert.Equal(t, time.Duration(end-back), v.wait)
	v, _ = s.decide(&r, at, 1, true)
	assert.False(t, v.allowed, "back at the original time: still full")
	v, _ = s.decide(&r, end, 1, true)
	assert.True(t, v.allowed, "the next window opens on time")
}

func TestCloseStopsTheJanitorAndRefusesCalls(t *testing.T) {
	l, err := New(TokenBucket(1, time.Second))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "Close is idempotent")
	ctx := context.Background()
	_, err = l.Allow(ctx, "k")
	assert.ErrorIs(t, err, ErrClosed)
	_, err = l.Peek(ctx, "k")
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, l.Reset(ctx, "k"), ErrClosed)
	assert.ErrorIs(t, l.Wait(ctx, "k", 1), ErrClosed)
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
	} {
		l, err := New(p, tc.opt)
		assert.EqualError(t, err, tc.err)
		assert.Nil(t, l)
	}
}

func TestDefaultMaxKeysStaysWellUnderAGigabyte(t *testing.T) {
	for _, p := range []Policy{
		TokenBucket(1, time.Second), FixedWindow(1, time.Second),
		SlidingWindow(1, time.Second), SlidingWindow(1, time.Hour).WithBuckets(3600),
	} {
		n := defaultMaxKeys(p)
		perKey := 80 // measured by BenchmarkMemoryPerKey for one-word states
		if p.Algorithm == AlgSlidingWindow {
			perKey = 160 + 4*int(p.Buckets+1)
		}
		assert.Less(t, n*perKey, 300<<20, "%v: %d keys", p, n)
		assert.GreaterOrEqual(t, n, 1000, "%v", p)
	}
}

func TestShardsKeepAtLeast64KeysEach(t *testing.T) {
	for _, tc := range []struct{ maxKeys, shards, perShard int }{
		{1, 1, 1}, {64, 1, 64}, {200, 2, 100}, {16384, 256, 64}, {1_000_000, 256, 3906},
	} {
		g := newRegistry[gcraState, *gcraState](&rule{}, nil, tc.maxKeys)
		assert.Equal(t, tc.shards, len(g.shards), "maxKeys %d", tc.maxKeys)
		assert.Equal(t, tc.perShard, g.perShard, "maxKeys %d", tc.maxKeys)
	}
}

// TestSweepReturnsMapMemory: after a burst of keys expires, the shard maps
// are rebuilt so their memory goes back to the runtime.
func TestSweepReturnsMapMemory(t *testing.T) {
	clock := &fakeClock{t: epoch}
	p := TokenBucket(10, time.Second)
	base := heapInUse()
	l := newTestLimiter(t, p, clock)
	ctx := context.Background()
	for i := range 200_000 {
		_, err := l.Allow(ctx, fmt.Sprintf("key-%d", i))
		require.NoError(t, err)
	}
	full := heapInUse() - base
	clock.advance(p.Recovery())
	l.sweep()
	left := heapInUse() - base
	t.Logf("200,000 keys: %d KiB; after their TTL: %d KiB", full>>10, left>>10)
	assert.Zero(t, l.Len())
	assert.Less(t, left, full/10, "at least 90%% returned")
	runtime.KeepAlive(l)
}
