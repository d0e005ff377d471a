package redisstore

// Tests from an outside review of issue 26 (policies made with AllOf, cost
// settled after the response), on a real Redis. Each one fails on the code
// it was written against: see the commit that added it.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
)

// TestSettleOnRedisTokenBucketRefundsOnlyWhatTheChargeStillHolds: on Redis,
// TokenBucket(5, 1m). A charge of 5 at t0 has refilled by t0+60s, when a
// second request takes the whole bucket; refunding the first then must give
// back nothing ("a refund is given back never beyond the charge",
// core.Settler: "never more than the charge would have left taken had it
// been cost from the start").
func TestSettleOnRedisTokenBucketRefundsOnlyWhatTheChargeStillHolds(t *testing.T) {
	ctx := context.Background()
	clock := coretest.NewClock(coretest.Epoch)
	p := core.TokenBucket(5, time.Minute)
	lim := newLimiter(t, newClient(t, redistest.Addr(t)), p, withClock(clock.Now), WithDenyCacheSize(0))
	first, err := lim.AllowN(ctx, "k", 5)
	require.NoError(t, err)
	require.True(t, first.Allowed)
	clock.Advance(time.Minute)
	second, err := lim.AllowN(ctx, "k", 5)
	require.NoError(t, err)
	require.True(t, second.Allowed)
	require.NoError(t, lim.Settle(ctx, "k", first, 5, 0))
	peek, err := lim.Peek(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(0), peek.Remaining, "Remaining after refunding a charge that had fully refilled (the bucket holds the second request's 5)")
	third, err := lim.AllowN(ctx, "k", 5)
	require.NoError(t, err)
	assert.False(t, third.Allowed, "a third request of 5 at t0+60s: 10 units within one instant from a bucket of 5")
}

// TestSettleAfterPlanMoveAsInMemory: redisstore "gives the same Decision as
// the in-memory limiter for the same schedule of requests". A key admitted
// under plan A (sec, hour) moves to plan B (sec, min); then A's request is
// settled with a debt of 4. The stores settle different parts: the
// in-memory limiter those of the key's policy now (sec and min: "counted in
// units of cost under the policy the key is under now"), Redis those of
// d.Policy (sec and hour), so B's next request is denied by min in memory
// and admitted on Redis.
func TestSettleAfterPlanMoveAsInMemory(t *testing.T) {
	planA := core.AllOf(core.FixedWindow(10, time.Second).WithName("sec"), core.FixedWindow(100, time.Hour).WithName("hour"))
	planB := core.AllOf(core.FixedWindow(10, time.Second).WithName("sec"), core.FixedWindow(5, time.Minute).WithName("min"))
	w := newTwin(t, newClient(t, redistest.Addr(t)), planA, WithDenyCacheSize(0))
	d := w.allow(planA, "k", 1)
	require.True(t, d.Allowed)
	require.True(t, w.allow(planB, "k", 1).Allowed)
	w.settle("k", d, 1, 5)
	w.allow(planB, "k", 1) // the same decision on both stores
}
