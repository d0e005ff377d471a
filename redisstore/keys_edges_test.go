package redisstore

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

// TestAMeterAndADelayingLeakyBucketOnOnePrefixStayApart: WithPrefix says
// "Limiters with different policies on one prefix stay apart; changing a
// limiter's own policy starts from fresh keys". A delaying leaky bucket and
// a metering one (AsMeter) of the same numbers are different policies, but
// their keys are the same (the key names no Meter): the meter denies a
// key it has never seen, because the delaying limiter filled its queue.
func TestAMeterAndADelayingLeakyBucketOnOnePrefixStayApart(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Addr(t)
	clock := coretest.NewClock(coretest.Epoch)
	prefix := WithPrefix(testPrefix())
	delaying := newLimiter(t, newClient(t, addr), core.LeakyBucket(2, time.Minute), prefix, withClock(clock.Now))
	meter := newLimiter(t, newClient(t, addr), core.LeakyBucket(2, time.Minute).AsMeter(), prefix, withClock(clock.Now))
	for i := range 2 {
		d, err := delaying.Allow(ctx, "k")
		require.NoError(t, err)
		require.True(t, d.Allowed, "delaying limiter, request %d", i+1)
	}
	d, err := meter.Allow(ctx, "k")
	require.NoError(t, err)
	assert.True(t, d.Allowed, "the meter's first request for k: got %+v", d)
	assert.Equal(t, int64(1), d.Remaining)
}
