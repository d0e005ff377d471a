package core_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-ratelimit/ratelimit/internal/testkit/assert"
	"github.com/go-ratelimit/ratelimit/internal/testkit/goleak"
	"github.com/go-ratelimit/ratelimit/internal/testkit/rapid"
	"github.com/go-ratelimit/ratelimit/internal/testkit/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func frozen(t *testing.T, p core.Policy, opts ...core.Option) (*core.MemoryLimiter, *coretest.Clock) {
	t.Helper()
	clock := coretest.NewClock(coretest.Epoch)
	lim, err := core.New(p, append([]core.Option{core.WithClock(clock.Now)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lim.Close() })
	return lim, clock
}

// TestExactAcrossManyKeys: 1000 goroutines hammer 10,000 keys of limit 3
// with 5 requests each on a frozen clock; exactly 3 per key pass.
func TestExactAcrossManyKeys(t *testing.T) {
	for _, p := range []core.Policy{
		core.FixedWindow(3, time.Minute), core.SlidingWindow(3, time.Minute),
		core.TokenBucket(3, time.Minute), core.LeakyBucket(3, time.Minute),
	} {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			lim, _ := frozen(t, p)
			const keys, goroutines, perGoroutine = 10_000, 1000, 50
			names := make([]string, keys)
			for i := range names {
				names[i] = "user-" + strconv.Itoa(i)
			}
			perKey := make([]atomic.Int32, keys)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for i := range perGoroutine {
						k := (g*perGoroutine + i) % keys
						d, err := lim.Allow(context.Background(), names[k])
						if err == nil && d.Allowed {
							perKey[k].Add(1)
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			total := 0
			for k := range perKey {
				require.Equal(t, int32(3), perKey[k].Load(), "key %d", k)
				total += int(perKey[k].Load())
			}
			assert.Equal(t, 30_000, total)
		})
	}
}

// TestSlidingWindowBound checks, over random schedules, both promises of the
// sliding window: at most Limit in the trailing Buckets buckets, and at most
// Limit*(1+1/Buckets) in any interval of one Window.
func TestSlidingWindowBound(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.Int64Range(1, 50).Draw(rt, "limit")
		buckets := rapid.Int64Range(1, 20).Draw(rt, "buckets")
		window := time.Duration(buckets) * 10 * time.Millisecond
		p := core.SlidingWindow(limit, window).WithBuckets(buckets)
		clock := coretest.NewClock(coretest.Epoch)
		lim, err := core.New(p, core.WithClock(clock.Now))
		require.NoError(rt, err)
		defer lim.Close()

		var admitted []time.Duration // each admitted unit, by instant
		var at time.Duration
		steps := rapid.IntRange(1, 300).Draw(rt, "steps")
		for range steps {
			gap := time.Duration(rapid.IntRange(0, int(window/time.Millisecond)).Draw(rt, "gap")) * time.Millisecond
			if rapid.Bool().Draw(rt, "burst") {
				gap = 0
			}
			at += gap
			clock.Advance(gap)
			n := rapid.Int64Range(1, limit).Draw(rt, "n")
			d, err := lim.AllowN(context.Background(), "k", n)
			require.NoError(rt, err)
			if d.Allowed {
				for range n {
					admitted = append(admitted, at)
				}
			}
		}
		bound := limit + (limit+buckets-1)/buckets
		require.Equal(rt, bound, p.MaxInWindow())
		most, lo := 0, 0
		for hi := range admitted {
			for admitted[hi]-admitted[lo] > window { // closed intervals [a, a+window]
				lo++
			}
			most = max(most, hi-lo+1)
		}
		if int64(most) > bound {
			rt.Fatalf("%d admitted within one window %v, bound %d", most, window, bound)
		}
	})
}

// TestFixedWindowBoundaryBurst states the fixed window's trade-off plainly:
// a full window's worth at the end of one window and again at the start of
// the next, 2*Limit within 2 ms.
func TestFixedWindowBoundaryBurst(t *testing.T) {
	lim, clock := frozen(t, core.FixedWindow(100, time.Minute))
	clock.Advance(time.Minute - time.Millisecond)
	admitted := 0
	for range 2 {
		for range 100 {
			d, err := lim.Allow(context.Background(), "k")
			require.NoError(t, err)
			if d.Allowed {
				admitted++
			}
		}
		clock.Advance(2 * time.Millisecond)
	}
	assert.Equal(t, 200, admitted)
}

func TestWait(t *testing.T) {
	t.Run("waits exactly until the token bucket refills", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lim, err := core.New(core.TokenBucket(10, time.Second).WithBurst(1))
			require.NoError(t, err)
			defer lim.Close()
			ctx := context.Background()
			start := time.Now()
			require.NoError(t, lim.Wait(ctx, "k", 1))
			assert.Equal(t, time.Duration(0), time.Since(start))
			require.NoError(t, lim.Wait(ctx, "k", 1))
			assert.Equal(t, 100*time.Millisecond, time.Since(start))
			require.NoError(t, lim.Wait(ctx, "k", 1))
			assert.Equal(t, 200*time.Millisecond, time.Since(start))
		})
	})
	t.Run("leaky bucket returns after the request's delay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lim, err := core.New(core.LeakyBucket(4, time.Second))
			require.NoError(t, err)
			defer lim.Close()
			start := time.Now()
			for i := range 4 {
				require.NoError(t, lim.Wait(context.Background(), "k", 1))
				assert.Equal(t, time.Duration(i)*250*time.Millisecond, time.Since(start))
			}
		})
	})
	t.Run("refuses at once when the deadline is too close, consuming nothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lim, err := core.New(core.TokenBucket(1, time.Minute))
			require.NoError(t, err)
			defer lim.Close()
			require.NoError(t, lim.Wait(context.Background(), "k", 1))
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			start := time.Now()
			err = lim.Wait(ctx, "k", 1)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.EqualError(t, err, "core: Wait(n=1) needs 1m0s, beyond the context deadline: context deadline exceeded")
			assert.Equal(t, time.Duration(0), time.Since(start))
		})
	})
	t.Run("returns the context's error when cancelled while waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lim, err := core.New(core.TokenBucket(1, time.Minute))
			require.NoError(t, err)
			defer lim.Close()
			require.NoError(t, lim.Wait(context.Background(), "k", 1))
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				time.Sleep(10 * time.Second)
				cancel()
			}()
			assert.ErrorIs(t, lim.Wait(ctx, "k", 1), context.Canceled)
		})
	})
	t.Run("a cost above the burst fails without waiting", func(t *testing.T) {
		lim, _ := frozen(t, core.TokenBucket(5, time.Second))
		err := lim.Wait(context.Background(), "k", 6)
		assert.ErrorIs(t, err, core.ErrCostExceedsCapacity)
		assert.EqualError(t, err, "core: cost exceeds what the policy can ever admit: n=6, TokenBucket burst is 5")
	})
}

