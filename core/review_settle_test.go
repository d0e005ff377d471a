package core_test

// Tests from an outside review of issue 26 (cost settled after the
// response). Each one fails on the code it was written against: see the
// commit that added it.

import (
	"context"
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
