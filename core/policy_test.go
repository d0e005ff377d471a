package core_test

import (
	"math"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/internal/testkit/assert"
	"github.com/go-ratelimit/ratelimit/internal/testkit/require"

	"github.com/go-ratelimit/ratelimit/core"
)

func TestPolicyValidation(t *testing.T) {
	cases := []struct {
		name   string
		policy core.Policy
		err    string
	}{
		{"zero policy", core.Policy{}, "core: unknown algorithm 0 (build policies with FixedWindow, SlidingWindow, TokenBucket or LeakyBucket)"},
		{"zero limit", core.FixedWindow(0, time.Second), "core: FixedWindow limit must be > 0, got 0"},
		{"negative limit", core.TokenBucket(-5, time.Second), "core: TokenBucket limit must be > 0, got -5"},
		{"zero window", core.SlidingWindow(10, 0), "core: SlidingWindow window must be > 0, got 0s"},
		{"negative window", core.LeakyBucket(10, -time.Second), "core: LeakyBucket window must be > 0, got -1s"},
		{"negative burst", core.TokenBucket(10, time.Second).WithBurst(-1), "core: TokenBucket burst must be > 0, got -1"},
		{"zero burst", core.LeakyBucket(10, time.Second).WithBurst(0), "core: LeakyBucket burst must be > 0, got 0"},
		{"zero buckets", core.SlidingWindow(10, time.Second).WithBuckets(0), "core: SlidingWindow buckets must be > 0, got 0"},
		{"negative buckets", core.SlidingWindow(10, time.Second).WithBuckets(-3), "core: SlidingWindow buckets must be > 0, got -3"},
		{"bucket under 1ms", core.SlidingWindow(10, time.Second).WithBuckets(2000), "core: SlidingWindow bucket (window/buckets = 1s/2000) must be >= 1ms"},
		{"fixed window under 1ms", core.FixedWindow(10, time.Microsecond), "core: FixedWindow window must be >= 1ms, got 1µs"},
		{"fixed limit above 32 bits", core.FixedWindow(math.MaxUint32+1, time.Second), "core: FixedWindow limit must be <= 4294967295, got 4294967296"},
		{"sliding limit above 32 bits", core.SlidingWindow(math.MaxInt64, time.Hour), "core: SlidingWindow limit must be <= 4294967295, got 9223372036854775807"},
		{"rate above 1 per ns", core.TokenBucket(2_000_000_000, time.Second), "core: TokenBucket rate 2000000000 per 1s is above one request per nanosecond"},
		{"window overflows", core.TokenBucket(1, math.MaxInt64), "core: TokenBucket window must be <= 1250h59m59.627370496s (MaxSpan), got 2562047h47m16.854775807s"},
		{"window above MaxSpan", core.TokenBucket(1, core.MaxSpan+1), "core: TokenBucket window must be <= 1250h59m59.627370496s (MaxSpan), got 1250h59m59.627370497s"},
		{"fixed window above half MaxSpan", core.FixedWindow(1, core.MaxSpan/2+1), "core: FixedWindow window must be <= 625h29m59.813685248s (half MaxSpan: its recovery time is two windows), got 625h29m59.813685249s"},
		{"sliding recovery above MaxSpan", core.SlidingWindow(1, core.MaxSpan).WithBuckets(1 << 2), "core: SlidingWindow window 1250h59m59.627370496s plus one bucket (its recovery time, 1563h44m59.53421312s) must be <= 1250h59m59.627370496s (MaxSpan)"},
		{"burst refill overflows", core.TokenBucket(1, time.Hour).WithBurst(math.MaxInt64), "core: TokenBucket burst 9223372036854775807 at 1 per 1h0m0s takes longer than 1250h59m59.627370496s (MaxSpan) to refill"},
		{"burst refill far too long", core.LeakyBucket(1, 24*time.Hour).WithBurst(1 << 20), "core: LeakyBucket burst 1048576 at 1 per 24h0m0s takes longer than 1250h59m59.627370496s (MaxSpan) to refill"},
		// Issue 17's daily plan: 25,000 days to refill, which the Redis
		// store cannot compute exactly, so no store accepts it.
		{"a daily plan with a burst of 25000", core.TokenBucket(1, 24*time.Hour).WithBurst(25_000), "core: TokenBucket burst 25000 at 1 per 24h0m0s takes longer than 1250h59m59.627370496s (MaxSpan) to refill"},
		{"meter on a window", core.Policy{Algorithm: core.AlgFixedWindow, Limit: 1, Window: time.Second, Meter: true}, "core: meter mode applies to LeakyBucket only, not FixedWindow"},
		{"fixed-window count and window number above 64 bits", core.FixedWindow(math.MaxUint32, time.Second), "core: FixedWindow limit 4294967295 per 1s is too large: a key packs its count and window number into one 64-bit word, which holds at most 536870911 per 1s"},
		{"rate not kept within 0.1%", core.TokenBucket(600_000_000, time.Second), "core: TokenBucket rate 600000000 per 1s cannot be kept within 0.1%: its interval (window/limit) rounds to 1ns; use a longer window or a limit that divides it"},
		{"leaky rate not kept within 0.1%", core.LeakyBucket(1_000_000, 500700*time.Microsecond), "core: LeakyBucket rate 1000000 per 500.7ms cannot be kept within 0.1%: its interval (window/limit) rounds to 500ns; use a longer window or a limit that divides it"},
		{"sliding buckets above MaxBuckets", core.SlidingWindow(100, time.Hour).WithBuckets(3_600_000), "core: SlidingWindow buckets must be <= 4096, got 3600000"},
		{"sliding window not a multiple of its buckets", core.SlidingWindow(5, time.Second).WithBuckets(3), "core: SlidingWindow window 1s must be a whole number of nanoseconds per bucket (3 buckets)"},
		{"a name that cannot be sent in a header", core.FixedWindow(1, time.Second).WithName("pér\n"), `core: policy name "pér\n" must be printable ASCII (it is sent in the RateLimit-Policy header)`},
		{"literal token bucket without burst", core.Policy{Algorithm: core.AlgTokenBucket, Limit: 1, Window: time.Second}, "core: TokenBucket burst must be > 0, got 0"},
	}
	for _, tc := range cases {
		t.Run("rejects "+tc.name, func(t *testing.T) {
			assert.EqualError(t, tc.policy.Validate(), tc.err)
			lim, err := core.New(tc.policy)
			assert.EqualError(t, err, tc.err, "New rejects what Validate rejects")
			assert.Nil(t, lim)
		})
	}
}

