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

// TestSettleAfterPlanMoveRefundsNoNewPart: a key admitted with an estimate of
// 5 under plan A (per-second and per-day) moves to plan B (per-second and
// per-minute, 5 a minute), whose new per-minute part starts empty and is
// charged 5 by B's first request. Settling A's request at 0 may give back
// what it charged, to the parts it charged ("a refund ... never beyond what
// was charged"; "a part that is new starts empty"), never the per-minute
// part, which it never charged: B's per-minute part has then admitted 5 of
// its 5 this minute, and a further 5 must be denied.
func TestSettleAfterPlanMoveRefundsNoNewPart(t *testing.T) {
	ctx := context.Background()
	planA := core.AllOf(core.TokenBucket(10, time.Second).WithName("per-second"), core.TokenBucket(100, 24*time.Hour).WithName("per-day"))
	planB := core.AllOf(core.TokenBucket(10, time.Second).WithName("per-second"), core.TokenBucket(5, time.Minute).WithName("per-minute"))
	lim, _ := frozen(t, planA)
	first, err := lim.AllowPolicy(ctx, planA, "k", 5)
	if err != nil || !first.Allowed {
		t.Fatalf("AllowPolicy(A, 5): %+v, %v", first, err)
	}
	if d, _ := lim.AllowPolicy(ctx, planB, "k", 5); !d.Allowed {
		t.Fatalf("AllowPolicy(B, 5): %+v, want admitted", d)
	}
	if err := lim.Settle(ctx, "k", first, 5, 0); err != nil {
		t.Fatal(err)
	}
	d, _ := lim.AllowPolicy(ctx, planB, "k", 5)
	if d.Allowed {
		parts := d.Parts()
		t.Errorf("after refunding A's request, B admitted another 5 at the same instant: per-minute part Remaining %d after it (10 admitted of 5); want denied by per-minute", parts[1].Remaining)
	}
}
