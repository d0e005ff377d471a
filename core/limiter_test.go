package core_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
)

// TestMain fails the package when goroutines outlive its tests, such as the
// janitor of a limiter that Close did not stop.
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			fmt.Fprintf(os.Stderr, "%d goroutines left after the tests, %d before:\n%s\n", n, before, buf)
			code = 1
		}
	}
	os.Exit(code)
}

func frozen(t *testing.T, p core.Policy, opts ...core.Option) (*core.MemoryLimiter, *coretest.Clock) {
	t.Helper()
	clock := coretest.NewClock(coretest.Epoch)
	lim, err := core.New(p, append([]core.Option{core.WithClock(clock.Now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lim.Close() })
	return lim, clock
}

// TestExactAcrossManyKeys: 1000 goroutines hammer 10,000 keys of limit 3
// with 5 requests each on a frozen clock; exactly 3 per key pass.
func TestExactAcrossManyKeys(t *testing.T) {
	for _, p := range []core.Policy{
		core.FixedWindow(3, time.Minute), core.SlidingWindow(3, time.Minute),
		core.TokenBucket(3, time.Minute), core.LeakyBucket(3, time.Minute),
	} {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			lim, _ := frozen(t, p)
			const keys, goroutines, perGoroutine = 10_000, 1000, 50
			names := make([]string, keys)
			for i := range names {
				names[i] = "user-" + strconv.Itoa(i)
			}
			perKey := make([]atomic.Int32, keys)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for i := range perGoroutine {
						k := (g*perGoroutine + i) % keys
						d, err := lim.Allow(context.Background(), names[k])
						if err == nil && d.Allowed {
							perKey[k].Add(1)
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			total := 0
			for k := range perKey {
				if got := perKey[k].Load(); got != 3 {
					t.Fatalf("key %d: %d admitted, want 3", k, got)
				}
				total += int(perKey[k].Load())
			}
			if total != 30_000 {
				t.Errorf("total = %+v, want 30_000", total)
			}
		})
	}
}

// TestSlidingWindowBound checks, over random schedules, both promises of the
// sliding window: at most Limit in the trailing Buckets buckets, and at most
// Limit*(1+1/Buckets) in any interval of one Window.
func TestSlidingWindowBound(t *testing.T) {
	seed := *slidingSeed
	cases := 100
	if seed == 0 {
		seed = rand.Uint64()
	} else {
		cases = 1
	}
	for i := range uint64(cases) {
		if err := slidingWindowBoundCase(seed + i); err != nil {
			t.Fatalf("-sliding.seed=%d: %v", seed+i, err)
		}
	}
}

var slidingSeed = flag.Uint64("sliding.seed", 0, "TestSlidingWindowBound: run only the case of this seed")

// slidingWindowBoundCase runs one random schedule of TestSlidingWindowBound.
func slidingWindowBoundCase(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0))
	limit := 1 + rng.Int64N(50)
	buckets := 1 + rng.Int64N(20)
	window := time.Duration(buckets) * 10 * time.Millisecond
	p := core.SlidingWindow(limit, window).WithBuckets(buckets)
	clock := coretest.NewClock(coretest.Epoch)
	lim, err := core.New(p, core.WithClock(clock.Now))
	if err != nil {
		return err
	}
	defer lim.Close()

	var admitted []time.Duration // each admitted unit, by instant
	var at time.Duration
	steps := 1 + rng.IntN(300)
	for range steps {
		gap := time.Duration(rng.Int64N(int64(window/time.Millisecond)+1)) * time.Millisecond
		if rng.IntN(2) == 0 {
			gap = 0 // a burst
		}
		at += gap
		clock.Advance(gap)
		n := 1 + rng.Int64N(limit)
		d, err := lim.AllowN(context.Background(), "k", n)
		if err != nil {
			return err
		}
		if d.Allowed {
			for range n {
				admitted = append(admitted, at)
			}
		}
	}
	bound := limit + (limit+buckets-1)/buckets
	if got := p.MaxInWindow(); got != bound {
		return fmt.Errorf("%v: MaxInWindow() = %d, want %d", p, got, bound)
	}
	most, lo := 0, 0
	for hi := range admitted {
		for admitted[hi]-admitted[lo] > window { // closed intervals [a, a+window]
			lo++
		}
		most = max(most, hi-lo+1)
	}
	if int64(most) > bound {
		return fmt.Errorf("%v: %d admitted within one window, bound %d", p, most, bound)
	}
	return nil
}

