package coretest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// RunMoves moves one key to another policy in four ways (a sliding window to
// fewer buckets, a fixed window to a shorter window, a token bucket to the
// slowest valid plan, a leaky bucket to a faster plan) and counts exactly
// what the store admits against "Policies per call" in the package docs of
// core; then, for each algorithm, it has a client obey the RetryAfter of a
// denial under a plan its key is not on (UpgradeDenialRetryAfterAdmits).
// It is skipped unless New builds a core.PolicyLimiter.
func (s Suite) RunMoves(t *testing.T) {
	for _, w := range []time.Duration{time.Second, 10 * time.Second} {
		t.Run("SlidingWindowFewerBuckets/"+w.String(), func(t *testing.T) { s.slidingWindowMovedToFewerBuckets(t, w) })
	}
	t.Run("FixedWindowShorterWindow", s.fixedWindowMovedToAShorterWindow)
	t.Run("TokenBucketToSlowPlan", s.tokenBucketMovedToAVerySlowPlan)
	t.Run("LeakyBucketFasterPlan", s.leakyBucketMovedToAFasterPlan)
	for _, c := range upgradeDenials() {
		t.Run("UpgradeDenialRetryAfterAdmits/"+c.name, func(t *testing.T) { s.upgradeDenialRetryAfterAdmits(t, c) })
	}
}

// The four scenarios are the ways around "a change never adds capacity"
// that issue 17 reported. The clock starts at Epoch, a multiple of every
// window below.

// moveFixture is a PolicyLimiter of the suite on a clock at Epoch.
type moveFixture struct {
	lim   core.PolicyLimiter
	clock *Clock
}

func (s Suite) moveFixture(t *testing.T, own core.Policy) moveFixture {
	t.Helper()
	clock := NewClock(Epoch)
	return moveFixture{lim: s.policyLimiter(t, own, clock.Now), clock: clock}
}

// admitted makes n unit-cost calls under p at Epoch+at and returns how
// many were admitted.
func (f moveFixture) admitted(t *testing.T, p core.Policy, at time.Duration, n int) int {
	t.Helper()
	f.clock.Set(Epoch.Add(at))
	got := 0
	for range n {
		d, err := f.lim.AllowPolicy(context.Background(), p, "k", 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			got++
		}
	}
	return got
}

// slidingWindowMovedToFewerBuckets is case 1: A = SlidingWindow(10, w) in
// 10 buckets, B the same in 5. Ten requests under A in its first bucket,
// then ten under B at w: B's oldest bucket still holds A's ten, so B
// admits the 2 its bound on B+1 buckets leaves, 12 in all
// (B.MaxInWindow), where a conversion that dropped A's oldest bucket
// admitted all ten, 20 within one Window.
func (s Suite) slidingWindowMovedToFewerBuckets(t *testing.T, w time.Duration) {
	a := core.SlidingWindow(10, w).WithName("A")
	b := a.WithBuckets(5).WithName("B")
	f := s.moveFixture(t, a)
	if got := f.admitted(t, a, w/20, 10); got != 10 {
		t.Errorf("under A: f.admitted(t, a, w/20, 10) = %+v, want 10", got)
	}
	if got := f.admitted(t, b, w, 10); got != 2 {
		t.Errorf("under B, one Window later: f.admitted(t, b, w, 10) = %+v, want 2", got)
	}
	if got := b.MaxInWindow(); got != 12 {
		t.Errorf("B's MaxInWindow() = %d, want 12", got)
	}
}