func TestPolicyValidExtremes(t *testing.T) {
	for _, p := range []core.Policy{
		core.FixedWindow(math.MaxUint32, core.MaxSpan/2),
		core.FixedWindow(1, time.Millisecond),
		core.FixedWindow(536870911, time.Second),
		core.FixedWindow(524287, time.Millisecond),
		core.SlidingWindow(math.MaxUint32, time.Hour).WithBuckets(3600),
		core.TokenBucket(1_000_000_000, time.Second),
		core.TokenBucket(1, core.MaxSpan),
		core.TokenBucket(1, 24*time.Hour).WithBurst(52),
		core.SlidingWindow(1, core.MaxSpan-core.MaxSpan/4).WithBuckets(4),
		core.LeakyBucket(1<<40, (1<<40)*time.Microsecond).WithBurst(1 << 40),
		core.TokenBucket(3, time.Second),                          // an interval of 333,333,333ns: 1ns short of a third
		core.TokenBucket(1_000_000, time.Second+time.Millisecond), // 1001ns: 0.0999% fast
	} {
		t.Run("accepts "+p.String(), func(t *testing.T) {
			require.NoError(t, p.Validate())
		})
	}
}

func TestPolicyBuilders(t *testing.T) {
	p := core.TokenBucket(100, time.Minute).WithBurst(20).WithName("per-ip")
	assert.Equal(t, core.Policy{Algorithm: core.AlgTokenBucket, Limit: 100, Window: time.Minute, Burst: 20, Name: "per-ip"}, p)
	assert.Equal(t, "TokenBucket 100 per 1m0s burst 20 \"per-ip\"", p.String())
	assert.Equal(t, 600*time.Millisecond, p.Interval())
	assert.Equal(t, int64(20), p.Capacity())
	assert.Equal(t, 12*time.Second, p.Recovery())

	base := core.SlidingWindow(100, time.Second)
	tuned := base.WithBuckets(20)
	assert.Equal(t, int64(core.DefaultBuckets), base.Buckets, "With methods return a copy")
	assert.Equal(t, 50*time.Millisecond, tuned.Interval())
	assert.Equal(t, 1050*time.Millisecond, tuned.Recovery(), "B+1 buckets are counted")
	assert.Equal(t, int64(100), tuned.Capacity())

	assert.Equal(t, 2*time.Minute, core.FixedWindow(5, time.Minute).Recovery(), "a window's count matters to another policy one more window")
	assert.Equal(t, "LeakyBucket 10 per 1s burst 50 (meter)", core.LeakyBucket(10, time.Second).WithBurst(50).AsMeter().String())
	assert.Equal(t, "Algorithm(9)", core.Algorithm(9).String())
}

func TestMustNewPanicsWithTheError(t *testing.T) {
	assert.PanicsWithError(t, "core: FixedWindow limit must be > 0, got 0", func() {
		core.MustNew(core.FixedWindow(0, time.Second))
	})
	lim := core.MustNew(core.FixedWindow(1, time.Second))
	assert.NoError(t, lim.Close())
}

func TestSourceNames(t *testing.T) {
	assert.Equal(t, "store", core.SourceStore.String())
	assert.Equal(t, "deny-cache", core.SourceDenyCache.String())
	assert.Equal(t, "fallback", core.SourceFallback.String())
	assert.Equal(t, "Source(9)", core.Source(9).String())
	assert.Equal(t, core.SourceStore, core.Decision{}.Source, "the zero value is the store")
}
