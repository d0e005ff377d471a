package core_test

// Tests from an outside review of issue 26 (policies made with AllOf).
// Each one fails on the code it was written against: see the commit that
// added it.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// TestAllOfOfAllOfIsAnErrorNotAPanic: "A part cannot be made of parts", and
// an invalid Policy is rejected "with an error naming the field, never a
// panic". AllOf(AllOf(a, b), c) is such bad input (a policy read from
// configuration, say): its Label and String, which headers, metrics and
// logs call, must answer, and Validate's error must say what is wrong.
func TestAllOfOfAllOfIsAnErrorNotAPanic(t *testing.T) {
	a := core.TokenBucket(10, time.Second).WithName("a")
	b := core.TokenBucket(100, time.Minute).WithName("b")
	c := core.TokenBucket(1000, time.Hour).WithName("c")
	nested := core.AllOf(core.AllOf(a, b), c)
	for _, tc := range []struct {
		name string
		f    func() string
	}{
		{"Label", nested.Label},
		{"String", nested.String},
		{"Validate of a copy with its own Burst", func() string { return fmt.Sprint(nested.WithBurst(5).Validate()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s of AllOf(AllOf(a, b), c) panicked: %v", tc.name, r)
					}
				}()
				got = tc.f()
			}()
			if strings.Contains(got, "PANIC") {
				t.Errorf("%s of AllOf(AllOf(a, b), c): %q", tc.name, got)
			}
		})
	}
	if _, err := core.New(nested); err == nil {
		t.Errorf("New(AllOf(AllOf(a, b), c)): no error")
	}
}

// TestAllOfDelayingLeakyBucketsKeepEachPartsQueueBound: AllOf of two
// delaying leaky buckets, "fast" (10/s, at most 2 in the bucket) and "slow"
// (1/s, at most 10), would break fast's promise ("the requests not yet
// served at t ... cost at most P.Burst"): a request is served after the
// longest delay, slow's, which fast does not count. So such a policy is
// refused, and with slow a meter, the test sends a request every 100 ms and
// counts, at each admission, the admitted requests not yet served (instant
// plus the whole's Delay, which the middleware waits out): fast's bound is 2.
func TestAllOfDelayingLeakyBucketsKeepEachPartsQueueBound(t *testing.T) {
	ctx := context.Background()
	fast := core.LeakyBucket(10, time.Second).WithBurst(2).WithName("fast")
	slow := core.LeakyBucket(1, time.Second).WithBurst(10).WithName("slow")
	if _, err := core.New(core.AllOf(fast, slow)); err == nil || !strings.Contains(err.Error(), "one delaying leaky bucket at most: make part 2 a meter") {
		t.Errorf("AllOf of two delaying leaky buckets: got %v, want the error naming part 2", err)
	}
	lim, clock := frozen(t, core.AllOf(fast, slow.AsMeter()))
	start := clock.Now()
	var served []time.Duration // of the requests admitted, from start
	admitted := 0
	for i := range 30 {
		now := clock.Now()
		d, err := lim.Allow(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
			at := now.Sub(start)
			served = append(served, at+d.Delay)
			queued := 0
			for _, s := range served {
				if s >= at {
					queued++
				}
			}
			if queued > int(fast.Burst) {
				t.Fatalf("request %d at +%v admitted with Delay %v: %d admitted requests not yet served (served at %v), fast's Burst is %d", i+1, at, d.Delay, queued, served, fast.Burst)
			}
		}
		clock.Advance(100 * time.Millisecond)
	}
	if admitted != 12 { // slow, a meter: its burst of 10, then 1/s over 2.9s
		t.Errorf("admitted %d of 30 over 2.9s, want 12", admitted)
	}
}

// TestAllOfNewKeyInAFullShardReportsTheBindingPartsReset: WithMaxKeys(1),
// AllOf("sec" 10/s, "day" 1000/day). Key a takes 5; key b, new, evicts it
// (a's usage goes on in the shard's inherited state, which b starts from)
// and asks for 6: denied by sec, which has 5 left. Decision.Parts: "its
// Limit, Remaining and ResetAfter are those of the part that binds, the one
// with the fewest remaining": sec's 10, 5 and 500ms. The X-RateLimit-*
// fields are rendered from them ("The X-RateLimit-* fields describe the part
// that binds ... X-RateLimit-Reset is when that part is full again").
func TestAllOfNewKeyInAFullShardReportsTheBindingPartsReset(t *testing.T) {
	ctx := context.Background()
	p := core.AllOf(core.TokenBucket(10, time.Second).WithName("sec"), core.TokenBucket(1000, 24*time.Hour).WithName("day"))
	for _, call := range []string{"AllowN(6)", "Peek"} {
		t.Run(call, func(t *testing.T) {
			lim, _ := frozen(t, p, core.WithMaxKeys(1))
			if d, _ := lim.AllowN(ctx, "a", 5); !d.Allowed {
				t.Fatalf("a: AllowN(5) %+v, want admitted", d)
			}
			var d core.Decision
			if call == "Peek" {
				d, _ = lim.Peek(ctx, "b")
			} else {
				d, _ = lim.AllowN(ctx, "b", 6)
			}
			parts := d.Parts()
			if len(parts) != 2 {
				t.Fatalf("b: %s: %d parts, want 2", call, len(parts))
			}
			sec := parts[0]
			if d.Limit != sec.Limit || d.Remaining != sec.Remaining || d.ResetAfter != sec.ResetAfter {
				t.Errorf("b: %s: Limit %d Remaining %d ResetAfter %v; the binding part (sec) says Limit %d Remaining %d ResetAfter %v (day: ResetAfter %v)",
					call, d.Limit, d.Remaining, d.ResetAfter, sec.Limit, sec.Remaining, sec.ResetAfter, parts[1].ResetAfter)
			}
		})
	}
}
