package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
)

// TestRetryAfterOfAKeyThatFoundNoRoomIsHonest: doc.go promises that "a
// denied client that waits exactly RetryAfter and retries the same cost is
// admitted, absent other traffic", and WithMaxKeys that a key that finds
// its shard full of limited keys is limited "as one key" with the others
// that found no room "until room appears". With WithMaxKeys(2) (one shard
// of two keys) and TokenBucket(3, 1s) (interval I = 1s/3, burst 3):
//
//   - a and b take 3 each at t0: both limited, the shard full;
//   - c takes 2 at t0: no room, admitted on the shared inherited state;
//   - c asks 2 again at t0: denied, RetryAfter I (the inherited state's
//     debt of 2I leaves room for 2 after I);
//   - c retries 2 at t0+I, nothing else having happened: a, whose debt is
//     now 2I, admits a unit request, so it is evicted to make room, and c
//     starts from its usage: denied again (RetryAfter I more).
//
// The RetryAfter told c measures only the inherited state, not a key that
// will be evicted into it by the time c retries.
func TestRetryAfterOfAKeyThatFoundNoRoomIsHonest(t *testing.T) {
	ctx := context.Background()
	clk := coretest.NewClock(time.Unix(1_700_000_000, 0))
	lim, err := core.New(core.TokenBucket(3, time.Second), core.WithClock(clk.Now), core.WithMaxKeys(2), core.WithSweepInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	for _, k := range []string{"a", "b", "c"} {
		n := int64(3)
		if k == "c" {
			n = 2
		}
		if d, err := lim.AllowN(ctx, k, n); err != nil || !d.Allowed {
			t.Fatalf("%s: AllowN(%d) = %+v, %v; want admitted", k, n, d, err)
		}
	}
	d, err := lim.AllowN(ctx, "c", 2)
	if err != nil || d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("c: second AllowN(2) = %+v, %v; want a denial with a RetryAfter", d, err)
	}
	clk.Advance(d.RetryAfter)
	if again, err := lim.AllowN(ctx, "c", 2); err != nil || !again.Allowed {
		t.Errorf("c waited RetryAfter %v and retried the same cost, nothing else in between: got %+v, %v; want admitted", d.RetryAfter, again, err)
	}
}

