package redisstore

// Tests from an outside review (review4) of the shrink3-redis refactor and
// the settlement fixes, on a real Redis.

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
)

// TestSetZeroEmptiesAPolicyBeyondTheSpecCache: under a limiter of AllOf
// policies, once 1,024 policies given with calls fill the spec cache, a
// further policy P (its part "extra" a label no other policy has) still
// works ("beyond them policies still work"). Set's doc: "Set(ctx, p, key,
// 0) deletes the key as Reset does ... and it is then full under every
// policy". After three requests under P, Set(P, key, 0) must leave Get(P,
// key) at Used 0.
func TestSetZeroEmptiesAPolicyBeyondTheSpecCache(t *testing.T) {
	ctx := context.Background()
	own := core.AllOf(core.FixedWindow(10, time.Second).WithName("sec"), core.FixedWindow(100, time.Hour).WithName("hour"))
	lim := newLimiter(t, newClient(t, redistest.Addr(t)), own)
	for i := range maxSpecs {
		q := core.AllOf(core.FixedWindow(int64(11+i), time.Second).WithName("sec"), core.FixedWindow(100, time.Hour).WithName("hour"))
		_, err := lim.Get(ctx, q, "filler")
		require.NoError(t, err)
	}
	p := core.AllOf(core.FixedWindow(10, time.Second).WithName("sec"), core.FixedWindow(5, time.Hour).WithName("extra"))
	for range 3 {
		d, err := lim.AllowPolicy(ctx, p, "k", 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	require.NoError(t, lim.Set(ctx, p, "k", 0))
	u, err := lim.Get(ctx, p, "k")
	require.NoError(t, err)
	fmt.Printf("after Set(P, k, 0): Get(P, k).Used = %d, Remaining %d\n", u.Used, u.Remaining)
	require.Equal(t, int64(0), u.Used, "Set(P, k, 0) of a policy beyond the spec cache: its part \"extra\" kept its usage")
}

// TestFallbackRenamedCompositeKeepsTheBindingPartsLimit: the limiter's own
// policy made with core.AllOf ("sec" 10 per second, "min" 3 per minute),
// given back to AllowPolicy under another Name ("gold", a plan's name),
// while the breaker keeps calls from Redis. AllowPolicy: "The Decision's
// Limit and Policy are p's ... the local fallback decides under p too";
// core.Decision.Parts: "its Limit, Remaining and ResetAfter are those of
// the part that binds". After three requests "min" binds: Limit 3, as the
// fallback answers AllowN for the same policy unnamed.
func TestFallbackRenamedCompositeKeepsTheBindingPartsLimit(t *testing.T) {
	ctx := context.Background()
	p := core.AllOf(core.FixedWindow(10, time.Second).WithName("sec"), core.FixedWindow(3, time.Minute).WithName("min"))
	s := newBreakerSetup(t, p)
	s.open(t)
	gold := p.WithName("gold")
	var d core.Decision
	for range 3 {
		var err error
		d, err = s.lim.AllowPolicy(ctx, gold, "k", 1)
		require.NoError(t, err)
		require.Equal(t, core.SourceFallback, d.Source)
		require.True(t, d.Allowed)
	}
	fmt.Printf("renamed own composite in the fallback: Limit %d, Remaining %d, Policy.Name %q, parts' Limits %d and %d\n", d.Limit, d.Remaining, d.Policy.Name, d.Parts()[0].Limit, d.Parts()[1].Limit)
	require.Equal(t, int64(0), d.Remaining)
	require.Equal(t, "gold", d.Policy.Name)
	require.Equal(t, int64(3), d.Limit, "Limit of the binding part \"min\" (Remaining 0)")
}

// TestClosedLimiterReturnsErrClosedForEveryCall: Close's doc: "afterwards
// every call returns core.ErrClosed", as the in-memory limiter does (its
// closed check comes first). After Close, AllowPolicy, Get and Set with a
// policy of another algorithm, and Set with a usage out of range, must
// return an error wrapping core.ErrClosed too.
func TestClosedLimiterReturnsErrClosedForEveryCall(t *testing.T) {
	ctx := context.Background()
	p := core.FixedWindow(5, time.Minute)
	other := core.TokenBucket(5, time.Minute)
	lim := newLimiter(t, newClient(t, redistest.Addr(t)), p)
	mem, err := core.New(p)
	require.NoError(t, err)
	require.NoError(t, lim.Close())
	require.NoError(t, mem.Close())
	for _, l := range []core.PolicyLimiter{mem, lim} {
		_, errAllow := l.AllowPolicy(ctx, other, "k", 1)
		_, errGet := l.Get(ctx, other, "k")
		errSet := l.Set(ctx, other, "k", 1)
		errUsage := l.Set(ctx, p, "k", 99)
		fmt.Printf("%T after Close:\n  AllowPolicy: %v\n  Get: %v\n  Set: %v\n  Set(99): %v\n", l, errAllow, errGet, errSet, errUsage)
		for name, err := range map[string]error{"AllowPolicy": errAllow, "Get": errGet, "Set other": errSet, "Set 99": errUsage} {
			require.ErrorIs(t, err, core.ErrClosed, "%T %s after Close", l, name)
		}
	}
}

// TestBreakerProbeIntervalAtTheTopOfItsRangeKeepsTheBreakerOpen:
// WithBreakerProbeInterval's d "must be > 0": the largest Duration is
// accepted, so the open breaker must wait that long before a probe (about
// 292 years). Once three failures open it, the next call is decided by the
// fallback without a command to Redis.
func TestBreakerProbeIntervalAtTheTopOfItsRangeKeepsTheBreakerOpen(t *testing.T) {
	s := newBreakerSetup(t, core.FixedWindow(5, time.Hour), WithBreakerProbeInterval(time.Duration(math.MaxInt64)))
	s.open(t)
	before := s.calls.n.Load()
	d, err := s.lim.Allow(context.Background(), "after")
	require.NoError(t, err)
	fmt.Printf("breaker %v after the next call, Source %v, commands sent %d, Retry %v\n", breakerState(s.lim), d.Source, s.calls.n.Load()-before, d.RetryAfter)
	require.Equal(t, int64(0), s.calls.n.Load()-before, "commands sent to Redis by the next call: none while the breaker is open")
}

// TestSettleDebtAfterARefundToZeroStaysUnderTheKeysPolicy: a limiter of a
// fixed window of 5 per second; a key admitted once under a plan of 100 per
// hour (dp), then once under the limiter's own policy (do), which moves
// it there. Both refunds (cost 0) take its count to 0 in the current
// window; then dp is settled at 3, a debt of 2. core.Settler: the
// difference is "counted in units of cost under the policy the key is
// under now", and a debt's next requests wait "until its window passes in
// a fixed or sliding window": the key's window is a second, so a second
// later a request of 5 is admitted, as the in-memory limiter admits it.
// On Redis the refund to 0 deleted the key, and the debt started it under
// dp's policy: the key stays 2 used for the hour.
func TestSettleDebtAfterARefundToZeroStaysUnderTheKeysPolicy(t *testing.T) {
	own := core.FixedWindow(5, time.Second)
	plan := core.FixedWindow(100, time.Hour)
	w := newTwin(t, newClient(t, redistest.Addr(t)), own, WithDenyCacheSize(0))
	dp := w.allow(plan, "k", 1)
	do := w.allow(own, "k", 1)
	w.settle("k", do, 1, 0)
	w.settle("k", dp, 1, 0)
	w.settle("k", dp, 1, 3)
	w.clock.Advance(time.Second)
	got, want := w.decide(own, "k", 5)
	fmt.Printf("a second after the debt, AllowN(5): Redis Allowed %v Remaining %d ResetAfter %v; memory Allowed %v Remaining %d ResetAfter %v\n",
		got.Allowed, got.Remaining, got.ResetAfter, want.Allowed, want.Remaining, want.ResetAfter)
	require.True(t, want.Allowed, "memory")
	require.True(t, got.Allowed, "Redis: the debt of 2 is still counted %v later, in dp's window of an hour", time.Second)
}