// TestFixedWindowBoundaryBurst states the fixed window's trade-off plainly:
// a full window's worth at the end of one window and again at the start of
// the next, 2*Limit within 2 ms.
func TestFixedWindowBoundaryBurst(t *testing.T) {
	lim, clock := frozen(t, core.FixedWindow(100, time.Minute))
	clock.Advance(time.Minute - time.Millisecond)
	admitted := 0
	for range 2 {
		for range 100 {
			d, err := lim.Allow(context.Background(), "k")
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				admitted++
			}
		}
		clock.Advance(2 * time.Millisecond)
	}
	if admitted != 200 {
		t.Errorf("admitted = %+v, want 200", admitted)
	}
}

func TestWait(t *testing.T) {
	t.Run("waits exactly until the token bucket refills", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lim, err := core.New(core.TokenBucket(10, time.Second).WithBurst(1))
			if err != nil {
				t.Fatal(err)
			}
			defer lim.Close()
			ctx := context.Background()
			start := time.Now()
			if err := lim.Wait(ctx, "k", 1); err != nil {
				t.Fatalf("lim.Wait(ctx, \"k\", 1): %v", err)
			}
			if got := time.Since(start); got != 0 {
				t.Errorf("time.Since(start) = %+v, want 0", got)
			}
			if err := lim.Wait(ctx, "k", 1); err != nil {
				t.Fatalf("lim.Wait(ctx, \"k\", 1): %v", err)
			}
			if got := time.Since(start); got != 100*time.Millisecond {
				t.Errorf("time.Since(start) = %+v, want %+v", got, 100*time.Millisecond)
			}
			if err := lim.Wait(ctx, "k", 1); err != nil {
				t.Fatalf("lim.Wait(ctx, \"k\", 1): %v", err)
			}
			if got := time.Since(start); got != 200*time.Millisecond {
				t.Errorf("time.Since(start) = %+v, want %+v", got, 200*time.Millisecond)
			}
		})
	})
	t.Run("leaky bucket returns after the request's delay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lim, err := core.New(core.LeakyBucket(4, time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer lim.Close()
			start := time.Now()
			for i := range 4 {
				if err := lim.Wait(context.Background(), "k", 1); err != nil {
					t.Fatalf("lim.Wait(context.Background(), \"k\", 1): %v", err)
				}
				if got := time.Since(start); got != time.Duration(i)*250*time.Millisecond {
					t.Errorf("time.Since(start) = %+v, want %+v", got, time.Duration(i)*250*time.Millisecond)
				}
			}
		})
	})
	t.Run("refuses at once when the deadline is too close, consuming nothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lim, err := core.New(core.TokenBucket(1, time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			defer lim.Close()
			if err := lim.Wait(context.Background(), "k", 1); err != nil {
				t.Fatalf("lim.Wait(context.Background(), \"k\", 1): %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			start := time.Now()
			err = lim.Wait(ctx, "k", 1)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v, want %v", err, context.DeadlineExceeded)
			}
			if got, want := fmt.Sprint(err), "core: Wait(n=1) needs 1m0s, beyond the context deadline: context deadline exceeded"; got != want {
				t.Errorf("got %s, want %s", got, want)
			}
			if got := time.Since(start); got != 0 {
				t.Errorf("time.Since(start) = %+v, want 0", got)
			}
		})
	})
	t.Run("returns the context's error when cancelled while waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lim, err := core.New(core.TokenBucket(1, time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			defer lim.Close()
			if err := lim.Wait(context.Background(), "k", 1); err != nil {
				t.Fatalf("lim.Wait(context.Background(), \"k\", 1): %v", err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				time.Sleep(10 * time.Second)
				cancel()
			}()
			if err := lim.Wait(ctx, "k", 1); !errors.Is(err, context.Canceled) {
				t.Errorf("lim.Wait(ctx, \"k\", 1): got %v, want %v", err, context.Canceled)
			}
		})
	})
	t.Run("a cost above the burst fails without waiting", func(t *testing.T) {
		lim, _ := frozen(t, core.TokenBucket(5, time.Second))
		err := lim.Wait(context.Background(), "k", 6)
		if !errors.Is(err, core.ErrCostExceedsCapacity) {
			t.Errorf("got %v, want %v", err, core.ErrCostExceedsCapacity)
		}
		if got, want := fmt.Sprint(err), "core: cost exceeds what the policy can ever admit: n=6, TokenBucket burst is 5"; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
}

func TestErrorsNameTheValues(t *testing.T) {
	lim, _ := frozen(t, core.FixedWindow(5, time.Minute))
	_, err := lim.AllowN(context.Background(), "k", -2)
	if got, want := fmt.Sprint(err), "core: cost must be > 0, got -2"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	d, err := lim.AllowN(context.Background(), "k", 6)
	if got, want := fmt.Sprint(err), "core: cost exceeds what the policy can ever admit: n=6, FixedWindow limit is 5 per 1m0s"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if !errors.Is(err, core.ErrCostExceedsCapacity) {
		t.Errorf("got %v, want %v", err, core.ErrCostExceedsCapacity)
	}
	if want := (core.Decision{Limit: 5, Remaining: 5, Policy: core.FixedWindow(5, time.Minute), At: coretest.Epoch}); d != want {
		t.Errorf("d = %+v, want %+v", d, want)
	}
}

func TestPeekDoesNotStoreUnknownKeys(t *testing.T) {
	lim, _ := frozen(t, core.TokenBucket(5, time.Second))
	for i := range 100 {
		_, err := lim.Peek(context.Background(), "probe-"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := lim.Len(); got != 0 {
		t.Errorf("lim.Len() = %+v, want 0", got)
	}
}

func TestHugeLimitsAndWindows(t *testing.T) {
	ctx := context.Background()
	t.Run("a billion per second", func(t *testing.T) {
		lim, clock := frozen(t, core.TokenBucket(1_000_000_000, time.Second))
		d, err := lim.AllowN(ctx, "k", 1_000_000_000)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			t.Fatalf("denied, want allowed: %+v", d)
		}
		clock.Advance(time.Microsecond)
		d, err = lim.AllowN(ctx, "k", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			t.Errorf("1µs refills 1000 at 1/ns: denied, want allowed: %+v", d)
		}
		if d.Remaining != 0 {
			t.Errorf("d.Remaining = %+v, want 0", d.Remaining)
		}
	})
	t.Run("4 billion per 26 days", func(t *testing.T) {
		lim, clock := frozen(t, core.FixedWindow(1<<32-1, core.MaxSpan/2))
		d, err := lim.AllowN(ctx, "k", 1<<32-1)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			t.Errorf("denied, want allowed: %+v", d)
		}
		if d.Remaining != 0 {
			t.Errorf("d.Remaining = %+v, want 0", d.Remaining)
		}
		clock.Advance(time.Hour)
		d, err = lim.Allow(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			t.Errorf("allowed, want denied: %+v", d)
		}
		if d.RetryAfter <= 0 {
			t.Errorf("d.RetryAfter = %+v, want > 0", d.RetryAfter)
		}
	})
	t.Run("one per 52 days", func(t *testing.T) {
		lim, clock := frozen(t, core.TokenBucket(1, core.MaxSpan))
		d, err := lim.Allow(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			t.Fatalf("denied, want allowed: %+v", d)
		}
		d, err = lim.Allow(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			t.Errorf("allowed, want denied: %+v", d)
		}
		if d.RetryAfter != core.MaxSpan {
			t.Errorf("d.RetryAfter = %+v, want %+v", d.RetryAfter, core.MaxSpan)
		}
		clock.Advance(d.RetryAfter)
		d, err = lim.Allow(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			t.Errorf("denied, want allowed: %+v", d)
		}
	})
	t.Run("sliding window of 3600 buckets, 100 years idle", func(t *testing.T) {
		lim, clock := frozen(t, core.SlidingWindow(1<<32-1, time.Hour).WithBuckets(3600))
		d, err := lim.AllowN(ctx, "k", 1<<32-1)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			t.Fatalf("denied, want allowed: %+v", d)
		}
		clock.Advance(100 * 365 * 24 * time.Hour)
		d, err = lim.AllowN(ctx, "k", 1<<32-1)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			t.Errorf("denied, want allowed: %+v", d)
		}
	})
}

