// Package coretest is the conformance suite of the [core.Limiter] contract,
// for the authors of stores: a store that passes it gives the same
// [core.Decision] as the in-memory limiter of package core for the same
// requests at the same instants. The in-memory limiter and the Redis store
// of this repository run it.
//
// A store's tests hand the suite a [NewLimiter], which builds a limiter for a
// policy reading time from the clock the suite passes in (the suite moves
// that clock and never sleeps):
//
//	func TestConformance(t *testing.T) {
//		coretest.Run(t, func(t *testing.T, p core.Policy, now func() time.Time) core.Limiter {
//			lim, err := mystore.New(p, mystore.WithClock(now))
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { lim.Close() })
//			return lim
//		})
//	}
//
// [Run] checks the contract on tables worked out by hand, in whole
// milliseconds (a store computing in microseconds agrees exactly), with
// policies given per call when the limiter is a [core.PolicyLimiter]. A
// [Suite] configures the run and has four more: [Suite.RunModel],
// [Suite.RunProperties], [Suite.RunPlanScenarios] and [Suite.RunMoves].
//
// Two environment variables control the random runs:
//
//	RATELIMIT_MODEL_DURATION=5m  how long RunModel runs per store (default 5s);
//	                             RunProperties spends half of it
//	RATELIMIT_MODEL_SEED=1234    run only the case of this seed
//
// A failure prints its seed, the step and the history of the key that
// failed.
package coretest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// Epoch is where the suite's clocks start: midnight UTC, so it is a
// boundary of every fixed window and sliding-window bucket the suite uses.
var Epoch = time.Date(2027, time.January, 15, 0, 0, 0, 0, time.UTC)

// Clock is a manual clock, safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Advance moves the clock by d (backwards when d < 0).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// NewLimiter builds the limiter under test for policy p, reading time from
// now. It fails t (t.Fatal) when it cannot, and registers its own cleanup.
type NewLimiter func(t *testing.T, p core.Policy, now func() time.Time) core.Limiter

// Suite configures a run of the conformance suite.
type Suite struct {
	New        NewLimiter // builds the limiter under test
	Goroutines int        // released together by the exactness tests (default 1000)
	Steps      int        // of each random schedule compared with the in-memory reference (default 300)

	// MonotonicClock says that the store treats a clock that steps back as
	// standing still at the latest instant seen (as core.MemoryLimiter
	// does). Without it, a decision at an instant earlier than its key's
	// latest admission must be no more generous than one at that admission.
	MonotonicClock bool
	// Sweep, when set, makes the store evict what it considers idle now.
	// RunModel and RunProperties call it at random points; it must never
	// change a decision.
	Sweep func(core.Limiter)
	// Inexact says that the store may limit a key earlier than the model
	// (core.MemoryLimiter under a small WithMaxKeys): RunModel then checks
	// only that it never admits what the model, fed with what the store
	// admitted, denies.
	Inexact bool
}

// Run runs Suite.Run against newLimiter with the defaults.
func Run(t *testing.T, newLimiter NewLimiter) { Suite{New: newLimiter}.Run(t) }

// Run runs the conformance tables; RunModel, RunProperties,
// RunPlanScenarios and RunMoves are run on their own.
func (s Suite) Run(t *testing.T) {
	if s.Goroutines == 0 {
		s.Goroutines = 1000
	}
	if s.Steps == 0 {
		s.Steps = 300
	}
	t.Run("sequences", s.sequences)
	t.Run("RetryAfter is honest", s.retryAfterHonest)
	t.Run("cost validation", s.costValidation)
	t.Run("Peek does not consume", s.peek)
	t.Run("Reset forgets the key", s.reset)
	t.Run("clock jumps", s.clockJumps)
	t.Run("window boundaries", s.boundaries)
	t.Run("exact under concurrency", s.concurrency)
	t.Run("matches the in-memory reference", s.reference)
	t.Run("policies per call", s.policies)
}

// step is one request of a table: at Epoch+at, cost n (0 means Peek).
type step struct {
	at        time.Duration
	n         int64
	allowed   bool
	remaining int64
	reset     time.Duration
	retry     time.Duration
	delay     time.Duration
}

const ms = time.Millisecond