// fixedWindowMovedToAShorterWindow is case 2: A = FixedWindow(10, 3s), B
// = FixedWindow(10, 2s). Ten under A at 2.99s fill A's window [0, 3s),
// which has ended at 3s but lies in B's window [2s, 4s): B admits nothing
// then, and ten at 4s, in its next window. 20 in all, B.MaxInWindow;
// carrying nothing from an ended window admitted 30 within about 1s.
func (s Suite) fixedWindowMovedToAShorterWindow(t *testing.T) {
	a := core.FixedWindow(10, 3*time.Second).WithName("A")
	b := core.FixedWindow(10, 2*time.Second).WithName("B")
	f := s.moveFixture(t, a)
	if got := f.admitted(t, a, 2990*time.Millisecond, 10); got != 10 {
		t.Errorf("under A at 2.99s: f.admitted(t, a, 2990*time.Millisecond, 10) = %+v, want 10", got)
	}
	if got := f.admitted(t, b, 3*time.Second, 10); got != 0 {
		t.Errorf("under B at 3s: A's ten lie in B's window [2s, 4s): f.admitted(t, b, 3*time.Second, 10) = %+v, want 0", got)
	}
	f.clock.Set(Epoch.Add(3 * time.Second))
	d, err := f.lim.AllowPolicy(context.Background(), b, "k", 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := (core.Decision{Limit: 10, ResetAfter: time.Second, RetryAfter: time.Second, Policy: b, At: Epoch.Add(3 * time.Second)}); d != want {
		t.Errorf("d = %+v, want %+v", d, want)
	}
	if got := f.admitted(t, b, 4*time.Second, 10); got != 10 {
		t.Errorf("under B at 4s, its next window: f.admitted(t, b, 4*time.Second, 10) = %+v, want 10", got)
	}
}

// tokenBucketMovedToAVerySlowPlan is case 3: bulk = TokenBucket(100_000,
// 1s); daily = TokenBucket(1, 24h).WithBurst(25_000) takes 25,000 days to
// refill, beyond core.MaxSpan, and every store rejects it with an error
// naming the burst. The slowest plan of that kind that is valid, a burst
// of 50, takes 100,000 units used under bulk as 100,000 days of debt,
// kept at MaxSpan (52 days): every request is denied, Get says Remaining
// 0, and nothing wraps around (the rescaled debt once wrapped, and the
// daily plan admitted 42,000 with Remaining -81963). Denied, the key stays
// under bulk and is back to full by 1s, and 21 units fit under slow once
// 29 of bulk's are owed (290µs before).
func (s Suite) tokenBucketMovedToAVerySlowPlan(t *testing.T) {
	ctx := context.Background()
	bulk := core.TokenBucket(100_000, time.Second).WithName("bulk")
	daily := core.TokenBucket(1, 24*time.Hour).WithBurst(25_000).WithName("daily")
	f := s.moveFixture(t, bulk)
	d, err := f.lim.AllowPolicy(ctx, bulk, "k", 100_000)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed {
		t.Fatalf("denied, want allowed: %+v", d)
	}
	for range 3 {
		_, err := f.lim.AllowPolicy(ctx, daily, "k", 21_000)
		if err == nil || !strings.Contains(err.Error(), "burst 25000") {
			t.Errorf("the daily plan takes 25,000 days to refill: got %v, want an error naming its burst 25000", err)
		}
	}
	slow := daily.WithBurst(50).WithName("slow")
	if err := slow.Validate(); err != nil {
		t.Fatalf("slow.Validate(): %v", err)
	}
	for range 3 {
		d, err := f.lim.AllowPolicy(ctx, slow, "k", 21)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			t.Errorf("allowed, want denied: %+v", d)
		}
		if d.Remaining != 0 {
			t.Errorf("d.Remaining = %+v, want 0", d.Remaining)
		}
		if d.RetryAfter != time.Second-290*time.Microsecond {
			t.Errorf("d.RetryAfter = %+v, want %+v", d.RetryAfter, time.Second-290*time.Microsecond)
		}
		if d.ResetAfter != time.Second {
			t.Errorf("d.ResetAfter = %+v, want %+v", d.ResetAfter, time.Second)
		}
	}
	u, err := f.lim.Get(ctx, slow, "k")
	if err != nil {
		t.Fatal(err)
	}
	if want := (core.Usage{Used: 53, Remaining: 0, ResetAfter: time.Second, Policy: slow}); u != want {
		t.Errorf("u = %+v, want %+v", u, want)
	}
}

