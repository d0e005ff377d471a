package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// TestPartsOfACostAboveCapacityDenyIt: Decision.Parts is "what each part
// alone would say of the request", and "the decision itself is admitted
// when every part admits". A request of cost 3 under AllOf(2 per minute, 10
// per hour) is refused (ErrCostExceedsCapacity), and the 2-per-minute part
// alone would refuse it; yet today every part of the refusal says Allowed
// (they are a unit-cost look), so a denied decision has no part that
// denied, and what reports the parts that denied (grpcmw's QuotaFailure)
// reports none.
func TestPartsOfACostAboveCapacityDenyIt(t *testing.T) {
	p := core.AllOf(core.FixedWindow(2, time.Minute).WithName("minute"), core.FixedWindow(10, time.Hour).WithName("hour"))
	lim, err := core.New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	for name, call := range map[string]func() (core.Decision, error){
		"AllowN":      func() (core.Decision, error) { return lim.AllowN(context.Background(), "k", 3) },
		"AllowPolicy": func() (core.Decision, error) { return lim.AllowPolicy(context.Background(), p, "k", 3) },
	} {
		d, err := call()
		if !errors.Is(err, core.ErrCostExceedsCapacity) || d.Allowed {
			t.Fatalf("%s: got %+v, %v; want a denial with ErrCostExceedsCapacity", name, d, err)
		}
		parts := d.Parts()
		if len(parts) != 2 {
			t.Fatalf("%s: got %d parts, want 2", name, len(parts))
		}
		if parts[0].Allowed || !parts[1].Allowed {
			t.Errorf("%s: parts allowed = %v, %v; want the minute's part (limit 2) to deny the cost 3 and the hour's (limit 10) to admit it", name, parts[0].Allowed, parts[1].Allowed)
		}
	}
}

// TestRefusalOfACompositeTakesLimitAndResetFromOnePart: Decision.Parts
// says a decision's "Limit, Remaining and ResetAfter are those of the part
// that binds, the one with the fewest remaining (then the longest wait,
// then the longest reset)". Under AllOf(1 per second "s", 5 per minute
// burst 7 "m"), with both parts at 0 left ("s" 1s from a token, "m" 600ms), a
// request of cost 2 (above "s"'s burst of 1) is refused: "s" refuses it
// with no wait, "m" alone would wait, so "m" binds. The refusal has "m"'s
// Limit (5) but "s"'s ResetAfter (1s, the binding part of the unit-cost
// look taken before "s" was made to refuse), where redisstore answers
// "m"'s (1m12.6s, as core.Combine of the same parts does).
func TestRefusalOfACompositeTakesLimitAndResetFromOnePart(t *testing.T) {
	ctx := context.Background()
	p := core.AllOf(core.TokenBucket(3, 3*time.Second).WithName("s").WithBurst(1),
		core.TokenBucket(5, time.Minute).WithName("m").WithBurst(7))
	now := time.Unix(1_800_000_000, 0)
	lim, err := core.New(p, core.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	// Seven requests a second apart empty "m" (7 taken, half a token back);
	// 17.4s later it holds 1.95 tokens, and one more request leaves it 0.95
	// (600ms from a token) and "s" empty for 1s.
	for i := range 8 {
		if d, err := lim.AllowN(ctx, "k", 1); err != nil || !d.Allowed {
			t.Fatalf("request %d: got %+v, %v; want admitted", i+1, d, err)
		}
		now = now.Add(time.Second)
		if i == 6 {
			now = now.Add(17400*time.Millisecond - time.Second)
		}
	}
	now = now.Add(-time.Second) // the refusal at the instant of the last admission
	d, err := lim.AllowN(ctx, "k", 2)
	if !errors.Is(err, core.ErrCostExceedsCapacity) {
		t.Fatalf("got %+v, %v; want a refusal with ErrCostExceedsCapacity", d, err)
	}
	parts := d.Parts()
	if len(parts) != 2 || parts[0].Allowed || parts[0].RetryAfter != 0 || parts[1].Allowed || parts[1].RetryAfter <= 0 {
		t.Fatalf("parts: got %+v; want \"s\" refusing with no wait and \"m\" denying with a wait", parts)
	}
	if d.Limit != 5 || d.Remaining != 0 || d.ResetAfter != parts[1].ResetAfter {
		t.Errorf("got Limit %d, Remaining %d, ResetAfter %v; want the binding part \"m\"'s: 5, 0, %v",
			d.Limit, d.Remaining, d.ResetAfter, parts[1].ResetAfter)
	}
}
