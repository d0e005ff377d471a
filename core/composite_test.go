package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// perSecondPerDay is the common API quota: 10 per second and 1,000 per day,
// as a token bucket and as fixed windows.
func perSecondPerDay(alg string) core.Policy {
	if alg == "fixed" {
		return core.AllOf(
			core.FixedWindow(10, time.Second).WithName("per-second"),
			core.FixedWindow(1000, 24*time.Hour).WithName("per-day"))
	}
	return core.AllOf(
		core.TokenBucket(10, time.Second).WithName("per-second"),
		core.TokenBucket(1000, 24*time.Hour).WithName("per-day"))
}

// TestAllOfAdmitsAtEachBoundAndChargesNoPartOnADenial, on fixed windows:
// the per-second part admits its 10th request and denies the 11th,
// charging neither part; the per-day part counts only what was admitted,
// so it admits its 1,000th request (after 100 seconds of 11 requests) and
// denies the 1,001st.
func TestAllOfAdmitsAtEachBoundAndChargesNoPartOnADenial(t *testing.T) {
	ctx := context.Background()
	for _, alg := range []string{"fixed"} {
		t.Run(alg, func(t *testing.T) {
			lim, clock := frozen(t, perSecondPerDay(alg))
			for i := range 10 {
				if d, _ := lim.Allow(ctx, "k"); !d.Allowed {
					t.Fatalf("request %d of the first second: denied, want admitted: %+v", i+1, d)
				}
			}
			d, err := lim.Allow(ctx, "k")
			if err != nil || d.Allowed {
				t.Fatalf("the 11th request of a second: got %+v, %v; want denied", d, err)
			}
			if got := d.Limit; got != 10 {
				t.Errorf("a denial by the per-second part: Limit %d, want 10", got)
			}
			parts := d.Parts()
			if len(parts) != 2 || parts[0].Allowed || !parts[1].Allowed || parts[1].Remaining != 990 {
				t.Fatalf("parts: got %+v, want per-second denying and per-day admitting with 990 left", parts)
			}
			if d.RetryAfter != parts[0].RetryAfter || parts[1].RetryAfter != 0 {
				t.Errorf("RetryAfter %v, parts %v and %v: want the per-second part's", d.RetryAfter, parts[0].RetryAfter, parts[1].RetryAfter)
			}
			// 98 more seconds of 10, then 100 the day counts exactly 990:
			// the denials charged nothing.
			admitted := 10
			for s := 1; admitted < 1000; s++ {
				clock.Set(clock.Now().Add(time.Second))
				for range 11 {
					if d, _ := lim.Allow(ctx, "k"); d.Allowed {
						admitted++
					}
				}
				if s > 200 {
					t.Fatalf("admitted %d after %d seconds, want 1,000 after 99", admitted, s)
				}
			}
			clock.Set(clock.Now().Add(time.Second))
			d, _ = lim.Allow(ctx, "k")
			if d.Allowed || d.Limit != 1000 || d.Remaining != 0 {
				t.Errorf("the 1,001st request of the day: got %+v, want denied by the per-day part", d)
			}
			if d.RetryAfter < time.Hour {
				t.Errorf("the per-day denial's RetryAfter %v, want hours", d.RetryAfter)
			}
		})
	}
}

