package core_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// settled admits a request of cost charged for key, then settles it at
// cost after the given time, and returns what a Peek says then.
func settled(t *testing.T, p core.Policy, charged, cost int64, after time.Duration) core.Decision {
	t.Helper()
	ctx := context.Background()
	lim, clock := frozen(t, p)
	d, err := lim.AllowN(ctx, "k", charged)
	if err != nil || !d.Allowed {
		t.Fatalf("AllowN(%d): %+v, %v; want admitted", charged, d, err)
	}
	clock.Set(clock.Now().Add(after))
	if err := lim.Settle(ctx, "k", d, charged, cost); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	peek, err := lim.Peek(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	return peek
}

// TestSettleTable: each rule both ways, per algorithm: a debt is charged in
// full even past the quota, a refund gives back no more than was charged,
// and nothing past the window (or bucket) it was charged in.
func TestSettleTable(t *testing.T) {
	fixed := core.FixedWindow(10, time.Minute)
	sliding := core.SlidingWindow(10, time.Minute).WithBuckets(6) // 10s buckets
	token := core.TokenBucket(10, time.Minute)                    // one unit per 6s
	for _, tc := range []struct {
		name            string
		p               core.Policy
		charged, cost   int64
		after           time.Duration
		remaining       int64
		allowed         bool
		retryAfterAtMin time.Duration
	}{
		{"fixed: a refund to the estimate's window", fixed, 4, 1, 0, 9, true, 0},
		{"fixed: a refund of everything", fixed, 4, 0, 30 * time.Second, 10, true, 0},
		{"fixed: no refund once the window has ended", fixed, 4, 0, time.Minute, 10, true, 0}, // the next window is full anyway
		{"fixed: a debt past the quota", fixed, 4, 25, 30 * time.Second, 0, false, 30 * time.Second},
		{"sliding: a refund to the charge's bucket", sliding, 4, 1, 5 * time.Second, 9, true, 0},
		{"sliding: a debt in the current bucket", sliding, 4, 12, 5 * time.Second, 0, false, 0},
		{"token: a refund down to the cost", token, 4, 1, 0, 9, true, 0},
		{"token: a refund never below empty", token, 4, 0, 18 * time.Second, 10, true, 0},
		{"token: a debt", token, 4, 13, 0, 0, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := settled(t, tc.p, tc.charged, tc.cost, tc.after)
			if d.Remaining != tc.remaining || d.Allowed != tc.allowed {
				t.Errorf("after settling %d charged at %d, %v later: Peek %+v; want Remaining %d, Allowed %v", tc.charged, tc.cost, tc.after, d, tc.remaining, tc.allowed)
			}
			if d.RetryAfter < tc.retryAfterAtMin {
				t.Errorf("RetryAfter %v, want at least %v", d.RetryAfter, tc.retryAfterAtMin)
			}
		})
	}
}

// TestSettleDelayingLeakyBucket: a delaying leaky bucket takes a refund
// only while no request was queued after the one settled (a request
// canceled during its Delay, say): those queued after it keep their turns,
// so nothing is given back then. As a part of AllOf it gives nothing
// back (a metering part does).
func TestSettleDelayingLeakyBucket(t *testing.T) {
	ctx := context.Background()
	p := core.LeakyBucket(1, time.Second).WithBurst(4)
	allow := func(lim *core.MemoryLimiter, want time.Duration) core.Decision {
		t.Helper()
		d, err := lim.AllowN(ctx, "k", 1)
		if err != nil || !d.Allowed || d.Delay != want {
			t.Fatalf("AllowN: %+v, %v; want admitted with Delay %v", d, err, want)
		}
		return d
	}
	remaining := func(lim core.Limiter, want int64, why string) {
		t.Helper()
		if peek, err := lim.Peek(ctx, "k"); err != nil || peek.Remaining != want {
			t.Errorf("%s: Peek %+v, %v; want Remaining %d", why, peek, err, want)
		}
	}
	settle := func(lim core.Settler, d core.Decision) {
		t.Helper()
		if err := lim.Settle(ctx, "k", d, 1, 0); err != nil {
			t.Fatal(err)
		}
	}

	lim, clock := frozen(t, p)
	allow(lim, 0)
	d := allow(lim, time.Second)
	settle(lim, d)
	remaining(lim, 3, "the last queued, refunded")
	if again := allow(lim, time.Second); again.Remaining != 2 {
		t.Errorf("the next request takes the turn given back: Remaining %d, want 2", again.Remaining)
	}

	d = allow(lim, 2*time.Second)
	allow(lim, 3*time.Second) // queued after d
	settle(lim, d)
	remaining(lim, 0, "a request queued after the one settled")

	clock.Advance(500 * time.Millisecond) // the TAT is still d's successor's
	remaining(lim, 0, "later, still queued after")

	both, _ := frozen(t, core.AllOf(p, core.LeakyBucket(10, time.Minute).WithBurst(10).AsMeter()))
	d, err := both.AllowN(ctx, "k", 1)
	if err != nil || !d.Allowed {
		t.Fatalf("AllOf: %+v, %v", d, err)
	}
	settle(both, d)
	if parts := mustPeek(t, both).Parts(); parts[0].Remaining != 3 || parts[1].Remaining != 10 {
		t.Errorf("AllOf: parts' Remaining %d and %d after a refund, want 3 (nothing back) and 10", parts[0].Remaining, parts[1].Remaining)
	}
}