// leakyBucketMovedToAFasterPlan is case 4: five requests under
// LeakyBucket(1, 1s).WithBurst(5) are served at 0, 1, 2, 3 and 4s; the
// key then moves to LeakyBucket(10, 1s), a request every 100ms from
// 100ms to 6s. The five stay at their instants and B's requests are
// served after them, 100ms apart: the first admitted at 4.1s, served at
// 5s, and then every one, 20 in all. No two are served at one instant and
// no second serves more than 10 (a conversion that moved the queue
// served two at once and 13 in one second).
func (s Suite) leakyBucketMovedToAFasterPlan(t *testing.T) {
	ctx := context.Background()
	a := core.LeakyBucket(1, time.Second).WithBurst(5).WithName("A")
	b := core.LeakyBucket(10, time.Second).WithName("B")
	f := s.moveFixture(t, a)
	var served []time.Duration
	for i := range 5 {
		d, err := f.lim.AllowPolicy(ctx, a, "k", 1)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			t.Fatalf("denied, want allowed: %+v", d)
		}
		if d.Delay != time.Duration(i)*time.Second {
			t.Errorf("d.Delay = %+v, want %+v", d.Delay, time.Duration(i)*time.Second)
		}
		served = append(served, d.Delay)
	}
	admitted := 0
	for i := 1; i <= 60; i++ {
		at := time.Duration(i) * 100 * time.Millisecond
		f.clock.Set(Epoch.Add(at))
		d, err := f.lim.AllowPolicy(ctx, b, "k", 1)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			if at >= 4100*time.Millisecond {
				t.Errorf("denied at %v, want allowed from 4.1s", at)
			}
			continue
		}
		if admitted == 0 {
			if at != 4100*time.Millisecond {
				t.Errorf("the first admitted under B: at = %+v, want %+v", at, 4100*time.Millisecond)
			}
			if d.Delay != 900*time.Millisecond {
				t.Errorf("d.Delay = %+v, want %+v", d.Delay, 900*time.Millisecond)
			}
		}
		admitted++
		served = append(served, at+d.Delay)
	}
	if admitted != 20 {
		t.Errorf("admitted = %+v, want 20", admitted)
	}
	most := 0
	for i := range served {
		if i > 0 {
			gap := served[i] - served[i-1]
			want := 100 * time.Millisecond // B's interval
			if i < 5 {
				want = time.Second // A's
			}
			if gap < want {
				t.Errorf("served at %v, %v after the one before, want at least %v", served[i], gap, want)
			}
		}
		n := 0
		for _, x := range served {
			if served[i] <= x && x < served[i]+time.Second {
				n++
			}
		}
		most = max(most, n)
	}
	if most != 10 {
		t.Errorf("the most served in one second: most = %+v, want 10", most)
	}
}

// upgradeDenial is one case of UpgradeDenialRetryAfterAdmits: spend under
// a at Epoch, then a call of cost n under b at Epoch+at, denied, whose
// RetryAfter and ResetAfter are worked out by hand.
type upgradeDenial struct {
	name         string
	a            core.Policy
	spend        int64
	b            core.Policy
	at           time.Duration
	n            int64
	retry, reset time.Duration
}