// TestAllOfDenialChargesNoPart: a request the per-day part denies is not
// charged to the per-second part, which is where stacked middlewares fail.
func TestAllOfDenialChargesNoPart(t *testing.T) {
	ctx := context.Background()
	p := core.AllOf(
		core.TokenBucket(10, time.Second).WithName("per-second"),
		core.TokenBucket(3, 24*time.Hour).WithName("per-day"))
	lim, clock := frozen(t, p)
	for range 3 {
		if d, _ := lim.Allow(ctx, "k"); !d.Allowed {
			t.Fatalf("denied, want admitted: %+v", d)
		}
	}
	for range 20 {
		if d, _ := lim.Allow(ctx, "k"); d.Allowed {
			t.Fatalf("admitted past the per-day part: %+v", d)
		}
	}
	d, err := lim.Peek(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Parts()[0].Remaining; got != 7 {
		t.Errorf("per-second part after 3 admitted and 20 denied: %d remaining, want 7", got)
	}
	clock.Set(clock.Now().Add(time.Second))
	if got := lim.Len(); got != 1 {
		t.Errorf("Len: got %d, want 1", got)
	}
}

// TestAllOfRetryAfterIsWhenEveryPartAdmits: both parts deny; waiting the
// RetryAfter (the longer) admits, 1ns less does not.
func TestAllOfRetryAfterIsWhenEveryPartAdmits(t *testing.T) {
	ctx := context.Background()
	p := core.AllOf(
		core.TokenBucket(1, time.Second).WithName("fast"),
		core.TokenBucket(2, time.Minute).WithName("slow"))
	lim, clock := frozen(t, p)
	start := clock.Now()
	lim.Allow(ctx, "k")
	clock.Set(start.Add(time.Second))
	lim.Allow(ctx, "k")
	d, _ := lim.Allow(ctx, "k")
	if d.Allowed {
		t.Fatalf("admitted, want denied: %+v", d)
	}
	want := 30*time.Second - time.Second // the slow part's first unit, taken at start, is back 30s after it
	if d.RetryAfter != want {
		t.Fatalf("RetryAfter %v, want %v", d.RetryAfter, want)
	}
	clock.Set(start.Add(time.Second + want - 1))
	if d, _ := lim.Allow(ctx, "k"); d.Allowed {
		t.Fatalf("admitted 1ns before RetryAfter: %+v", d)
	}
	clock.Set(start.Add(time.Second + want))
	if d, _ := lim.Allow(ctx, "k"); !d.Allowed {
		t.Fatalf("denied at RetryAfter: %+v", d)
	}
}

// TestAllOfPlanMoveKeepsThePartsThatStay: free (10/s, 100/day) to pro
// (100/s, 10,000/day, and a new per-minute part): each part keeps what it
// used by label, the new part starts empty.
func TestAllOfPlanMoveKeepsThePartsThatStay(t *testing.T) {
	ctx := context.Background()
	free := core.AllOf(
		core.FixedWindow(10, time.Second).WithName("per-second"),
		core.FixedWindow(100, 24*time.Hour).WithName("per-day")).WithName("free")
	pro := core.AllOf(
		core.FixedWindow(100, time.Second).WithName("per-second"),
		core.FixedWindow(1000, time.Minute).WithName("per-minute"),
		core.FixedWindow(10_000, 24*time.Hour).WithName("per-day")).WithName("pro")
	lim, _ := frozen(t, free)
	for range 10 {
		lim.AllowPolicy(ctx, free, "k", 1)
	}
	d, err := lim.AllowPolicy(ctx, pro, "k", 1)
	if err != nil || !d.Allowed {
		t.Fatalf("under pro: got %+v, %v; want admitted", d, err)
	}
	var got []int64
	for _, p := range d.Parts() {
		got = append(got, p.Remaining)
	}
	if want := []int64{89, 999, 9989}; !equal(got, want) {
		t.Errorf("remaining per part under pro: got %v, want %v", got, want)
	}
}

// TestAllOfDenialUnderAnotherPlanIsExactPerPart: issue 24's upgrade
// (a token bucket of 6/min, burst 10, spent; asked under 60/s, burst 5),
// as a part of a policy made with AllOf beside a part with room: the
// denying part's RetryAfter is the whole's, waiting it admits, and 1ns
// less does not.
func TestAllOfDenialUnderAnotherPlanIsExactPerPart(t *testing.T) {
	ctx := context.Background()
	day := core.TokenBucket(1000, 24*time.Hour).WithName("per-day")
	free := core.AllOf(core.TokenBucket(6, time.Minute).WithBurst(10).WithName("sustained"), day)
	pro := core.AllOf(core.TokenBucket(60, time.Second).WithBurst(5).WithName("sustained"), day)
	for _, wait := range []time.Duration{-1, 0} {
		lim, clock := frozen(t, free)
		for range 10 {
			lim.AllowPolicy(ctx, free, "k", 1)
		}
		d, _ := lim.AllowPolicy(ctx, pro, "k", 1)
		parts := d.Parts()
		if d.Allowed || d.RetryAfter <= 0 || parts[0].RetryAfter != d.RetryAfter || parts[1].RetryAfter != 0 {
			t.Fatalf("under pro: got %+v, parts %+v; want denied by sustained, with the whole's RetryAfter", d, parts)
		}
		clock.Advance(d.RetryAfter + wait)
		if got, _ := lim.AllowPolicy(ctx, pro, "k", 1); got.Allowed != (wait == 0) {
			t.Errorf("after RetryAfter%+v: admitted %v, want %v", wait, got.Allowed, wait == 0)
		}
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAllOfIsOnePolicyValue(t *testing.T) {
	a, b := core.TokenBucket(10, time.Second), core.TokenBucket(1000, 24*time.Hour)
	// Two policies built apart from equal parts (b2 a copy made anew).
	if b2 := core.TokenBucket(1000, 24*time.Hour); core.AllOf(a, b) != core.AllOf(a, b2) {
		t.Errorf("AllOf of equal parts: not equal")
	}
	if core.AllOf(a, b) == core.AllOf(b, a) {
		t.Errorf("AllOf of parts in another order: equal")
	}
	p := core.AllOf(a, b)
	if got := p.Parts(); len(got) != 2 || got[0] != a || got[1] != b {
		t.Errorf("Parts: got %v", got)
	}
	if got, want := p.Label(), "tokenbucket-10-per-1s+tokenbucket-1000-per-86400s"; got != want {
		t.Errorf("Label: got %q, want %q", got, want)
	}
	if got := p.Capacity(); got != 10 {
		t.Errorf("Capacity: got %d, want 10", got)
	}
	if got := p.Recovery(); got != 24*time.Hour {
		t.Errorf("Recovery: got %v, want 24h", got)
	}
	if a.Parts() != nil {
		t.Errorf("a policy of one part has parts")
	}
}

func TestAllOfValidate(t *testing.T) {
	tb := core.TokenBucket(10, time.Second)
	for _, tc := range []struct {
		name string
		p    core.Policy
		want string
	}{
		{"no parts", core.AllOf(), "unknown algorithm"},
		{"too many parts", core.AllOf(tb.WithName("a"), tb.WithName("b"), tb.WithName("c"), tb.WithName("d"), tb.WithName("e")), "1 to 4 parts"},
		{"two algorithms", core.AllOf(tb, core.FixedWindow(10, time.Minute)), "one algorithm"},
		{"same label", core.AllOf(tb, tb), "distinct labels"},
		{"an invalid part", core.AllOf(tb, core.TokenBucket(-1, time.Minute)), "part 2: core: TokenBucket limit must be > 0"},
		{"a part of parts", core.AllOf(tb, core.AllOf(tb.WithName("x"), tb.WithName("y"))), "made of parts itself"},
		{"numbers set on the whole", core.AllOf(tb, core.TokenBucket(100, time.Hour)).WithBurst(3), "set them on the parts"},
	} {
		err := tc.p.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if err := core.AllOf(tb, core.TokenBucket(100, time.Hour)).WithName("plan").Validate(); err != nil {
		t.Errorf("a valid policy: %v", err)
	}
}

func TestAllOfNeedsALimiterOfSuchPolicies(t *testing.T) {
	ctx := context.Background()
	tb := core.TokenBucket(10, time.Second)
	lim, _ := frozen(t, tb)
	_, err := lim.AllowPolicy(ctx, core.AllOf(tb, core.TokenBucket(100, time.Hour)), "k", 1)
	if !errors.Is(err, core.ErrAlgorithmMismatch) {
		t.Errorf("a policy of parts to a limiter of one: got %v, want ErrAlgorithmMismatch", err)
	}
	all, _ := frozen(t, core.AllOf(tb, core.TokenBucket(100, time.Hour)))
	d, err := all.AllowPolicy(ctx, tb, "k", 1)
	if err != nil || !d.Allowed || d.Parts() != nil || d.Remaining != 9 {
		t.Errorf("a policy of one part to a limiter of parts: got %+v, %v; want admitted, 9 left, no parts", d, err)
	}
	d, err = all.AllowPolicy(ctx, core.AllOf(tb), "k", 1)
	if parts := d.Parts(); err != nil || !d.Allowed || len(parts) != 1 || parts[0].Remaining != 8 || d.Remaining != 8 {
		t.Errorf("AllOf of one part: got %+v (parts %+v), %v; want admitted, 8 left, one part", d, parts, err)
	}
}

// TestCombineIsTheMemoryDecision: a store that decides the parts itself
// and combines them answers what the in-memory limiter answers.
func TestCombineIsTheMemoryDecision(t *testing.T) {
	ctx := context.Background()
	p := core.AllOf(
		core.TokenBucket(1, time.Second).WithName("fast"),
		core.TokenBucket(2, time.Minute).WithName("slow"))
	lim, clock := frozen(t, p)
	for range 4 {
		d, _ := lim.Allow(ctx, "k")
		got, err := core.Combine(p, d.Parts())
		if err != nil {
			t.Fatal(err)
		}
		if got.Allowed != d.Allowed || got.Limit != d.Limit || got.Remaining != d.Remaining || got.ResetAfter != d.ResetAfter ||
			got.RetryAfter != d.RetryAfter || got.Delay != d.Delay || got.Policy != d.Policy || got.At != d.At || len(got.Parts()) != 2 {
			t.Errorf("Combine(Parts()): got %+v, want %+v", got, d)
		}
		clock.Set(clock.Now().Add(time.Second))
	}
	if _, err := core.Combine(core.TokenBucket(1, time.Second), nil); err == nil {
		t.Errorf("Combine of a policy of one part: no error")
	}
}