func mustPeek(t *testing.T, lim core.Limiter) core.Decision {
	t.Helper()
	d, err := lim.Peek(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestSettleRefundStaysInItsWindow: 10 admitted in one fixed window, 4 of
// them by a request charged 4 and refunded after the window ended: the next
// window still admits exactly 10, not 14.
func TestSettleRefundStaysInItsWindow(t *testing.T) {
	ctx := context.Background()
	lim, clock := frozen(t, core.FixedWindow(10, time.Minute))
	start := clock.Now()
	d4, _ := lim.AllowN(ctx, "k", 4)
	lim.AllowN(ctx, "k", 6)
	clock.Set(start.Add(time.Minute)) // the next window
	for range 10 {
		if d, _ := lim.Allow(ctx, "k"); !d.Allowed {
			t.Fatalf("denied in a new window: %+v", d)
		}
	}
	if err := lim.Settle(ctx, "k", d4, 4, 0); err != nil {
		t.Fatal(err)
	}
	if d, _ := lim.Allow(ctx, "k"); d.Allowed {
		t.Errorf("the 11th request of a window after a refund of the window before: admitted, want denied")
	}
}

// TestSettleDebtIsNeverRefused: a debt on a key already at its quota is
// charged in full, and the key waits it out.
func TestSettleDebtIsNeverRefused(t *testing.T) {
	ctx := context.Background()
	lim, clock := frozen(t, core.TokenBucket(10, time.Second)) // 100ms a unit
	d, _ := lim.AllowN(ctx, "k", 10)
	if err := lim.Settle(ctx, "k", d, 10, 30); err != nil {
		t.Fatal(err)
	}
	got, _ := lim.Allow(ctx, "k")
	if got.Allowed || got.RetryAfter != 2*time.Second+100*time.Millisecond {
		t.Errorf("after a debt of 20 past a spent burst of 10: %+v; want denied for 2.1s", got)
	}
	clock.Set(clock.Now().Add(got.RetryAfter))
	if got, _ := lim.Allow(ctx, "k"); !got.Allowed {
		t.Errorf("denied after its RetryAfter: %+v", got)
	}
}

// TestSettleHugeDebtIsCharged: a debt of math.MaxInt64-1 units on every
// algorithm saturates and denies: no sum of a count and the debt wraps
// around to a refund.
func TestSettleHugeDebtIsCharged(t *testing.T) {
	ctx := context.Background()
	for _, p := range []core.Policy{
		core.FixedWindow(10, time.Minute),
		core.SlidingWindow(10, time.Minute),
		core.TokenBucket(10, time.Minute),
		core.LeakyBucket(10, time.Minute),
		core.AllOf(core.SlidingWindow(10, time.Second).WithName("sec"), core.SlidingWindow(100, time.Hour).WithName("hour")),
	} {
		lim, _ := frozen(t, p)
		d, _ := lim.Allow(ctx, "k")
		lim.Allow(ctx, "k")
		if err := lim.Settle(ctx, "k", d, 1, math.MaxInt64); err != nil {
			t.Fatalf("%v: %v", p, err)
		}
		if peek, _ := lim.Peek(ctx, "k"); peek.Allowed || peek.Remaining != 0 {
			t.Errorf("%v, after a debt of MaxInt64-1: Peek %+v; want denied, 0 remaining", p, peek)
		}
	}
}

// TestSettleAfterPlanMoveSettlesTheSharedParts: a request charged 4 under
// plan A (sec, day) is settled after the key moved to plan B (sec, min),
// where it was charged 1: the part both plans have (sec) takes the refund
// or the debt, the part B added (min) neither, whichever way.
func TestSettleAfterPlanMoveSettlesTheSharedParts(t *testing.T) {
	ctx := context.Background()
	planA := core.AllOf(core.FixedWindow(10, time.Second).WithName("sec"), core.FixedWindow(100, 24*time.Hour).WithName("day"))
	planB := core.AllOf(core.FixedWindow(10, time.Second).WithName("sec"), core.FixedWindow(5, time.Minute).WithName("min"))
	for _, tc := range []struct {
		name     string
		cost     int64
		sec, min int64 // Remaining of B's parts after the settlement
	}{
		{"refund", 0, 9, 4}, // sec: 5 used, 4 given back
		{"debt", 8, 1, 4},   // sec: 5 used, 4 more
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim, _ := frozen(t, planA)
			first, _ := lim.AllowPolicy(ctx, planA, "k", 4)
			if d, _ := lim.AllowPolicy(ctx, planB, "k", 1); !first.Allowed || !d.Allowed {
				t.Fatalf("AllowPolicy(A, 4), AllowPolicy(B, 1): %+v, %+v; want both admitted", first, d)
			}
			if err := lim.Settle(ctx, "k", first, 4, tc.cost); err != nil {
				t.Fatal(err)
			}
			d, _ := lim.AllowPolicy(ctx, planB, "k", 5) // denied by min at least: nothing charged
			if parts := d.Parts(); d.Allowed || parts[0].Remaining != tc.sec || parts[1].Remaining != tc.min {
				t.Errorf("after settling A's 4 at %d: B's request of 5 %+v, parts %+v; want denied, sec %d and min %d remaining", tc.cost, d, parts, tc.sec, tc.min)
			}
		})
	}
}