// TestSlidingWindowAdmitsAClientAtExactlyLimitPerWindow is defect 1 of the
// review: when Buckets did not divide Limit, the second bound (then
// Limit + Limit/Buckets, rounded down) denied a client sending steadily at
// exactly Limit per Window, e.g. 10 of 60 requests for 5 per minute.
func TestSlidingWindowAdmitsAClientAtExactlyLimitPerWindow(t *testing.T) {
	for _, tc := range []struct {
		p     core.Policy
		every time.Duration
	}{
		{core.SlidingWindow(5, time.Minute), 12 * time.Second},
		{core.SlidingWindow(5, time.Second), 200 * time.Millisecond},
		{core.SlidingWindow(15, 1500*time.Millisecond), 100 * time.Millisecond},
	} {
		for phase := time.Duration(0); phase < tc.p.Interval(); phase += tc.p.Interval() / 7 {
			clock := coretest.NewClock(coretest.Epoch.Add(phase))
			lim, err := core.New(tc.p, core.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 60 {
				d, err := lim.Allow(context.Background(), "k")
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed {
					t.Fatalf("%v, phase %v: request %d denied: denied, want allowed: %+v", tc.p, phase, i, d)
				}
				clock.Advance(tc.every)
			}
			if err := lim.Close(); err != nil {
				t.Fatalf("lim.Close(): %v", err)
			}
		}
	}
}
