package core_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
)

var allAlgorithms = []core.Policy{
	core.FixedWindow(100, time.Hour), core.SlidingWindow(100, time.Hour),
	core.TokenBucket(100, time.Hour), core.LeakyBucket(100, time.Hour).AsMeter(),
}

// TestKeyMovedToAnotherPlanKeepsWhatItUsed: 80 of free's 100 used, then
// the key is decided under pro (10,000 per hour): 9,920 remain, per
// algorithm (the sliding window's geometry is the same, so nothing moves
// between buckets), and Get says 80 used before and 81 after.
func TestKeyMovedToAnotherPlanKeepsWhatItUsed(t *testing.T) {
	ctx := context.Background()
	for _, free := range allAlgorithms {
		t.Run(free.Algorithm.String(), func(t *testing.T) {
			free := free.WithName("free")
			pro := free.WithName("pro")
			pro.Limit = 10_000
			if pro.Burst != 0 {
				pro.Burst = 10_000
			}
			lim, _ := frozen(t, free)
			for range 80 {
				d, err := lim.AllowPolicy(ctx, free, "k", 1)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed {
					t.Fatalf("denied, want allowed: %+v", d)
				}
			}
			u, err := lim.Get(ctx, pro, "k")
			if err != nil {
				t.Fatal(err)
			}
			if u.Used != 80 {
				t.Errorf("u.Used = %+v, want 80", u.Used)
			}
			if u.Remaining != 9_920 {
				t.Errorf("u.Remaining = %+v, want 9_920", u.Remaining)
			}
			if u.Policy.Name != "pro" {
				t.Errorf("u.Policy.Name = %q, want pro", u.Policy.Name)
			}

			d, err := lim.AllowPolicy(ctx, pro, "k", 1)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				t.Errorf("denied, want allowed: %+v", d)
			}
			if d.Remaining != 9_919 {
				t.Errorf("d.Remaining = %+v, want 9_919", d.Remaining)
			}
			if d.Limit != 10_000 {
				t.Errorf("d.Limit = %+v, want 10_000", d.Limit)
			}
			if d.Policy.Name != "pro" {
				t.Errorf("d.Policy.Name = %q, want pro", d.Policy.Name)
			}

			// Back under the limiter's own policy: 81 used of 100.
			d, err = lim.Allow(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				t.Errorf("denied, want allowed: %+v", d)
			}
			if d.Remaining != 18 {
				t.Errorf("d.Remaining = %+v, want 18", d.Remaining)
			}
		})
	}
}

// TestAlternatingPoliciesStayExact: goroutines on one key alternate two
// policies that differ only by name, so that nearly every call converts
// the key's state, on a frozen clock: exactly Limit pass, as with one
// policy. A conversion that lost or duplicated usage would show here.
func TestAlternatingPoliciesStayExact(t *testing.T) {
	ctx := context.Background()
	for _, p := range allAlgorithms {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			a, b := p.WithName("a"), p.WithName("b")
			lim, _ := frozen(t, p)
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 100 {
						q := a
						if (g+i)%2 == 1 {
							q = b
						}
						if d, err := lim.AllowPolicy(ctx, q, "k", 1); err == nil && d.Allowed {
							admitted.Add(1)
						}
						if i%10 == 0 {
							_, _ = lim.Allow(ctx, "k") // the own policy: a third one
						}
					}
				}()
			}
			wg.Wait()
			u, err := lim.Get(ctx, p, "k")
			if err != nil {
				t.Fatal(err)
			}
			if u.Used != 100 {
				t.Errorf("u.Used = %+v, want 100", u.Used)
			}
			if got := admitted.Load(); got > 100 {
				t.Errorf("admitted.Load() = %+v, want <= 100", got)
			}
			if u.Remaining != 0 {
				t.Errorf("u.Remaining = %+v, want 0", u.Remaining)
			}
		})
	}
}

// TestPlanLimitChangedWhileTrafficRuns: a configuration reload raises a
// plan's limit from 10 to 20 per hour mid-window: a key that used 10 gets
// exactly 10 more, and lowering it back to 10 denies the next request.
func TestPlanLimitChangedWhileTrafficRuns(t *testing.T) {
	ctx := context.Background()
	for _, p := range allAlgorithms {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			small := p.WithName("plan")
			small.Limit, small.Burst = 10, min(small.Burst, 10)
			big := small
			big.Limit = 20
			if big.Burst != 0 {
				big.Burst = 20
			}
			if p.Algorithm == core.AlgSlidingWindow {
				small.Buckets, big.Buckets = 10, 10
			}
			lim, _ := frozen(t, p)
			count := func(q core.Policy, n int) int {
				ok := 0
				for range n {
					d, err := lim.AllowPolicy(ctx, q, "k", 1)
					if err != nil {
						t.Fatal(err)
					}
					if d.Allowed {
						ok++
					}
				}
				return ok
			}
			if got := count(small, 15); got != 10 {
				t.Errorf("count(small, 15) = %+v, want 10", got)
			}
			if got := count(big, 15); got != 10 {
				t.Errorf("count(big, 15) = %+v, want 10", got)
			}
			if got := count(small, 1); got != 0 {
				t.Errorf("count(small, 1) = %+v, want 0", got)
			}
		})
	}
}