// allowN is lim.AllowN(key, n), failing t on an error.
func allowN(t *testing.T, lim core.Limiter, key string, n int64) core.Decision {
	t.Helper()
	d, err := lim.AllowN(context.Background(), key, n)
	if err != nil {
		t.Fatalf("AllowN(%s, %d): %v", key, n, err)
	}
	return d
}

// key returns a key unique to this test run, so that a store kept between
// runs (a shared Redis) starts every test from nothing.
func key(t *testing.T, suffix string) string {
	return fmt.Sprintf("coretest/%s/%d/%s", t.Name(), time.Now().UnixNano(), suffix)
}

// Policies returns one policy per algorithm as used across the suite,
// small enough to reason about by hand.
func Policies() []core.Policy {
	return []core.Policy{
		core.FixedWindow(3, time.Minute),
		core.SlidingWindow(10, time.Second),
		core.TokenBucket(10, time.Second).WithBurst(5),
		core.LeakyBucket(10, time.Second).WithBurst(3),
		core.LeakyBucket(10, time.Second).WithBurst(3).AsMeter(),
	}
}

func name(p core.Policy) string {
	if p.Meter {
		return p.Algorithm.String() + "Meter"
	}
	return p.Algorithm.String()
}

func (s Suite) sequences(t *testing.T) {
	tables := []struct {
		policy core.Policy
		steps  []step
	}{
		{core.FixedWindow(3, time.Minute), []step{
			{at: 10 * time.Second, n: 1, allowed: true, remaining: 2, reset: 50 * time.Second},
			{at: 10 * time.Second, n: 1, allowed: true, remaining: 1, reset: 50 * time.Second},
			{at: 20 * time.Second, n: 1, allowed: true, remaining: 0, reset: 40 * time.Second},
			{at: 20 * time.Second, n: 1, allowed: false, remaining: 0, reset: 40 * time.Second, retry: 40 * time.Second},
			{at: 20 * time.Second, n: 0, allowed: false, remaining: 0, reset: 40 * time.Second, retry: 40 * time.Second},
			{at: 59999 * ms, n: 1, allowed: false, remaining: 0, reset: ms, retry: ms},
			{at: time.Minute, n: 0, allowed: true, remaining: 3},
			{at: time.Minute, n: 2, allowed: true, remaining: 1, reset: time.Minute},
			{at: time.Minute, n: 2, allowed: false, remaining: 1, reset: time.Minute, retry: time.Minute},
		}},
		{core.SlidingWindow(10, time.Second), []step{
			{at: 50 * ms, n: 10, allowed: true, remaining: 0, reset: 1050 * ms},
			{at: 950 * ms, n: 1, allowed: false, remaining: 0, reset: 150 * ms, retry: 50 * ms},
			// Bucket 0 left the trailing window but is still among the
			// B+1 buckets: one more (Limit/B) fits, not ten.
			{at: 1000 * ms, n: 1, allowed: true, remaining: 0, reset: 1000 * ms},
			{at: 1000 * ms, n: 1, allowed: false, remaining: 0, reset: 1000 * ms, retry: 100 * ms},
			{at: 1100 * ms, n: 1, allowed: true, remaining: 8, reset: 1000 * ms},
			{at: 1150 * ms, n: 0, allowed: true, remaining: 8, reset: 950 * ms},
			{at: 5 * time.Second, n: 0, allowed: true, remaining: 10},
		}},
		{core.TokenBucket(10, time.Second).WithBurst(5), []step{
			{at: 0, n: 1, allowed: true, remaining: 4, reset: 100 * ms},
			{at: 0, n: 3, allowed: true, remaining: 1, reset: 400 * ms},
			{at: 0, n: 1, allowed: true, remaining: 0, reset: 500 * ms},
			{at: 0, n: 1, allowed: false, remaining: 0, reset: 500 * ms, retry: 100 * ms},
			{at: 100 * ms, n: 1, allowed: true, remaining: 0, reset: 500 * ms},
			{at: 100 * ms, n: 2, allowed: false, remaining: 0, reset: 500 * ms, retry: 200 * ms},
			{at: 350 * ms, n: 2, allowed: true, remaining: 0, reset: 450 * ms},
			{at: 350 * ms, n: 0, allowed: false, remaining: 0, reset: 450 * ms, retry: 50 * ms},
			{at: 2 * time.Second, n: 1, allowed: true, remaining: 4, reset: 100 * ms},
		}},
		{core.LeakyBucket(10, time.Second).WithBurst(3), []step{
			{at: 0, n: 1, allowed: true, remaining: 2, reset: 100 * ms, delay: 0},
			{at: 0, n: 1, allowed: true, remaining: 1, reset: 200 * ms, delay: 100 * ms},
			{at: 0, n: 1, allowed: true, remaining: 0, reset: 300 * ms, delay: 200 * ms},
			{at: 0, n: 1, allowed: false, remaining: 0, reset: 300 * ms, retry: 100 * ms},
			{at: 150 * ms, n: 1, allowed: true, remaining: 0, reset: 250 * ms, delay: 150 * ms},
			{at: 400 * ms, n: 2, allowed: true, remaining: 1, reset: 200 * ms, delay: 0},
		}},
		{core.LeakyBucket(10, time.Second).WithBurst(3).AsMeter(), []step{
			{at: 0, n: 1, allowed: true, remaining: 2, reset: 100 * ms},
			{at: 0, n: 1, allowed: true, remaining: 1, reset: 200 * ms},
			{at: 0, n: 1, allowed: true, remaining: 0, reset: 300 * ms},
			{at: 0, n: 1, allowed: false, remaining: 0, reset: 300 * ms, retry: 100 * ms},
			{at: 150 * ms, n: 1, allowed: true, remaining: 0, reset: 250 * ms},
		}},
	}
	for _, tc := range tables {
		t.Run(name(tc.policy), func(t *testing.T) {
			clock := NewClock(Epoch)
			lim := s.New(t, tc.policy, clock.Now)
			if got := lim.Policy(); got != tc.policy {
				t.Errorf("lim.Policy() = %+v, want %+v", got, tc.policy)
			}
			k := key(t, "k")
			for i, st := range tc.steps {
				clock.Advance(Epoch.Add(st.at).Sub(clock.Now()))
				d, err := call(lim, k, st.n)
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				want := core.Decision{
					Allowed: st.allowed, Limit: tc.policy.Limit, Remaining: st.remaining,
					ResetAfter: st.reset, RetryAfter: st.retry, Delay: st.delay, Policy: tc.policy,
					At: clock.Now(),
				}
				if d != want {
					t.Errorf("step %d: at +%v cost %d: d = %+v, want %+v", i, st.at, st.n, d, want)
				}
			}
		})
	}
}

