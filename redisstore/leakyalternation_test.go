package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
)

// The outside review's leaky-bucket alternation on Redis: a = 3 per 10s
// (one per 3.333333333s), b = 10 per 10s (one per second), both delaying.
// The deny cache is off so that every answer is the script's.

// TestLeakyBucketDeniedAlternationLeavesTheKey: three requests under a
// fill its queue, which ends at 9.999999999s; then, with no time passing,
// denials under b and a in turn. Nothing is admitted and no time passes,
// so every round must answer as the first: b serves after a's queue and
// its depth of 10s admits one once 0.999999999s has passed; a admits one
// once a's first request has left, after 3.333333333s. The debt used to be
// multiplied by 10/3 on each trip: a's RetryAfter 26.7s, 1m44s, 6m3s, ...
// 42h after 8 rounds.
func TestLeakyBucketDeniedAlternationLeavesTheKey(t *testing.T) {
	ctx := context.Background()
	a := core.LeakyBucket(3, 10*time.Second).WithName("a")
	b := core.LeakyBucket(10, 10*time.Second).WithName("b")
	onEachServer(t, func(t *testing.T, rdb redis.UniversalClient) {
		clock := coretest.NewClock(time.Unix(1_700_000_000, 0))
		lim := newLimiter(t, rdb, a, withClock(clock.Now), WithDenyCacheSize(0))
		for i := range 3 {
			d, err := lim.AllowPolicy(ctx, a, "client", 1)
			require.NoError(t, err)
			require.True(t, d.Allowed, "request %d under a: %+v", i, d)
		}
		for round := range 8 {
			for _, c := range []struct {
				p            core.Policy
				retry, reset time.Duration
			}{
				{b, 999_999_999, 9_999_999_999},
				{a, 3_333_333_333, 9_999_999_999},
			} {
				d, err := lim.AllowPolicy(ctx, c.p, "client", 1)
				require.NoError(t, err)
				want := core.Decision{Limit: c.p.Limit, ResetAfter: c.reset, RetryAfter: c.retry, Policy: c.p, Source: core.SourceStore, At: clock.Now().UTC()}
				require.Equal(t, want, d, "round %d under %s", round, c.p.Name)
			}
		}
	})
}

// TestLeakyBucketAlternationAsInMemory: a request every 2s, a and b in
// turn, 120 calls: the script answers exactly as core's MemoryLimiter,
// whose answers core's own test holds to the history's bounds (in
// particular, no lockout: the key is new once its queue has left).
func TestLeakyBucketAlternationAsInMemory(t *testing.T) {
	ctx := context.Background()
	a := core.LeakyBucket(3, 10*time.Second).WithName("a")
	b := core.LeakyBucket(10, 10*time.Second).WithName("b")
	onEachServer(t, func(t *testing.T, rdb redis.UniversalClient) {
		clock := coretest.NewClock(time.Unix(1_700_000_000, 0))
		lim := newLimiter(t, rdb, a, withClock(clock.Now), WithDenyCacheSize(0))
		mem := core.MustNew(a, core.WithClock(clock.Now))
		t.Cleanup(func() { _ = mem.Close() })
		admitted := 0
		for i := range 120 {
			p := a
			if i%2 == 1 {
				p = b
			}
			got, err := lim.AllowPolicy(ctx, p, "client", 1)
			require.NoError(t, err)
			want, err := mem.AllowPolicy(ctx, p, "client", 1)
			require.NoError(t, err)
			got.Source, want.Source = 0, 0
			require.Equal(t, want, got, "call %d (%s) at +%ds", i, p.Name, 2*i)
			if got.Allowed {
				admitted++
			}
			clock.Advance(2 * time.Second)
		}
		require.Greater(t, admitted, 6, "the old code admitted 6 and then locked the key out")
		clock.Advance(time.Minute)
		for _, p := range []core.Policy{a, b} {
			u, err := lim.Get(ctx, p, "client")
			require.NoError(t, err)
			require.Equal(t, core.Usage{Remaining: p.Burst, Policy: p}, u, "Get(%s) once the queue has left", p.Name)
		}
	})
}
