package redisstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
)

// conformance runs the shared suite of the core.Limiter contract through
// rdb, the scripts reading the suite's clock.
func conformance(t *testing.T, rdb redis.UniversalClient, opts ...Option) {
	coretest.Run(t, func(t *testing.T, p core.Policy, now func() time.Time) core.Limiter {
		// The suite releases 1000 goroutines at once; under the race
		// detector on 2 cores that takes longer than the default timeout.
		return storeSource{newLimiter(t, rdb, p, append([]Option{withClock(now), WithTimeout(30 * time.Second)}, opts...)...)}
	})
}

// storeSource reports the deny cache's answers as the store's: the
// suite's tables of expected Decisions predate Decision.Source and expect
// SourceStore. (The model test, which knows about deny caches, sees the
// limiter as it is.)
type storeSource struct{ *Limiter }

func (s storeSource) AllowN(ctx context.Context, key string, n int64) (core.Decision, error) {
	d, err := s.Limiter.AllowN(ctx, key, n)
	if d.Source == core.SourceDenyCache {
		d.Source = core.SourceStore
	}
	return d, err
}

func TestConformance(t *testing.T) {
	rdb := newClient(t, redistest.Addr(t))
	t.Run("with the deny cache", func(t *testing.T) { conformance(t, rdb) })
	t.Run("without the deny cache", func(t *testing.T) { conformance(t, rdb, WithDenyCacheSize(0)) })
}

// TestMatchesMemory drives random schedules through the Redis limiter and
// the in-memory one on the same clock and requires identical Decisions,
// with policies and steps chosen to stress the scripts' arithmetic:
// intervals that are not whole microseconds, nanosecond steps, odd bucket
// counts.
func TestMatchesMemory(t *testing.T) {
	rdb := newClient(t, redistest.Addr(t))
	policies := []core.Policy{
		core.TokenBucket(3, time.Second),                            // interval 333333333ns
		core.TokenBucket(7, time.Minute).WithBurst(4),               // 8571428571ns
		core.LeakyBucket(3, time.Second).WithBurst(5),               // delays
		core.LeakyBucket(1000, 333*time.Millisecond).AsMeter(),      // 333µs
		core.FixedWindow(5, 1500*time.Microsecond+7),                // a window of 1500007ns
		core.FixedWindow(4, time.Second),                            //
		core.SlidingWindow(9, 7*142857142).WithBuckets(7),           // buckets of 142857142ns
		core.SlidingWindow(20, 3*3333333).WithBuckets(3),            // 3333333ns
		core.SlidingWindow(1, 5*time.Second).WithBuckets(5),         // Limit < B
		core.SlidingWindow(23, 6*time.Second).WithBuckets(6),        // B does not divide Limit
		core.SlidingWindow(1000, 24*time.Hour).WithBuckets(24),      // long spans
		core.TokenBucket(1, 50*24*time.Hour),                        // close to the 2^52 ns bound
		core.TokenBucket(1_000_000, time.Second).WithBurst(100_000), // 1µs interval
	}
	for i, p := range policies {
		t.Run(p.String(), func(t *testing.T) {
			clock := coretest.NewClock(coretest.Epoch.Add(time.Duration(i) * 12345678901))
			lim := newLimiter(t, rdb, p, withClock(clock.Now))
			ref, err := core.New(p, core.WithClock(clock.Now))
			require.NoError(t, err)
			t.Cleanup(func() { _ = ref.Close() })
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			keys := []string{"a", "b{x}", ""}
			ctx := context.Background()
			for step := range 400 {
				// Mostly short steps at nanosecond resolution, some long.
				span := int64(p.Interval())
				if span == 0 {
					span = int64(p.Window)
				}
				gap := rng.Int64N(span/2 + 1)
				if rng.IntN(10) == 0 {
					gap = rng.Int64N(int64(p.Recovery()) + 1)
				}
				clock.Advance(time.Duration(gap))
				k := keys[rng.IntN(len(keys))]
				n := rng.Int64N(min(p.Capacity(), 6) + 1)
				if rng.IntN(30) == 0 {
					n = p.Capacity() + 1
				}
				var got, want core.Decision
				var gotErr, wantErr error
				if n == 0 {
					got, gotErr = lim.Peek(ctx, k)
					want, wantErr = ref.Peek(ctx, k)
				} else {
					got, gotErr = lim.AllowN(ctx, k, n)
					want, wantErr = ref.AllowN(ctx, k, n)
				}
				require.Equal(t, wantErr == nil, gotErr == nil, "step %d: error %v, want %v", step, gotErr, wantErr)
				require.Equal(t, errors.Is(wantErr, core.ErrCostExceedsCapacity), errors.Is(gotErr, core.ErrCostExceedsCapacity), "step %d", step)
				if got.Source == core.SourceDenyCache {
					got.Source = core.SourceStore // the same Decision, from this process's cache
				}
				require.Equal(t, want, got, "step %d: key %q cost %d at +%v", step, k, n, clock.Now().Sub(coretest.Epoch))
			}
		})
	}
}
