package redisstore

// Tests from an outside review of issue 26 (policies made with AllOf), on a
// real Redis.

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

// TestCompositeInFallbackReportsTheBindingPartsLimit: while Redis fails, the
// local fallback decides a policy made with core.AllOf, "sec" (10 per
// second) and "min" (3 per minute). After three requests "min" binds: 0
// remaining. core.Decision.Parts: "its Limit, Remaining and ResetAfter are
// those of the part that binds", as the in-memory limiter answers; the
// X-RateLimit-* fields "describe the part that binds" (nethttp).
func TestCompositeInFallbackReportsTheBindingPartsLimit(t *testing.T) {
	ctx := context.Background()
	p := core.AllOf(core.FixedWindow(10, time.Second).WithName("sec"), core.FixedWindow(3, time.Minute).WithName("min"))
	s := newBreakerSetup(t, p)
	s.open(t)
	var d core.Decision
	for range 3 {
		var err error
		d, err = s.lim.AllowN(ctx, "k", 1)
		require.NoError(t, err)
		require.Equal(t, core.SourceFallback, d.Source)
		require.True(t, d.Allowed)
	}
	parts := d.Parts()
	require.Len(t, parts, 2)
	assert.Equal(t, int64(0), d.Remaining, "the binding part's Remaining")
	assert.Equal(t, parts[1].Limit, d.Limit, "Limit of the decision in the fallback, whose binding part is min (Remaining %d, ResetAfter %v)", d.Remaining, d.ResetAfter)
}

// TestCompositeDelayingLeakyBucketsKeepEachPartsQueueBoundOnRedis: the
// TestCompositeDelayingLeakyBucketsKeepEachPartsQueueBoundOnRedis is core's
// TestAllOfDelayingLeakyBucketsKeepEachPartsQueueBound on Redis: two
// delaying parts are refused, one with the other a meter keeps its bound. AllOf("fast" 10/s at most 2 in the bucket, "slow" 1/s at most 10),
// a request every 100 ms: "Each part keeps its own promise", and a leaky
// bucket's is that "the requests not yet served at t (served at t or
// later) cost at most P.Burst, this one included".
func TestCompositeDelayingLeakyBucketsKeepEachPartsQueueBoundOnRedis(t *testing.T) {
	ctx := context.Background()
	clock := coretest.NewClock(coretest.Epoch)
	fast := core.LeakyBucket(10, time.Second).WithBurst(2).WithName("fast")
	slow := core.LeakyBucket(1, time.Second).WithBurst(10).WithName("slow")
	_, err := New(newClient(t, redistest.Addr(t)), core.AllOf(fast, slow))
	require.ErrorContains(t, err, "one delaying leaky bucket at most: make part 2 a meter")
	lim := newLimiter(t, newClient(t, redistest.Addr(t)), core.AllOf(fast, slow.AsMeter()), withClock(clock.Now), WithDenyCacheSize(0))
	var served []time.Duration // of the requests admitted, from the first
	admitted := 0
	for i := range 30 {
		at := clock.Now().Sub(coretest.Epoch)
		d, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		if d.Allowed {
			admitted++
			served = append(served, at+d.Delay)
			queued := 0
			for _, s := range served {
				if s >= at {
					queued++
				}
			}
			require.LessOrEqual(t, queued, int(fast.Burst), "request %d at +%v admitted with Delay %v: admitted requests not yet served (served at %v)", i+1, at, d.Delay, served)
		}
		clock.Advance(100 * time.Millisecond)
	}
	assert.Equal(t, 12, admitted, "slow, a meter: its burst of 10, then 1/s over 2.9s")
}

// TestCompositeLimiterKeepsAPartWhenMovedToAPolicyOfOnePart: a limiter of
// AllOf(per-second, per-day) also "decides policies of one part too, as a
// policy of one part", and a key moved between them "keeps what it used if
// the new policy has a part of the same label" (core.AllOf). Ten requests
// under the composite spend per-second; the eleventh, under
// TokenBucket(10, 1s).WithName("per-second") alone, must be denied, as in
// memory. On Redis the policy of one part is keyed by the label of its
// numbers ("tokenbucket-10-per-1s"), its Name stripped, so it starts empty.
func TestCompositeLimiterKeepsAPartWhenMovedToAPolicyOfOnePart(t *testing.T) {
	perSecond := core.TokenBucket(10, time.Second).WithName("per-second")
	both := core.AllOf(perSecond, core.TokenBucket(1000, 24*time.Hour).WithName("per-day"))
	w := newTwin(t, newClient(t, redistest.Addr(t)), both, WithDenyCacheSize(0))
	for range 10 {
		require.True(t, w.allow(both, "k", 1).Allowed)
	}
	w.allow(perSecond, "k", 1) // the same decision on both stores: denied
}

// TestSetZeroLeavesTheKeyFullUnderEveryPolicy: Limiter.Set: "Set(ctx, p, key,
// 0) deletes the key, which is then full under every policy". A key spent
// under plan B (sec, min 2 per minute) is Set to 0 under the limiter's own
// policy (sec, day); plan B's next request must then be admitted, as in
// memory. On Redis min's key is left as it was, and the request is denied.
func TestSetZeroLeavesTheKeyFullUnderEveryPolicy(t *testing.T) {
	own := core.AllOf(core.TokenBucket(10, time.Second).WithName("sec"), core.TokenBucket(1000, 24*time.Hour).WithName("day"))
	planB := core.AllOf(core.TokenBucket(10, time.Second).WithName("sec"), core.TokenBucket(2, time.Minute).WithName("min"))
	w := newTwin(t, newClient(t, redistest.Addr(t)), own, WithDenyCacheSize(0))
	for range 2 {
		require.True(t, w.allow(planB, "k", 1).Allowed)
	}
	require.False(t, w.allow(planB, "k", 1).Allowed)
	require.NoError(t, w.red.Set(context.Background(), own, "k", 0))
	require.NoError(t, w.mem.Set(context.Background(), own, "k", 0))
	w.allow(planB, "k", 1) // the same decision on both stores: admitted
}

// TestPartsOfACostAboveCapacityDenyItOnRedis is core's
// TestPartsOfACostAboveCapacityDenyIt on Redis: a request of cost 3 under
// AllOf(2 per minute, 10 per hour) is refused, and its parts say that the
// minute's part (capacity 2) refuses it and the hour's admits it.
func TestPartsOfACostAboveCapacityDenyItOnRedis(t *testing.T) {
	ctx := context.Background()
	p := core.AllOf(core.FixedWindow(2, time.Minute).WithName("minute"), core.FixedWindow(10, time.Hour).WithName("hour"))
	lim := newLimiter(t, newClient(t, redistest.Addr(t)), p)
	for name, call := range map[string]func() (core.Decision, error){
		"AllowN":      func() (core.Decision, error) { return lim.AllowN(ctx, "k", 3) },
		"AllowPolicy": func() (core.Decision, error) { return lim.AllowPolicy(ctx, p, "k", 3) },
	} {
		d, err := call()
		require.ErrorIs(t, err, core.ErrCostExceedsCapacity, name)
		require.False(t, d.Allowed, name)
		assert.Equal(t, time.Duration(0), d.RetryAfter, name)
		parts := d.Parts()
		require.Len(t, parts, 2, name)
		assert.False(t, parts[0].Allowed, "%s: the minute's part refuses a cost above its capacity", name)
		assert.True(t, parts[1].Allowed, "%s: the hour's part alone admits it", name)
		assert.Equal(t, time.Duration(0), parts[0].RetryAfter, name)
	}
}
