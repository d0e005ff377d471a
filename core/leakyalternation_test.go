package core_test

import (
	"context"
	"math/bits"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// TestLeakyBucketAlternatingPoliciesDoNotCompound is the outside review's
// reproduction: one key, a request every 2s, alternately under a (3 per
// 10s, one per 3.33s) and b (10 per 10s, one per second), both delaying.
// The debt used to be multiplied by the ratio of the intervals on every
// trip from b to a: 6 admitted by 40s, then ResetAfter 14h32m, then
// MaxSpan, a client locked out for weeks.
//
// The bounds come from the history of admitted requests, not from the
// conversion rule. Each admitted request is served at its instant plus its
// Delay and occupies one interval of its policy from then: the queue ends
// at E, the latest such end, at most Burst intervals of the admitting
// policy after the admission (10s for both), and nothing a conversion does
// can move E. A conversion may count the time left until E at the other
// policy's rate, so at most 10/3 of it (the ratio of the intervals), and
// no more: a denial's ResetAfter and RetryAfter, and an admitted request's
// Delay, are at most (E-now)*10/3; an admitted request is served at E or
// later; and once E has passed the key is new under either policy.
func TestLeakyBucketAlternatingPoliciesDoNotCompound(t *testing.T) {
	ctx := context.Background()
	a := core.LeakyBucket(3, 10*time.Second).WithName("a")
	b := core.LeakyBucket(10, 10*time.Second).WithName("b")
	ia, ib := int64(a.Interval()), int64(b.Interval())
	if ia != 3_333_333_333 || ib != int64(time.Second) {
		t.Fatalf("intervals %v and %v, want 3.333333333s and 1s", a.Interval(), b.Interval())
	}
	now := time.Unix(1_700_000_000, 0)
	lim := core.MustNew(a, core.WithClock(func() time.Time { return now }))
	t.Cleanup(func() { _ = lim.Close() })

	// most is the largest ResetAfter or RetryAfter the history allows at
	// now: the time until E, at a's rate if it was b's.
	end := now // E: when the last request admitted leaves the queue
	most := func() time.Duration {
		left := max(0, int64(end.Sub(now)))
		hi, lo := bits.Mul64(uint64(left), uint64(ia))
		q, rem := bits.Div64(hi, lo, uint64(ib))
		if rem != 0 {
			q++
		}
		return time.Duration(q)
	}
	admitted := 0
	for i := range 120 {
		p, name := a, "a"
		if i%2 == 1 {
			p, name = b, "b"
		}
		d, err := lim.AllowPolicy(ctx, p, "client", 1)
		if err != nil {
			t.Fatalf("call %d (%s) at +%v: %v", i, name, time.Duration(2*i)*time.Second, err)
		}
		at := time.Duration(2*i) * time.Second
		bound := most()
		if d.Allowed {
			served := now.Add(d.Delay)
			if served.Before(end) {
				t.Fatalf("call %d (%s) at +%v: served %v from now, before the queue has left (%v): %+v", i, name, at, d.Delay, end.Sub(now), d)
			}
			if d.Delay > bound || d.ResetAfter != d.Delay+p.Interval() {
				t.Fatalf("call %d (%s) at +%v: the queue ends in %v, so Delay at most %v and ResetAfter Delay+%v: %+v", i, name, at, end.Sub(now), bound, p.Interval(), d)
			}
			admitted++
			end = served.Add(p.Interval())
		} else if d.RetryAfter <= 0 || d.RetryAfter > bound || d.ResetAfter > bound {
			t.Fatalf("call %d (%s) at +%v: the queue ends in %v, so RetryAfter in (0, %v] and ResetAfter at most that: %+v", i, name, at, end.Sub(now), bound, d)
		}
		switch i {
		case 0:
			if !d.Allowed || d.Delay != 0 {
				t.Fatalf("the first request: %+v, want admitted at once", d)
			}
		case 1:
			// a's request leaves at 3.333333333s; b's is served then.
			if !d.Allowed || d.Delay != 1_333_333_333 {
				t.Fatalf("b at 2s: %+v, want admitted with Delay 1.333333333s", d)
			}
		}
		now = now.Add(2 * time.Second)
	}
	t.Logf("%d of 120 admitted", admitted)

	// Once the queue has left, nothing is owed under either policy.
	if end.After(now) {
		now = end
	}
	for _, p := range []core.Policy{a, b} {
		u, err := lim.Get(ctx, p, "client")
		if err != nil {
			t.Fatal(err)
		}
		if want := (core.Usage{Remaining: p.Burst, Policy: p}); u != want {
			t.Errorf("Get(%s) once the queue has left: %+v, want %+v", p.Name, u, want)
		}
	}
	d, err := lim.AllowPolicy(ctx, a, "client", 3)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed || d.Delay != 0 || d.Remaining != 0 {
		t.Errorf("a full burst under a once the queue has left: %+v, want admitted, Delay 0, Remaining 0", d)
	}
}

// TestLeakyBucketDeniedAlternationLeavesTheKey: with no time passing and
// nothing admitted, denials under a and b in turn must answer the same
// each round. Three requests under a fill its queue, which ends at
// 9.999999999s (three intervals of 3.333333333s); b serves after them, and
// its depth of 10s admits one once 0.999999999s has passed; a admits one
// once a's first request has left, after 3.333333333s. The first round gave those, and each round after it
// multiplied the wait under a by 10/3: 26.7s, 1m44s, 6m3s...
func TestLeakyBucketDeniedAlternationLeavesTheKey(t *testing.T) {
	ctx := context.Background()
	a := core.LeakyBucket(3, 10*time.Second).WithName("a")
	b := core.LeakyBucket(10, 10*time.Second).WithName("b")
	now := time.Unix(1_700_000_000, 0)
	lim := core.MustNew(a, core.WithClock(func() time.Time { return now }))
	t.Cleanup(func() { _ = lim.Close() })
	for i := range 3 {
		if d, err := lim.AllowPolicy(ctx, a, "client", 1); err != nil || !d.Allowed {
			t.Fatalf("request %d under a: %+v, %v", i, d, err)
		}
	}
	for round := range 8 {
		for _, c := range []struct {
			p            core.Policy
			retry, reset time.Duration
		}{
			{b, 999_999_999, 9_999_999_999},
			{a, 3_333_333_333, 9_999_999_999},
		} {
			d, err := lim.AllowPolicy(ctx, c.p, "client", 1)
			if err != nil {
				t.Fatal(err)
			}
			if want := (core.Decision{Limit: c.p.Limit, ResetAfter: c.reset, RetryAfter: c.retry, Policy: c.p, At: d.At}); d != want {
				t.Fatalf("round %d under %s: %+v, want %+v", round, c.p.Name, d, want)
			}
		}
	}
}

// TestLeakyBucketDeepQueueThroughAShallowPlan: capping a converted debt
// at what a queue of max(old Burst, new Burst) requests needs was a
// candidate fix, refuted here: c (100 per 100s) queues 100 requests,
// served at 0, 1s, ... 99s; denials under a (3 per 300ms) and b (10 per
// 100s) follow. The cap kept b's debt at 10 of its intervals (100s), and b
// admitted at 10s with 90 of c's requests still queued, above b's Burst of
// 10. From the history: at 90s the requests served at 90s or later are 10
// of c's, so b must still deny; at 91s 9 are left, and a request of b
// fits, served once the queue has left (at 100s), and at most when its 9
// requests would have left at b's interval (9 times 10s: Delay 90s).
func TestLeakyBucketDeepQueueThroughAShallowPlan(t *testing.T) {
	ctx := context.Background()
	c := core.LeakyBucket(100, 100*time.Second).WithName("c")
	a := core.LeakyBucket(3, 300*time.Millisecond).WithName("a")
	b := core.LeakyBucket(10, 100*time.Second).WithName("b")
	start := time.Unix(1_700_000_000, 0)
	now := start
	lim := core.MustNew(c, core.WithClock(func() time.Time { return now }))
	t.Cleanup(func() { _ = lim.Close() })
	for i := range 100 {
		if d, err := lim.AllowPolicy(ctx, c, "k", 1); err != nil || !d.Allowed {
			t.Fatalf("request %d under c: %+v, %v", i, d, err)
		}
	}
	for _, step := range []struct {
		at time.Duration
		ps []core.Policy
	}{
		{0, []core.Policy{a, b}},
		{10 * time.Second, []core.Policy{b}},
		{50 * time.Second, []core.Policy{a, b}},
		{90 * time.Second, []core.Policy{a, b}},
	} {
		at := step.at
		now = start.Add(at)
		for _, p := range step.ps {
			d, err := lim.AllowPolicy(ctx, p, "k", 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				t.Fatalf("under %s at %v, with %d of c's requests queued: admitted, want denied: %+v", p.Name, at, 100-int(at/time.Second), d)
			}
		}
	}
	now = start.Add(91 * time.Second)
	d, err := lim.AllowPolicy(ctx, b, "k", 1)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed || d.Delay < 9*time.Second || d.Delay > 90*time.Second {
		t.Fatalf("under b at 91s: %+v, want admitted with a Delay from 9s to 90s", d)
	}
}