// upgradeDenials are issue 24's defect 1 and its mirror image, per
// algorithm. A denial under b leaves the key under a, so it keeps
// recovering at a's rate (or in a's windows and buckets) until a call
// under b is admitted: its RetryAfter is the time until the key, converted
// then, admits the cost, and its ResetAfter until it is back to b's full
// quota. The case, an upgrade (a token bucket of 6 a minute,
// burst 10, spent, then 60 a second, burst 5) was told about 100ms, the
// time the debt converted at the denial would take at b's rate, and a
// client obeying it was denied 11,387 times, admitted 59.7s later; a
// downgrade was told longer than needed.
func upgradeDenials() []upgradeDenial {
	slow := core.TokenBucket(6, time.Minute).WithBurst(10) // 10s a token
	fast := core.TokenBucket(60, time.Second).WithBurst(5) // 16,666,666ns a token
	leaky := func(p core.Policy) core.Policy { p.Algorithm = core.AlgLeakyBucket; return p }
	meter := func(p core.Policy) core.Policy { return leaky(p).AsMeter() }
	return []upgradeDenial{
		// 10 tokens owed at 10s each, back by 100s. After a unit under
		// fast, its burst leaves room for 4 tokens owed (66,666,664ns of
		// fast's): 4 of slow's, owed from 60s on.
		{"TokenBucket/upgrade", slow, 10, fast, 0, 1, 60 * time.Second, 100 * time.Second},
		{"LeakyBucketMeter/upgrade", meter(slow), 10, meter(fast), 0, 1, 60 * time.Second, 100 * time.Second},
		// 5 tokens owed at 16,666,666ns each, back by 83,333,330ns. Cost 6
		// under slow leaves room for 4 owed: 4 of fast's, from 16,666,666ns.
		{"TokenBucket/downgrade", fast, 5, slow, 0, 6, 16_666_666, 83_333_330},
		{"LeakyBucketMeter/downgrade", meter(fast), 5, meter(slow), 0, 6, 16_666_666, 83_333_330},
		// The queue of 10 ends at 100s, and a request under fast is served
		// after it, within fast's depth: at most 66,666,664ns ahead.
		{"LeakyBucket/upgrade", leaky(slow), 10, leaky(fast), 0, 1, 100*time.Second - 66_666_664, 100 * time.Second},
		// As the token bucket's downgrade: the queue ends at 83,333,330ns.
		{"LeakyBucket/downgrade", leaky(fast), 5, leaky(slow), 0, 6, 16_666_666, 83_333_330},
		// 100 in the hour count in every minute of it (a's window holding
		// them overlaps b's), until 1h.
		{"FixedWindow/shorter window", core.FixedWindow(100, time.Hour), 100, core.FixedWindow(10, time.Minute), 30 * time.Second, 1, time.Hour - 30*time.Second, time.Hour - 30*time.Second},
		// 10 in a's second 0 count in b's window [0, 10s) until a's
		// window after it has ended: from 2s on, they are more than a's
		// Window old.
		{"FixedWindow/longer window", core.FixedWindow(10, time.Second), 10, core.FixedWindow(5, 10*time.Second), 500 * time.Millisecond, 1, 1500 * time.Millisecond, 1500 * time.Millisecond},
		// 100 in a's bucket [0, 1m) count in b's bucket [54s, 1m), the
		// newest of b's it overlaps, until it has left b's 11 buckets,
		// at 2m.
		{"SlidingWindow/shorter window", core.SlidingWindow(100, time.Hour).WithBuckets(60), 100, core.SlidingWindow(10, time.Minute), 30 * time.Second, 1, 90 * time.Second, 90 * time.Second},
		// 10 in a's bucket [0, 100ms) leave a's 11 buckets at 1.1s.
		{"SlidingWindow/longer window", core.SlidingWindow(10, time.Second), 10, core.SlidingWindow(5, 10*time.Second), 500 * time.Millisecond, 1, 600 * time.Millisecond, 600 * time.Millisecond},
	}
}

// upgradeDenialRetryAfterAdmits: the denial under b says exactly when to
// retry and when the full quota is back; a client that waits exactly each
// RetryAfter is admitted at its first retry, and not 1ns before.
func (s Suite) upgradeDenialRetryAfterAdmits(t *testing.T, c upgradeDenial) {
	ctx := context.Background()
	a, b := c.a.WithName("a"), c.b.WithName("b")
	f := s.moveFixture(t, a)
	if d, err := f.lim.AllowPolicy(ctx, a, "k", c.spend); err != nil || !d.Allowed {
		t.Fatalf("AllowPolicy(a, k, %d) = %+v, %v; want admitted", c.spend, d, err)
	}
	f.clock.Set(Epoch.Add(c.at))
	d, err := f.lim.AllowPolicy(ctx, b, "k", c.n)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.RetryAfter != c.retry || d.ResetAfter != c.reset {
		t.Errorf("under b at +%v: d = %+v, want denied with RetryAfter %v and ResetAfter %v", c.at, d, c.retry, c.reset)
	}
	first := d.RetryAfter
	for retries := 1; !d.Allowed; retries++ {
		if retries > 100 {
			t.Fatalf("a client obeying RetryAfter is still denied after 100 retries, at +%v: %+v", f.clock.Now().Sub(Epoch), d)
		}
		if wait := d.RetryAfter; wait > 1 {
			f.clock.Advance(wait - 1)
			early, err := f.lim.AllowPolicy(ctx, b, "k", c.n)
			if err != nil {
				t.Fatal(err)
			}
			if early.Allowed {
				t.Fatalf("RetryAfter %v is longer than needed: admitted 1ns before it, at +%v", wait, f.clock.Now().Sub(Epoch))
			}
			f.clock.Advance(1)
		} else {
			f.clock.Advance(wait)
		}
		if d, err = f.lim.AllowPolicy(ctx, b, "k", c.n); err != nil {
			t.Fatal(err)
		}
		if !d.Allowed && retries == 1 {
			t.Errorf("waited RetryAfter %v and was denied again: %+v", first, d)
		}
	}
	if got, want := f.clock.Now().Sub(Epoch), c.at+c.retry; got != want {
		t.Errorf("admitted at +%v, want +%v", got, want)
	}
}