// TestRetryAfterOfAKeyThatFoundNoRoomUnderAllOfWaitsForEveryPart: the
// RetryAfter of a new key that found no room also waits for the key its
// retry will evict (WithMaxKeys), and under a policy made with AllOf that
// key can bind a part the inherited state alone admits. With WithMaxKeys(1)
// (one shard of one key) and a policy of a short part (3 per 1s) and a
// long one (10 per 10s):
//
//   - a, three seconds in a row, then a fourth time, takes 3: its short
//     part is limited, its long one holds 8 by the next second;
//   - c takes 3: no room, admitted on the fresh inherited state;
//   - c asks 3 again: denied by the short part only, RetryAfter 1s;
//   - c retries 3 a second later, nothing else having happened: a now
//     admits a unit request, so it is evicted into the inherited state
//     and c starts from its usage: its long part, 8 of 10, denies 3.
//
// The wait of the part that admitted at the denial's instant is never
// measured on the key the retry evicts.
func TestRetryAfterOfAKeyThatFoundNoRoomUnderAllOfWaitsForEveryPart(t *testing.T) {
	for _, tt := range []struct {
		name string
		p    core.Policy
		a    []int // the seconds, from t0, at which a takes 3
	}{
		{"fixed windows", core.AllOf(core.FixedWindow(3, time.Second), core.FixedWindow(10, 10*time.Second)), []int{0, 1, 2}},
		{"token buckets", core.AllOf(core.TokenBucket(3, time.Second), core.TokenBucket(10, 10*time.Second)), []int{0, 1, 2, 3}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			t0 := time.Unix(1_700_000_000, 0) // a multiple of 10 s: windows start here
			clk := coretest.NewClock(t0)
			lim, err := core.New(tt.p, core.WithClock(clk.Now), core.WithMaxKeys(1), core.WithSweepInterval(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			defer lim.Close()
			for _, s := range tt.a {
				clk.Set(t0.Add(time.Duration(s) * time.Second))
				if d, err := lim.AllowN(ctx, "a", 3); err != nil || !d.Allowed {
					t.Fatalf("a at %ds: AllowN(3) = %+v, %v; want admitted", s, d, err)
				}
			}
			if d, err := lim.AllowN(ctx, "c", 3); err != nil || !d.Allowed {
				t.Fatalf("c: AllowN(3) = %+v, %v; want admitted on the inherited state", d, err)
			}
			d, err := lim.AllowN(ctx, "c", 3)
			if err != nil || d.Allowed || d.RetryAfter <= 0 {
				t.Fatalf("c: second AllowN(3) = %+v, %v; want a denial with a RetryAfter", d, err)
			}
			clk.Advance(d.RetryAfter)
			again, err := lim.AllowN(ctx, "c", 3)
			if err != nil || !again.Allowed {
				t.Errorf("c waited RetryAfter %v and retried 3, nothing else in between: got allowed=%v, RetryAfter %v, %v; want admitted", d.RetryAfter, again.Allowed, again.RetryAfter, err)
			}
		})
	}
}

// TestPeekOfAKeyThatFindsAFullShardAgreesWithAllowN: Peek is "the Decision
// a unit-cost request would get now (at one instant, what the next AllowN of
// cost 1 gets)" (Limiter). In a full shard the AllowN evicts a key and so
// leaves room: its retry evicts nothing more. Peek's RetryAfter, measured on
// the shard as it is, also waits for a key that a second eviction would
// take. With WithMaxKeys(2) (one shard of two keys), TokenBucket(4, 1s)
// (the limiter's, 250 ms a unit) and TokenBucket(8, 1s) (a plan's, 125 ms
// a unit: a debt under it counts double under the limiter's):
//
//   - at 0 v takes 4; at 100 ms a takes 8 under the plan;
//   - at 240 ms z, under the plan, evicts a (v is limited), and takes 1
//     from a's debt: z's debt ends at 1.225 s;
//   - at 300 ms x looks: the next AllowN evicts v (z is limited) and is
//     denied until a's debt, converted, admits a unit, at 725 ms. Its
//     retry then finds room and is admitted. Peek measures, at 725 ms, the
//     eviction of z too, ending at 850 ms.
func TestPeekOfAKeyThatFindsAFullShardAgreesWithAllowN(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(1_700_000_000, 0)
	clk := coretest.NewClock(t0)
	lim, err := core.New(core.TokenBucket(4, time.Second), core.WithClock(clk.Now), core.WithMaxKeys(2), core.WithSweepInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	plan := core.TokenBucket(8, time.Second)
	steps := []struct {
		at   time.Duration
		key  string
		plan bool
		n    int64
	}{
		{0, "v", false, 4},
		{100 * time.Millisecond, "a", true, 8},
		{240 * time.Millisecond, "z", true, 1},
	}
	for _, s := range steps {
		clk.Set(t0.Add(s.at))
		d, err := lim.AllowN(ctx, s.key, s.n)
		if s.plan {
			d, err = lim.AllowPolicy(ctx, plan, s.key, s.n)
		}
		if err != nil || !d.Allowed {
			t.Fatalf("%s at %v: %+v, %v; want admitted", s.key, s.at, d, err)
		}
	}
	clk.Set(t0.Add(300 * time.Millisecond))
	peek, err := lim.Peek(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	d, err := lim.AllowN(ctx, "x", 1)
	if err != nil || d.Allowed {
		t.Fatalf("x: AllowN(1) = %+v, %v; want a denial", d, err)
	}
	if peek.Allowed != d.Allowed || peek.RetryAfter != d.RetryAfter {
		t.Errorf("x: Peek allowed=%v RetryAfter %v; the AllowN that followed at the same instant: allowed=%v RetryAfter %v", peek.Allowed, peek.RetryAfter, d.Allowed, d.RetryAfter)
	}
	clk.Advance(d.RetryAfter)
	if again, err := lim.AllowN(ctx, "x", 1); err != nil || !again.Allowed {
		t.Errorf("x retried after AllowN's RetryAfter %v: %+v, %v; want admitted", d.RetryAfter, again, err)
	}
}

// TestRemainingOfADenialInAFullShardCountsWhatPassesNow: Decision.Remaining
// is "unit-cost requests that would pass now, after this one", and a denial
// consumes nothing. With WithMaxKeys(1) (one shard of one key) and
// TokenBucket(4, 1s) (250 ms a unit):
//
//   - at t0 a takes 4: limited, the shard full;
//   - c takes 3: no room, admitted on the inherited state, 1 left;
//   - c asks 2: denied (retryWait measures the state its retry starts from,
//     a's usage absorbed, and reports that state's Remaining, 0);
//   - c asks 1 at the same instant: admitted.
//
// The denial said no unit request would pass now; Peek, just before it,
// said 1, and one did.
func TestRemainingOfADenialInAFullShardCountsWhatPassesNow(t *testing.T) {
	ctx := context.Background()
	clk := coretest.NewClock(time.Unix(1_700_000_000, 0))
	lim, err := core.New(core.TokenBucket(4, time.Second), core.WithClock(clk.Now), core.WithMaxKeys(1), core.WithSweepInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	if d, err := lim.AllowN(ctx, "a", 4); err != nil || !d.Allowed {
		t.Fatalf("a: AllowN(4) = %+v, %v; want admitted", d, err)
	}
	if d, err := lim.AllowN(ctx, "c", 3); err != nil || !d.Allowed {
		t.Fatalf("c: AllowN(3) = %+v, %v; want admitted on the inherited state", d, err)
	}
	peek, err := lim.Peek(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	d, err := lim.AllowN(ctx, "c", 2)
	if err != nil || d.Allowed {
		t.Fatalf("c: AllowN(2) = %+v, %v; want a denial", d, err)
	}
	unit, err := lim.AllowN(ctx, "c", 1)
	if err != nil || !unit.Allowed {
		t.Fatalf("c: AllowN(1) at the same instant = %+v, %v; want admitted", unit, err)
	}
	if d.Remaining != peek.Remaining || d.Remaining != 1 {
		t.Errorf("c: the denial of 2 said Remaining %d (Peek just before: %d), and a unit request at the same instant was admitted; want 1", d.Remaining, peek.Remaining)
	}
}