// call is AllowN, or Peek for n == 0.
func call(lim core.Limiter, key string, n int64) (core.Decision, error) {
	if n == 0 {
		return lim.Peek(context.Background(), key)
	}
	return lim.AllowN(context.Background(), key, n)
}

// retryAfterHonest drives each policy into denial at many offsets and
// checks that waiting exactly RetryAfter admits the same cost, and that
// waiting 1 ms less does not (so RetryAfter is also not longer than needed,
// to the millisecond).
func (s Suite) retryAfterHonest(t *testing.T) {
	for _, p := range Policies() {
		t.Run(name(p), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(p.Algorithm)))
			clock := NewClock(Epoch)
			lim := s.New(t, p, clock.Now)
			k := key(t, "k")
			checked := 0
			for range 60 {
				clock.Advance(time.Duration(rng.Int64N(int64(p.Window/ms)/4+1)) * ms)
				n := 1 + rng.Int64N(p.Capacity())
				d := allowN(t, lim, k, n)
				if d.Allowed {
					if d.RetryAfter != 0 {
						t.Errorf("d.RetryAfter = %+v, want 0", d.RetryAfter)
					}
					continue
				}
				if d.RetryAfter <= 0 {
					t.Fatalf("a denial must say when to retry: d.RetryAfter = %+v, want > 0", d.RetryAfter)
				}
				checked++
				if d.RetryAfter > ms {
					clock.Advance(d.RetryAfter - ms)
					early, err := lim.Peek(context.Background(), k)
					if err != nil {
						t.Fatal(err)
					}
					if n == 1 {
						if early.Allowed {
							t.Errorf("1ms before RetryAfter %v: allowed, want denied: %+v", d.RetryAfter, early)
						}
					}
					clock.Advance(ms)
				} else {
					clock.Advance(d.RetryAfter)
				}
				again := allowN(t, lim, k, n)
				if !again.Allowed {
					t.Errorf("waited RetryAfter %v for cost %d: denied, want allowed: %+v", d.RetryAfter, n, again)
				}
			}
			if checked <= 5 {
				t.Errorf("the schedule must produce denials to check: checked = %+v, want > 5", checked)
			}
		})
	}
}