// TestSetThenAllow: Set grants and takes credits in units of cost; Get
// never changes the state.
func TestSetThenAllow(t *testing.T) {
	ctx := context.Background()
	for _, p := range allAlgorithms {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			lim, _ := frozen(t, p)
			if err := lim.Set(ctx, p, "k", 97); err != nil {
				t.Fatalf("lim.Set(ctx, p, \"k\", 97): %v", err)
			}
			for range 3 {
				u, err := lim.Get(ctx, p, "k")
				if err != nil {
					t.Fatal(err)
				}
				if u.Used != 97 {
					t.Errorf("u.Used = %+v, want 97", u.Used)
				}
				if u.Remaining != 3 {
					t.Errorf("u.Remaining = %+v, want 3", u.Remaining)
				}
			}
			ok := 0
			for range 5 {
				if d, _ := lim.Allow(ctx, "k"); d.Allowed {
					ok++
				}
			}
			if ok != 3 {
				t.Errorf("ok = %+v, want 3", ok)
			}
			if err := lim.Set(ctx, p, "k", 0); err != nil {
				t.Fatalf("lim.Set(ctx, p, \"k\", 0): %v", err)
			}
			d, err := lim.Peek(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if d.Remaining != 100 {
				t.Errorf("d.Remaining = %+v, want 100", d.Remaining)
			}
			if err := lim.Set(ctx, p, "k", 100); err != nil {
				t.Fatalf("lim.Set(ctx, p, \"k\", 100): %v", err)
			}
			d, _ = lim.Allow(ctx, "k")
			if d.Allowed {
				t.Errorf("allowed, want denied: %+v", d)
			}
		})
	}
}

func TestPolicyCallErrors(t *testing.T) {
	ctx := context.Background()
	lim, _ := frozen(t, core.TokenBucket(10, time.Second))
	_, err := lim.AllowPolicy(ctx, core.FixedWindow(10, time.Second), "k", 1)
	if !errors.Is(err, core.ErrAlgorithmMismatch) {
		t.Errorf("got %v, want %v", err, core.ErrAlgorithmMismatch)
	}
	_, err = lim.AllowPolicy(ctx, core.TokenBucket(0, time.Second), "k", 1)
	if err == nil {
		t.Errorf("err is nil, want an error")
	}
	_, err = lim.AllowPolicy(ctx, core.TokenBucket(10, time.Second), "k", 0)
	if !errors.Is(err, core.ErrInvalidCost) {
		t.Errorf("got %v, want %v", err, core.ErrInvalidCost)
	}
	d, err := lim.AllowPolicy(ctx, core.TokenBucket(10, time.Second).WithName("x"), "k", 11)
	if !errors.Is(err, core.ErrCostExceedsCapacity) {
		t.Errorf("got %v, want %v", err, core.ErrCostExceedsCapacity)
	}
	if d.Allowed {
		t.Errorf("allowed, want denied: %+v", d)
	}
	if d.RetryAfter != 0 {
		t.Errorf("d.RetryAfter = %+v, want 0", d.RetryAfter)
	}
	if d.Policy.Name != "x" {
		t.Errorf("d.Policy.Name = %q, want x", d.Policy.Name)
	}
	for _, used := range []int64{-1, 11} {
		err = lim.Set(ctx, core.TokenBucket(10, time.Second), "k", used)
		if !errors.Is(err, core.ErrInvalidUsage) {
			t.Errorf("used %d: got %v, want %v", used, err, core.ErrInvalidUsage)
		}
	}
	_, err = lim.Get(ctx, core.SlidingWindow(10, time.Second), "k")
	if !errors.Is(err, core.ErrAlgorithmMismatch) {
		t.Errorf("got %v, want %v", err, core.ErrAlgorithmMismatch)
	}
	if err := lim.Close(); err != nil {
		t.Fatalf("lim.Close(): %v", err)
	}
	_, err = lim.AllowPolicy(ctx, core.TokenBucket(10, time.Second), "k", 1)
	if !errors.Is(err, core.ErrClosed) {
		t.Errorf("got %v, want %v", err, core.ErrClosed)
	}
}