func TestSettleAllOfSettlesEachPart(t *testing.T) {
	ctx := context.Background()
	lim, _ := frozen(t, core.AllOf(
		core.FixedWindow(10, time.Second).WithName("per-second"),
		core.FixedWindow(100, time.Hour).WithName("per-hour")))
	d, _ := lim.AllowN(ctx, "k", 5)
	if err := lim.Settle(ctx, "k", d, 5, 2); err != nil {
		t.Fatal(err)
	}
	p, _ := lim.Peek(ctx, "k")
	if parts := p.Parts(); parts[0].Remaining != 8 || parts[1].Remaining != 98 {
		t.Errorf("after settling 5 at 2: parts %+v; want 8 and 98 remaining", parts)
	}
}

func TestSettleErrors(t *testing.T) {
	ctx := context.Background()
	lim, _ := frozen(t, core.FixedWindow(1, time.Minute))
	ok, _ := lim.Allow(ctx, "k")
	denied, _ := lim.Allow(ctx, "k")
	if err := lim.Settle(ctx, "k", denied, 1, 0); !errors.Is(err, core.ErrNotAdmitted) {
		t.Errorf("settling a denial: got %v, want ErrNotAdmitted", err)
	}
	for _, c := range [][2]int64{{0, 1}, {1, -1}} {
		if err := lim.Settle(ctx, "k", ok, c[0], c[1]); !errors.Is(err, core.ErrInvalidCost) {
			t.Errorf("Settle(charged %d, cost %d): got %v, want ErrInvalidCost", c[0], c[1], err)
		}
	}
	lim.Close()
	if err := lim.Settle(ctx, "k", ok, 1, 0); !errors.Is(err, core.ErrClosed) {
		t.Errorf("after Close: got %v, want ErrClosed", err)
	}
}
