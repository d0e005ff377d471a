package core_test

import (
	"math"
	"testing"
	"time"

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
			if err := tc.policy.Validate(); err == nil || err.Error() != tc.err {
				t.Errorf("Validate() = %v, want %s", err, tc.err)
			}
			lim, err := core.New(tc.policy)
			if err == nil || err.Error() != tc.err {
				t.Errorf("New rejects what Validate rejects: got %v, want %s", err, tc.err)
			}
			if lim != nil {
				t.Errorf("New returned a limiter with its error")
			}
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
			if err := p.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestPolicyBuilders(t *testing.T) {
	p := core.TokenBucket(100, time.Minute).WithBurst(20).WithName("per-ip")
	if want := (core.Policy{Algorithm: core.AlgTokenBucket, Limit: 100, Window: time.Minute, Burst: 20, Name: "per-ip"}); p != want {
		t.Errorf("built %#v, want %#v", p, want)
	}
	base := core.SlidingWindow(100, time.Second)
	tuned := base.WithBuckets(20)
	if base.Buckets != core.DefaultBuckets {
		t.Errorf("WithBuckets changed its receiver: Buckets = %d, want %d", base.Buckets, core.DefaultBuckets)
	}
	for _, tc := range []struct {
		name      string
		got, want time.Duration
	}{
		{"TokenBucket Interval", p.Interval(), 600 * time.Millisecond},
		{"TokenBucket Recovery", p.Recovery(), 12 * time.Second},
		{"SlidingWindow Interval", tuned.Interval(), 50 * time.Millisecond},
		{"SlidingWindow Recovery (B+1 buckets are counted)", tuned.Recovery(), 1050 * time.Millisecond},
		{"FixedWindow Recovery (a window's count matters to another policy one more window)", core.FixedWindow(5, time.Minute).Recovery(), 2 * time.Minute},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if got := p.Capacity(); got != 20 {
		t.Errorf("TokenBucket Capacity: got %d, want 20", got)
	}
	if got := tuned.Capacity(); got != 100 {
		t.Errorf("SlidingWindow Capacity: got %d, want 100", got)
	}
	for _, tc := range []struct{ got, want string }{
		{p.String(), `TokenBucket 100 per 1m0s burst 20 "per-ip"`},
		{core.LeakyBucket(10, time.Second).WithBurst(50).AsMeter().String(), "LeakyBucket 10 per 1s burst 50 (meter)"},
		{core.Algorithm(9).String(), "Algorithm(9)"},
	} {
		if tc.got != tc.want {
			t.Errorf("String: got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestSourceNames(t *testing.T) {
	for _, tc := range []struct {
		s    core.Source
		want string
	}{
		{core.SourceStore, "store"},
		{core.SourceDenyCache, "deny-cache"},
		{core.SourceFallback, "fallback"},
		{core.Source(9), "Source(9)"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("Source %d: got %q, want %q", int(tc.s), got, tc.want)
		}
	}
	if got := (core.Decision{}).Source; got != core.SourceStore {
		t.Errorf("the zero Decision's Source is %v, want the store", got)
	}
}

func TestMustNewPanicsWithTheError(t *testing.T) {
	const want = "core: FixedWindow limit must be > 0, got 0"
	func() {
		defer func() {
			r := recover()
			if err, ok := r.(error); !ok || err.Error() != want {
				t.Errorf("MustNew of an invalid policy panicked with %v, want the error %q", r, want)
			}
		}()
		core.MustNew(core.FixedWindow(0, time.Second))
	}()
	lim := core.MustNew(core.FixedWindow(1, time.Second))
	if err := lim.Close(); err != nil {
		t.Error(err)
	}
}

func TestPolicyLabel(t *testing.T) {
	for _, tc := range []struct {
		p    core.Policy
		want string
	}{
		{core.FixedWindow(100, time.Minute).WithName("per-ip"), "per-ip"},
		{core.TokenBucket(100, time.Minute), "tokenbucket-100-per-60s"},
		{core.FixedWindow(5, 1500*time.Millisecond), "fixedwindow-5-per-1.5s"},
		{core.Policy{}, ""},
	} {
		if got := tc.p.Label(); got != tc.want {
			t.Errorf("%+v.Label(): got %q, want %q", tc.p, got, tc.want)
		}
	}
}