func (s Suite) costValidation(t *testing.T) {
	for _, p := range Policies() {
		t.Run(name(p), func(t *testing.T) {
			clock := NewClock(Epoch)
			lim := s.New(t, p, clock.Now)
			k := key(t, "k")
			ctx := context.Background()
			for _, n := range []int64{0, -1, -1 << 62} {
				_, err := lim.AllowN(ctx, k, n)
				if !errors.Is(err, core.ErrInvalidCost) {
					t.Errorf("cost %d: got %v, want %v", n, err, core.ErrInvalidCost)
				}
			}
			d, err := lim.AllowN(ctx, k, p.Capacity()+1)
			if !errors.Is(err, core.ErrCostExceedsCapacity) {
				t.Fatalf("got %v, want %v", err, core.ErrCostExceedsCapacity)
			}
			if d.Allowed {
				t.Errorf("allowed, want denied: %+v", d)
			}
			if d.RetryAfter != 0 {
				t.Errorf("waiting cannot help a cost above capacity: d.RetryAfter = %+v, want 0", d.RetryAfter)
			}
			if d.Remaining != p.Capacity() {
				t.Errorf("a refused cost consumes nothing: d.Remaining = %+v, want %+v", d.Remaining, p.Capacity())
			}
			if d.Limit != p.Limit {
				t.Errorf("d.Limit = %+v, want %+v", d.Limit, p.Limit)
			}

			// Use everything, then show that invalid costs minted nothing.
			d = allowN(t, lim, k, p.Capacity())
			if !d.Allowed {
				t.Fatalf("denied, want allowed: %+v", d)
			}
			for _, n := range []int64{-5, 0} {
				_, err = lim.AllowN(ctx, k, n)
				if !errors.Is(err, core.ErrInvalidCost) {
					t.Fatalf("got %v, want %v", err, core.ErrInvalidCost)
				}
			}
			d = allowN(t, lim, k, 1)
			if d.Allowed {
				t.Errorf("a negative cost must not add capacity: allowed, want denied: %+v", d)
			}
			if d.Remaining != 0 {
				t.Errorf("d.Remaining = %+v, want 0", d.Remaining)
			}
		})
	}
}

func (s Suite) peek(t *testing.T) {
	for _, p := range Policies() {
		t.Run(name(p), func(t *testing.T) {
			clock := NewClock(Epoch)
			lim := s.New(t, p, clock.Now)
			k := key(t, "k")
			ctx := context.Background()
			for range 5 {
				d, err := lim.Peek(ctx, k)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed {
					t.Errorf("denied, want allowed: %+v", d)
				}
				if d.Remaining != p.Capacity() {
					t.Errorf("d.Remaining = %+v, want %+v", d.Remaining, p.Capacity())
				}
				if d.ResetAfter != 0 {
					t.Errorf("d.ResetAfter = %+v, want 0", d.ResetAfter)
				}
			}
			for i := range p.Capacity() {
				d := allowN(t, lim, k, 1)
				if !d.Allowed {
					t.Fatalf("request %d: denied, want allowed: %+v", i+1, d)
				}
			}
			d, err := lim.Peek(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				t.Errorf("allowed, want denied: %+v", d)
			}
			if d.Remaining != 0 {
				t.Errorf("d.Remaining = %+v, want 0", d.Remaining)
			}
			if d.RetryAfter <= 0 {
				t.Errorf("d.RetryAfter = %+v, want > 0", d.RetryAfter)
			}
		})
	}
}

