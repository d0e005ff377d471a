package core_test

// Tests from an outside review of issue 26 (cost settled after the
// response). Each one fails on the code it was written against: see the
// commit that added it.

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// TestSettleTokenBucketRefundsOnlyWhatTheChargeStillHolds: a token bucket of
// 5 per minute (a unit every 12 s). A request charged an estimate of 5 at t0
// has refilled entirely by t0+60s, when another request takes the whole
// bucket. Settling the first at 0 then must give back nothing: had it cost 0
// from the start, the bucket would hold the second request's 5 all the same
// ("a token bucket ... at most what is still taken, so never more than the
// charge would have left taken had it been cost from the start").
func TestSettleTokenBucketRefundsOnlyWhatTheChargeStillHolds(t *testing.T) {
	ctx := context.Background()
	lim, clock := frozen(t, core.TokenBucket(5, time.Minute))
	first, err := lim.AllowN(ctx, "k", 5)
	if err != nil || !first.Allowed {
		t.Fatalf("AllowN(5) at t0: %+v, %v", first, err)
	}
	clock.Advance(time.Minute) // the first request's 5 units are back
	second, err := lim.AllowN(ctx, "k", 5)
	if err != nil || !second.Allowed {
		t.Fatalf("AllowN(5) at t0+60s: %+v, %v", second, err)
	}
	if err := lim.Settle(ctx, "k", first, 5, 0); err != nil {
		t.Fatal(err)
	}
	peek, _ := lim.Peek(ctx, "k")
	if peek.Allowed || peek.Remaining != 0 {
		t.Errorf("after refunding, at t0+60s, a charge of 5 made at t0 that had fully refilled: Peek Allowed %v Remaining %d; want denied with 0 remaining (the bucket holds the second request's 5)", peek.Allowed, peek.Remaining)
	}
	third, _ := lim.AllowN(ctx, "k", 5)
	if third.Allowed {
		t.Errorf("a third request of 5 at t0+60s was admitted: 10 units within one instant from a bucket of 5")
	}
}

// TestSettleHugeDebtOnSlidingWindowIsCharged: SlidingWindow(10, 1m), two
// unit requests in one bucket, then the first settled at a final cost of
// math.MaxInt64 (a runaway token count). A debt "is charged at once and never
// refused, since the request was served: the key may go past its quota, and
// its next requests wait": the key must be denied, not handed its quota back.
func TestSettleHugeDebtOnSlidingWindowIsCharged(t *testing.T) {
	ctx := context.Background()
	lim, _ := frozen(t, core.SlidingWindow(10, time.Minute))
	first, _ := lim.Allow(ctx, "k")
	if d, _ := lim.Allow(ctx, "k"); !first.Allowed || !d.Allowed {
		t.Fatalf("two unit requests: %+v, %+v; want both admitted", first, d)
	}
	if err := lim.Settle(ctx, "k", first, 1, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	peek, _ := lim.Peek(ctx, "k")
	if peek.Allowed || peek.Remaining != 0 {
		t.Errorf("after a debt of MaxInt64-1 units: Peek Allowed %v Remaining %d; want denied with 0 remaining", peek.Allowed, peek.Remaining)
	}
}
