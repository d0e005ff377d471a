package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
)

// Issue 17's four ways around "a change never adds capacity", and issue
// 24's UpgradeDenialRetryAfterAdmits (a denial under a plan the key is
// not on says exactly when to retry), on one Redis and the Cluster: see
// coretest.Suite.RunMoves. The deny cache is off so that every answer is
// the script's.

func moveSuite(rdb redis.UniversalClient) coretest.Suite {
	return coretest.Suite{New: func(t *testing.T, p core.Policy, now func() time.Time) core.Limiter {
		return newLimiter(t, rdb, p, withClock(now), WithDenyCacheSize(0))
	}}
}

func TestMoves(t *testing.T) {
	onEachServer(t, func(t *testing.T, rdb redis.UniversalClient) {
		moveSuite(rdb).RunMoves(t)
	})
}

// TestUpgradeDenialRetryAfterAdmits is issue 24's defect 1 with the deny
// cache on (TestMoves runs it off): a token bucket of 6 a minute, burst
// 10, spent, then a unit under 60 a second, burst 5. The key stays under
// the first plan, refilling one token every 10s, and the second's burst
// holds 4 owed after a unit: the denial says 60s, is not cached (its key
// is under another policy), and a client obeying it is admitted at its
// first retry, not 1ns before. It was told about 100ms, and denied 11,387
// times over 59.7s.
func TestUpgradeDenialRetryAfterAdmits(t *testing.T) {
	ctx := context.Background()
	onEachServer(t, func(t *testing.T, rdb redis.UniversalClient) {
		slow := core.TokenBucket(6, time.Minute).WithBurst(10).WithName("slow")
		fast := core.TokenBucket(60, time.Second).WithBurst(5).WithName("fast")
		f := newPolicyFixture(t, rdb, slow)
		d, err := f.lim.AllowN(ctx, "k", 10)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		for range 2 {
			d, err = f.lim.AllowPolicy(ctx, fast, "k", 1)
			require.NoError(t, err)
			assert.Equal(t, core.Decision{Limit: 60, ResetAfter: 100 * time.Second, RetryAfter: time.Minute, Policy: fast, Source: core.SourceStore, At: f.clock.Now()}, d)
		}
		f.clock.Advance(time.Minute - 1)
		d, err = f.lim.AllowPolicy(ctx, fast, "k", 1)
		require.NoError(t, err)
		assert.False(t, d.Allowed, "1ns before RetryAfter")
		assert.Equal(t, core.SourceStore, d.Source)
		f.clock.Advance(1)
		d, err = f.lim.AllowPolicy(ctx, fast, "k", 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed, "at RetryAfter: %+v", d)
	})
}

// TestADenialAfterTheClockSteppedBackCenturiesSaysWhenToRetry is issue
// 17's case 7 (RATELIMIT_MODEL_SEED=213069226301276777, whose model test
// leapt the clock from 2067 back to 1843 and then to 1723): a key written
// in 2067 and decided on a clock more than 292 years earlier is more than
// 2^63 ns from being back, a span the script's reply could not hold:
// Redis turned it into a negative integer and the denial said RetryAfter
// 0. Spans are now reported as at most 2^62 ns. The same seed then met
// the deny cache: a denial cached in 2067 was more than 2^63 ns ahead of
// 1723 and answered with a negative RetryAfter; such an entry now misses.
func TestADenialAfterTheClockSteppedBackCenturiesSaysWhenToRetry(t *testing.T) {
	ctx := context.Background()
	onEachServer(t, func(t *testing.T, rdb redis.UniversalClient) {
		t.Run("deny cache", func(t *testing.T) {
			clock := coretest.NewClock(time.Date(2067, 1, 1, 0, 0, 0, 0, time.UTC))
			lim := newLimiter(t, rdb, core.TokenBucket(3, time.Minute), withClock(clock.Now))
			d, err := lim.AllowN(ctx, "k", 3)
			require.NoError(t, err)
			require.True(t, d.Allowed)
			d, err = lim.Allow(ctx, "k")
			require.NoError(t, err)
			require.False(t, d.Allowed)
			d, err = lim.Allow(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, core.SourceDenyCache, d.Source, "the denial is cached")
			clock.Set(time.Date(1723, 1, 1, 0, 0, 0, 0, time.UTC))
			d, err = lim.Allow(ctx, "k")
			require.NoError(t, err)
			assert.False(t, d.Allowed)
			assert.Equal(t, core.SourceStore, d.Source)
			assert.Equal(t, time.Duration(1)<<62, d.ResetAfter)
			assert.GreaterOrEqual(t, d.RetryAfter, time.Duration(1)<<62-time.Minute)
		})
		for _, p := range []core.Policy{
			core.FixedWindow(3, time.Minute),
			core.SlidingWindow(3, time.Minute),
			core.TokenBucket(3, time.Minute),
			core.LeakyBucket(3, time.Minute),
		} {
			t.Run(p.Algorithm.String(), func(t *testing.T) {
				clock := coretest.NewClock(time.Date(2067, 1, 1, 0, 0, 0, 0, time.UTC))
				lim := newLimiter(t, rdb, p, withClock(clock.Now), WithDenyCacheSize(0))
				d, err := lim.AllowN(ctx, "k", 3)
				require.NoError(t, err)
				require.True(t, d.Allowed)
				clock.Set(time.Date(1723, 1, 1, 0, 0, 0, 0, time.UTC))
				for _, peek := range []bool{false, true} {
					if peek {
						d, err = lim.Peek(ctx, "k")
					} else {
						d, err = lim.Allow(ctx, "k")
					}
					require.NoError(t, err)
					assert.False(t, d.Allowed)
					assert.Equal(t, time.Duration(1)<<62, d.ResetAfter, "peek %v", peek)
					assert.GreaterOrEqual(t, d.RetryAfter, time.Duration(1)<<62-time.Minute, "peek %v", peek)
				}
			})
		}
	})
}