func (s Suite) reset(t *testing.T) {
	for _, p := range Policies() {
		t.Run(name(p), func(t *testing.T) {
			clock := NewClock(Epoch)
			lim := s.New(t, p, clock.Now)
			k, other := key(t, "k"), key(t, "other")
			ctx := context.Background()
			allowN(t, lim, k, p.Capacity())
			allowN(t, lim, other, p.Capacity())
			if err := lim.Reset(ctx, k); err != nil {
				t.Fatalf("lim.Reset(ctx, k): %v", err)
			}
			d := allowN(t, lim, k, 1)
			if !d.Allowed {
				t.Errorf("reset key starts afresh: denied, want allowed: %+v", d)
			}
			if d.Remaining != p.Capacity()-1 {
				t.Errorf("d.Remaining = %+v, want %+v", d.Remaining, p.Capacity()-1)
			}
			d = allowN(t, lim, other, 1)
			if d.Allowed {
				t.Errorf("other keys keep their state: allowed, want denied: %+v", d)
			}
			if err := lim.Reset(ctx, key(t, "never-seen")); err != nil {
				t.Fatalf("resetting an unknown key is not an error: lim.Reset(ctx, key(t, \"never-seen\")): %v", err)
			}
		})
	}
}

func (s Suite) clockJumps(t *testing.T) {
	for _, p := range Policies() {
		t.Run(name(p), func(t *testing.T) {
			clock := NewClock(Epoch.Add(30 * time.Second))
			lim := s.New(t, p, clock.Now)
			k := key(t, "k")
			allowN(t, lim, k, p.Capacity())

			clock.Advance(-time.Hour)
			d := allowN(t, lim, k, 1)
			if d.Allowed {
				t.Errorf("a backward step must not mint capacity: allowed, want denied: %+v", d)
			}

			clock.Advance(time.Hour + 100*365*24*time.Hour)
			d = allowN(t, lim, k, 1)
			if !d.Allowed {
				t.Errorf("100 years idle: full again: denied, want allowed: %+v", d)
			}
			if d.Remaining != p.Capacity()-1 {
				t.Errorf("a forward jump refills only up to capacity: d.Remaining = %+v, want %+v", d.Remaining, p.Capacity()-1)
			}
		})
	}
}

// boundaries shows the trade-off between the windows: the fixed window
// admits 2*Limit across a boundary, the sliding window never more than
// Limit*(1+1/Buckets) in any interval of one Window, over random schedules.
func (s Suite) boundaries(t *testing.T) {
	t.Run("fixed window admits 2x limit across a boundary", func(t *testing.T) {
		p := core.FixedWindow(100, time.Second)
		clock := NewClock(Epoch.Add(999 * ms))
		lim := s.New(t, p, clock.Now)
		k := key(t, "k")
		admitted := 0
		for _, d := range []time.Duration{0, 2 * ms} {
			clock.Advance(d)
			for range 150 {
				got := allowN(t, lim, k, 1)
				if got.Allowed {
					admitted++
				}
			}
		}
		if admitted != 200 {
			t.Errorf("100 in the last ms of a window, 100 in the first of the next: admitted = %+v, want 200", admitted)
		}
	})
	t.Run("sliding window stays within limit*(1+1/buckets)", func(t *testing.T) {
		p := core.SlidingWindow(20, time.Second).WithBuckets(5)
		bound := float64(p.Limit) * (1 + 1/float64(p.Buckets))
		for seed := range uint64(8) {
			rng := rand.New(rand.NewPCG(seed, 99))
			clock := NewClock(Epoch)
			lim := s.New(t, p, clock.Now)
			k := key(t, fmt.Sprint(seed))
			var admittedAt []time.Duration
			var at time.Duration
			for range 400 {
				// Bursts and silences: most steps 0-3 ms, some up to 400 ms.
				gap := time.Duration(rng.IntN(4)) * ms
				if rng.IntN(20) == 0 {
					gap = time.Duration(rng.IntN(400)) * ms
				}
				at += gap
				clock.Advance(gap)
				d := allowN(t, lim, k, 1)
				if d.Allowed {
					admittedAt = append(admittedAt, at)
				}
			}
			most := maxInWindow(admittedAt, p.Window)
			if float64(most) > bound {
				t.Errorf("seed %d: %d admitted in one window, want at most %v", seed, most, bound)
			}
			if most < int(p.Limit) {
				t.Errorf("seed %d: the schedule should reach the limit: at most %d admitted in one window, want %d", seed, most, p.Limit)
			}
		}
	})
}