// TestManyDistinctPolicies: a program that builds a policy per client
// (beyond the limiter's cache of compiled policies) still gets exact
// decisions.
func TestManyDistinctPolicies(t *testing.T) {
	ctx := context.Background()
	lim, _ := frozen(t, core.FixedWindow(1, time.Minute))
	for i := range 3000 {
		p := core.FixedWindow(int64(1+i%7), time.Minute).WithName("c" + strconv.Itoa(i))
		key := strconv.Itoa(i)
		ok := 0
		for range 8 {
			if d, err := lim.AllowPolicy(ctx, p, key, 1); err == nil && d.Allowed {
				ok++
			}
		}
		if ok != 1+i%7 {
			t.Fatalf("client %d: ok = %+v, want %+v", i, ok, 1+i%7)
		}
	}
}

// TestPlansUnderMaxKeys: keys on three plans flood a small limiter; it
// stays bounded and a key at its plan's limit stays limited.
func TestPlansUnderMaxKeys(t *testing.T) {
	ctx := context.Background()
	for _, p := range allAlgorithms {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			lim, clock := frozen(t, p, core.WithMaxKeys(64))
			plans := []core.Policy{p.WithName("a"), p.WithName("b"), p.WithName("c")}
			plans[1].Limit, plans[1].Burst = 50, min(plans[1].Burst, 50)
			for range 50 {
				_, _ = lim.AllowPolicy(ctx, plans[1], "abuser", 1)
			}
			d, _ := lim.AllowPolicy(ctx, plans[1], "abuser", 1)
			if d.Allowed {
				t.Fatalf("allowed, want denied: %+v", d)
			}
			for i := range 5000 {
				_, _ = lim.AllowPolicy(ctx, plans[i%3], "flood-"+strconv.Itoa(i), 1)
				if i%100 == 0 {
					clock.Advance(time.Millisecond)
				}
			}
			if got := lim.Len(); got > 64 {
				t.Errorf("lim.Len() = %+v, want <= 64", got)
			}
			d, _ = lim.AllowPolicy(ctx, plans[1], "abuser", 1)
			if d.Allowed {
				t.Errorf("allowed, want denied: %+v", d)
			}
		})
	}
}

// TestMorePoliciesThanAShardKeeps: a one-key limiter holds a limited key;
// newcomers of 16 policies find no room and are counted in inherited
// states, one per policy (limited together, as one key); a
// newcomer of a 17th policy is denied, told to retry when the first of
// those states has recovered, and admitted then.
func TestMorePoliciesThanAShardKeeps(t *testing.T) {
	ctx := context.Background()
	own := core.FixedWindow(1, time.Minute)
	lim, clock := frozen(t, own, core.WithMaxKeys(1))
	d, err := lim.Allow(ctx, "holder")
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed { // limited now: never evicted
		t.Fatalf("denied, want allowed: %+v", d)
	}
	// One Window for all: a state converted to another Window would count
	// the Limit of the window before its own (see "Policies per call").
	plan := func(i int) core.Policy {
		return core.FixedWindow(int64(100+i), time.Second).WithName("p" + strconv.Itoa(i))
	}
	for i := range 16 {
		d, err := lim.AllowPolicy(ctx, plan(i), "k"+strconv.Itoa(i), 1)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			t.Errorf("policy %d: denied, want allowed: %+v", i, d)
		}
	}
	d, err = lim.AllowPolicy(ctx, plan(16), "k16", 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed {
		t.Errorf("allowed, want denied: %+v", d)
	}
	if d.Remaining != 0 {
		t.Errorf("d.Remaining = %+v, want 0", d.Remaining)
	}
	// The inherited states are idle one second after their window (1 s,
	// epoch-aligned) ends: their counts may still lie in another policy's
	// window until then.
	wait := 2*time.Second - time.Duration(coretest.Epoch.UnixNano()%int64(time.Second))
	if d.RetryAfter != wait {
		t.Errorf("d.RetryAfter = %+v, want %+v", d.RetryAfter, wait)
	}
	p, err := lim.Peek(ctx, "k16") // the limiter's own policy has none either
	if err != nil {
		t.Fatal(err)
	}
	if p.Allowed {
		t.Errorf("allowed, want denied: %+v", p)
	}
	if p.RetryAfter != wait {
		t.Errorf("p.RetryAfter = %+v, want %+v", p.RetryAfter, wait)
	}
	clock.Advance(d.RetryAfter)
	d, err = lim.AllowPolicy(ctx, plan(16), "k16", 1)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed {
		t.Errorf("denied, want allowed: %+v", d)
	}
	if got := lim.Len(); got != 1 {
		t.Errorf("lim.Len() = %+v, want 1", got)
	}
}