func TestErrorsNameTheValues(t *testing.T) {
	lim, _ := frozen(t, core.FixedWindow(5, time.Minute))
	_, err := lim.AllowN(context.Background(), "k", -2)
	assert.EqualError(t, err, "core: cost must be > 0, got -2")
	d, err := lim.AllowN(context.Background(), "k", 6)
	assert.EqualError(t, err, "core: cost exceeds what the policy can ever admit: n=6, FixedWindow limit is 5 per 1m0s")
	assert.True(t, errors.Is(err, core.ErrCostExceedsCapacity))
	assert.Equal(t, core.Decision{Limit: 5, Remaining: 5, Policy: core.FixedWindow(5, time.Minute)}, d)
}

func TestPeekDoesNotStoreUnknownKeys(t *testing.T) {
	lim, _ := frozen(t, core.TokenBucket(5, time.Second))
	for i := range 100 {
		_, err := lim.Peek(context.Background(), "probe-"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	assert.Zero(t, lim.Len())
}

func TestHugeLimitsAndWindows(t *testing.T) {
	ctx := context.Background()
	t.Run("a billion per second", func(t *testing.T) {
		lim, clock := frozen(t, core.TokenBucket(1_000_000_000, time.Second))
		d, err := lim.AllowN(ctx, "k", 1_000_000_000)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		clock.Advance(time.Microsecond)
		d, err = lim.AllowN(ctx, "k", 1000)
		require.NoError(t, err)
		assert.True(t, d.Allowed, "1µs refills 1000 at 1/ns")
		assert.Equal(t, int64(0), d.Remaining)
	})
	t.Run("4 billion per 26 days", func(t *testing.T) {
		lim, clock := frozen(t, core.FixedWindow(1<<32-1, core.MaxSpan/2))
		d, err := lim.AllowN(ctx, "k", 1<<32-1)
		require.NoError(t, err)
		assert.True(t, d.Allowed)
		assert.Zero(t, d.Remaining)
		clock.Advance(time.Hour)
		d, err = lim.Allow(ctx, "k")
		require.NoError(t, err)
		assert.False(t, d.Allowed)
		assert.Positive(t, d.RetryAfter)
	})
	t.Run("one per 52 days", func(t *testing.T) {
		lim, clock := frozen(t, core.TokenBucket(1, core.MaxSpan))
		d, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		require.True(t, d.Allowed)
		d, err = lim.Allow(ctx, "k")
		require.NoError(t, err)
		assert.False(t, d.Allowed)
		assert.Equal(t, core.MaxSpan, d.RetryAfter)
		clock.Advance(d.RetryAfter)
		d, err = lim.Allow(ctx, "k")
		require.NoError(t, err)
		assert.True(t, d.Allowed)
	})
	t.Run("sliding window of 3600 buckets, 100 years idle", func(t *testing.T) {
		lim, clock := frozen(t, core.SlidingWindow(1<<32-1, time.Hour).WithBuckets(3600))
		d, err := lim.AllowN(ctx, "k", 1<<32-1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		clock.Advance(100 * 365 * 24 * time.Hour)
		d, err = lim.AllowN(ctx, "k", 1<<32-1)
		require.NoError(t, err)
		assert.True(t, d.Allowed)
	})
}

// TestSlidingWindowAdmitsAClientAtExactlyLimitPerWindow is defect 1 of the
// review: when Buckets did not divide Limit, the second bound (then
// Limit + Limit/Buckets, rounded down) denied a client sending steadily at
// exactly Limit per Window, e.g. 10 of 60 requests for 5 per minute.
func TestSlidingWindowAdmitsAClientAtExactlyLimitPerWindow(t *testing.T) {
	for _, tc := range []struct {
		p     core.Policy
		every time.Duration
	}{
		{core.SlidingWindow(5, time.Minute), 12 * time.Second},
		{core.SlidingWindow(5, time.Second), 200 * time.Millisecond},
		{core.SlidingWindow(15, 1500*time.Millisecond), 100 * time.Millisecond},
	} {
		for phase := time.Duration(0); phase < tc.p.Interval(); phase += tc.p.Interval() / 7 {
			clock := coretest.NewClock(coretest.Epoch.Add(phase))
			lim, err := core.New(tc.p, core.WithClock(clock.Now))
			require.NoError(t, err)
			for i := range 60 {
				d, err := lim.Allow(context.Background(), "k")
				require.NoError(t, err)
				require.True(t, d.Allowed, "%v, phase %v: request %d denied", tc.p, phase, i)
				clock.Advance(tc.every)
			}
			require.NoError(t, lim.Close())
		}
	}
}