// maxInWindow returns the largest number of instants (sorted) inside any
// half-open interval of length w.
func maxInWindow(at []time.Duration, w time.Duration) int {
	most, lo := 0, 0
	for hi := range at {
		for at[hi]-at[lo] >= w {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}

// concurrency releases many goroutines together on a frozen clock: exactly
// the capacity is admitted, on one key and spread over many keys.
func (s Suite) concurrency(t *testing.T) {
	for _, base := range []core.Policy{
		core.FixedWindow(100, time.Minute),
		core.SlidingWindow(100, time.Minute),
		core.TokenBucket(100, time.Minute),
		core.LeakyBucket(100, time.Minute),
	} {
		t.Run(name(base)+"/one key", func(t *testing.T) {
			clock := NewClock(Epoch)
			lim := s.New(t, base, clock.Now)
			k := key(t, "k")
			admitted := release(t, s.Goroutines, func(int) string { return k }, lim)
			if admitted != 100 {
				t.Errorf("admitted = %+v, want 100", admitted)
			}
		})
		t.Run(name(base)+"/many keys", func(t *testing.T) {
			p := base
			p.Limit, p.Burst = 5, min(p.Burst, 5)
			clock := NewClock(Epoch)
			lim := s.New(t, p, clock.Now)
			const keys = 20
			names := make([]string, keys)
			for i := range names {
				names[i] = key(t, fmt.Sprint(i))
			}
			admitted := release(t, s.Goroutines, func(i int) string { return names[i%keys] }, lim)
			if admitted != int64(5*keys) {
				t.Errorf("admitted = %+v, want %+v", admitted, int64(5*keys))
			}
		})
	}
}

// release starts n goroutines, lets them call AllowN together and returns
// how many were admitted.
func release(t *testing.T, n int, keyOf func(int) string, lim core.Limiter) int64 {
	var (
		admitted atomic.Int64
		failures atomic.Int64
		start    = make(chan struct{})
		wg       sync.WaitGroup
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			d, err := lim.AllowN(context.Background(), keyOf(i), 1)
			if err != nil {
				failures.Add(1)
				return
			}
			if d.Allowed {
				admitted.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if got := failures.Load(); got != 0 {
		t.Fatalf("calls failed under concurrency: failures.Load() = %+v, want 0", got)
	}
	return admitted.Load()
}

// reference runs random schedules through the limiter under test and the
// in-memory limiter side by side: every Decision and error must be equal.
func (s Suite) reference(t *testing.T) {
	for _, p := range Policies() {
		t.Run(name(p), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(p.Algorithm)))
			clock := NewClock(Epoch)
			lim := s.New(t, p, clock.Now)
			ref, err := core.New(p, core.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ref.Close() })
			keys := []string{key(t, "a"), key(t, "b")}
			for i := range s.Steps {
				clock.Advance(time.Duration(rng.Int64N(int64(p.Window/ms)/3+1)) * ms)
				k := keys[rng.IntN(len(keys))]
				n := rng.Int64N(p.Capacity() + 2) // 0 is a Peek; Capacity()+1 is refused
				got, gotErr := call(lim, k, n)
				want, wantErr := call(ref, k, n)
				if (gotErr == nil) != (wantErr == nil) ||
					errors.Is(gotErr, core.ErrCostExceedsCapacity) != errors.Is(wantErr, core.ErrCostExceedsCapacity) {
					t.Fatalf("step %d: error %v, want %v", i, gotErr, wantErr)
				}
				if got != want {
					t.Fatalf("step %d: cost %d at +%v: got %+v, want %+v", i, n, clock.Now().Sub(Epoch), got, want)
				}
			}
		})
	}
}

// Failing is a core.Limiter whose every call fails with Err, like a store
// that cannot be reached: for testing what callers do on failure. Its
// Policy is P.
type Failing struct {
	Err error
	P   core.Policy
}

var _ core.Limiter = Failing{}

// AllowN returns Err.
func (f Failing) AllowN(context.Context, string, int64) (core.Decision, error) {
	return core.Decision{}, f.Err
}

// Peek returns Err.
func (f Failing) Peek(context.Context, string) (core.Decision, error) {
	return core.Decision{}, f.Err
}

// Reset returns Err.
func (f Failing) Reset(context.Context, string) error { return f.Err }

// Policy returns P.
func (f Failing) Policy() core.Policy { return f.P }
