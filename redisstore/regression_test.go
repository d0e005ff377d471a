package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/redisstore/redistest"
)

// Regression tests for the redisstore defects of issue 8, each named after
// its scenario.

// TestSlidingWindowAdmitsAClientAtExactlyLimitPerWindow is defect 1: the
// script's bound on B+1 consecutive buckets was Limit + Limit/B rounded
// down, while a client sending steadily at Limit per Window lands
// Limit + ceil(Limit/B) in them whenever B does not divide Limit, and was
// denied (10 of 60 requests for 5 per minute).
func TestSlidingWindowAdmitsAClientAtExactlyLimitPerWindow(t *testing.T) {
	rdb := newClient(t, redistest.Addr(t))
	ctx := context.Background()
	for _, tc := range []struct {
		p     core.Policy
		every time.Duration
	}{
		{core.SlidingWindow(5, time.Minute), 12 * time.Second},
		{core.SlidingWindow(5, time.Second), 200 * time.Millisecond},
		{core.SlidingWindow(15, 1500*time.Millisecond), 100 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("%v every %v", tc.p, tc.every), func(t *testing.T) {
			// Every phase of the requests against the buckets, in
			// sevenths of a bucket (the first, 0, is aligned).
			for phase := range 7 {
				clock := coretest.NewClock(coretest.Epoch.Add(time.Duration(phase) * tc.p.Interval() / 7))
				lim := newLimiter(t, rdb, tc.p, withClock(clock.Now))
				for i := range 60 {
					d, err := lim.Allow(ctx, "steady")
					require.NoError(t, err)
					require.True(t, d.Allowed, "phase %d/7 of a bucket: request %d at +%v denied", phase, i, clock.Now().Sub(coretest.Epoch))
					clock.Advance(tc.every)
				}
			}
		})
	}
}

// TestMaxBucketsFitLua runs a sliding window of core.MaxBuckets buckets,
// the most any store accepts: the script unpacks the whole ring onto Lua's
// stack, and still answers as the in-memory limiter does.
func TestMaxBucketsFitLua(t *testing.T) {
	rdb := newClient(t, redistest.Addr(t))
	ctx := context.Background()
	p := core.SlidingWindow(100_000, core.MaxBuckets*time.Millisecond).WithBuckets(core.MaxBuckets)
	clock := coretest.NewClock(coretest.Epoch)
	lim := newLimiter(t, rdb, p, withClock(clock.Now))
	ref, err := core.New(p, core.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ref.Close() })
	for i, n := range []int64{1, 40_000, 0, 30_000, 50_000, 1, 0} {
		clock.Advance(time.Duration(i) * 700 * time.Millisecond)
		var got, want core.Decision
		if n == 0 {
			got, err = lim.Peek(ctx, "k")
			require.NoError(t, err)
			want, err = ref.Peek(ctx, "k")
		} else {
			got, err = lim.AllowN(ctx, "k", n)
			require.NoError(t, err)
			want, err = ref.AllowN(ctx, "k", n)
		}
		require.NoError(t, err)
		require.Equal(t, want, got, "step %d, cost %d", i, n)
	}
}
