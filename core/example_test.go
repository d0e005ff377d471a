package core_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
)

// A limiter holds one policy for any number of keys.
func ExampleNew() {
	lim, err := core.New(core.TokenBucket(100, time.Minute), core.WithMaxKeys(1_000_000))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lim.Close()

	d, _ := lim.Allow(context.Background(), "client-1")
	fmt.Println(d.Allowed, d.Remaining)
	// Output: true 99
}

// Invalid policies are rejected when the limiter is built, naming the field.
func ExampleNew_invalidPolicy() {
	_, err := core.New(core.TokenBucket(100, time.Minute).WithBurst(-1))
	fmt.Println(err)
	// Output: core: TokenBucket burst must be > 0, got -1
}

func ExampleMemoryLimiter_Allow() {
	clock := coretest.NewClock(coretest.Epoch) // a manual clock, so the output is exact
	lim, _ := core.New(core.FixedWindow(2, time.Second), core.WithClock(clock.Now))
	defer lim.Close()
	ctx := context.Background()
	for range 3 {
		d, _ := lim.Allow(ctx, "10.0.0.1")
		fmt.Printf("allowed=%v remaining=%d retry-after=%v\n", d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// allowed=true remaining=1 retry-after=0s
	// allowed=true remaining=0 retry-after=0s
	// allowed=false remaining=0 retry-after=1s
}

// A weighted request costs more than one unit; a cost the policy can never
// admit is refused with ErrCostExceedsCapacity instead of a RetryAfter that
// would lie.
func ExampleMemoryLimiter_AllowN() {
	lim, _ := core.New(core.TokenBucket(10, time.Second))
	defer lim.Close()
	ctx := context.Background()
	d, err := lim.AllowN(ctx, "upload", 4)
	fmt.Println(d.Allowed, d.Remaining, err)
	_, err = lim.AllowN(ctx, "upload", 11)
	fmt.Println(errors.Is(err, core.ErrCostExceedsCapacity))
	// Output:
	// true 6 <nil>
	// true
}

// The fixed window counts per window aligned to the Unix epoch. Across a
// boundary it can admit twice its limit in a short time.
func ExampleFixedWindow() {
	clock := coretest.NewClock(coretest.Epoch.Add(999 * time.Millisecond))
	lim, _ := core.New(core.FixedWindow(3, time.Second), core.WithClock(clock.Now))
	defer lim.Close()
	admitted := 0
	for range 2 {
		for range 5 {
			if d, _ := lim.Allow(context.Background(), "k"); d.Allowed {
				admitted++
			}
		}
		clock.Advance(time.Millisecond) // into the next window
	}
	fmt.Println("admitted within 2ms:", admitted)
	// Output: admitted within 2ms: 6
}

// The sliding window counts the trailing window in buckets; right after a
// full window's burst ages out, only Limit/Buckets more pass until the
// bucket before it has aged out too.
func ExampleSlidingWindow() {
	clock := coretest.NewClock(coretest.Epoch)
	lim, _ := core.New(core.SlidingWindow(10, time.Second).WithBuckets(10), core.WithClock(clock.Now))
	defer lim.Close()
	ctx := context.Background()
	d, _ := lim.AllowN(ctx, "k", 10)
	fmt.Println("burst:", d.Allowed, "remaining", d.Remaining)
	clock.Advance(time.Second)
	d, _ = lim.Allow(ctx, "k")
	fmt.Println("1s later:", d.Allowed, "remaining", d.Remaining)
	clock.Advance(100 * time.Millisecond)
	d, _ = lim.Allow(ctx, "k")
	fmt.Println("1.1s later:", d.Allowed, "remaining", d.Remaining)
	// Output:
	// burst: true remaining 0
	// 1s later: true remaining 0
	// 1.1s later: true remaining 8
}

// The token bucket allows bursts up to Burst and refills continuously.
func ExampleTokenBucket() {
	clock := coretest.NewClock(coretest.Epoch)
	lim, _ := core.New(core.TokenBucket(10, time.Second).WithBurst(3), core.WithClock(clock.Now))
	defer lim.Close()
	ctx := context.Background()
	for range 4 {
		d, _ := lim.Allow(ctx, "k")
		fmt.Println(d.Allowed, d.Remaining, d.RetryAfter)
	}
	clock.Advance(100 * time.Millisecond)
	d, _ := lim.Allow(ctx, "k")
	fmt.Println("after 100ms:", d.Allowed)
	// Output:
	// true 2 0s
	// true 1 0s
	// true 0 0s
	// false 0 100ms
	// after 100ms: true
}

// The leaky bucket admits up to Burst requests at once but tells each how
// long to wait, so they leave at a steady Limit per Window.
func ExampleLeakyBucket() {
	clock := coretest.NewClock(coretest.Epoch)
	lim, _ := core.New(core.LeakyBucket(5, time.Second).WithBurst(3), core.WithClock(clock.Now))
	defer lim.Close()
	for range 4 {
		d, _ := lim.Allow(context.Background(), "k")
		fmt.Printf("allowed=%v delay=%v\n", d.Allowed, d.Delay)
	}
	// Output:
	// allowed=true delay=0s
	// allowed=true delay=200ms
	// allowed=true delay=400ms
	// allowed=false delay=0s
}

// As a meter the leaky bucket denies overflow instead of delaying.
func ExamplePolicy_AsMeter() {
	clock := coretest.NewClock(coretest.Epoch)
	lim, _ := core.New(core.LeakyBucket(5, time.Second).WithBurst(2).AsMeter(), core.WithClock(clock.Now))
	defer lim.Close()
	for range 3 {
		d, _ := lim.Allow(context.Background(), "k")
		fmt.Printf("allowed=%v delay=%v\n", d.Allowed, d.Delay)
	}
	// Output:
	// allowed=true delay=0s
	// allowed=true delay=0s
	// allowed=false delay=0s
}

// Wait blocks until the request is admitted (and, for a leaky bucket, its
// delay has passed).
func ExampleMemoryLimiter_Wait() {
	lim, _ := core.New(core.TokenBucket(100, time.Second))
	defer lim.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for range 3 {
		if err := lim.Wait(ctx, "outbound-api", 1); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("sent 3")
	// Output: sent 3
}

// MustNew serves policies written in the program: an invalid one is a
// programmer error, reported by a panic at startup.
func ExampleMustNew() {
	lim := core.MustNew(core.FixedWindow(2, time.Minute))
	defer lim.Close()
	ctx := context.Background()
	for range 3 {
		d, _ := lim.Allow(ctx, "203.0.113.7")
		fmt.Println(d.Allowed, d.Remaining)
	}
	// Output:
	// true 1
	// true 0
	// false 0
}

// Plans: one limiter, one set of keys, the policy chosen per call. A key
// moved from free to pro keeps what it used.
func ExampleMemoryLimiter_AllowPolicy() {
	clock := coretest.NewClock(coretest.Epoch)
	free := core.FixedWindow(3, time.Hour).WithName("free")
	pro := core.FixedWindow(1000, time.Hour).WithName("pro")
	lim := core.MustNew(free, core.WithClock(clock.Now))
	defer lim.Close()
	ctx := context.Background()

	for range 4 {
		d, _ := lim.AllowPolicy(ctx, free, "api-key-1", 1)
		fmt.Println(d.Policy.Name, d.Allowed, d.Remaining)
	}
	d, _ := lim.AllowPolicy(ctx, pro, "api-key-1", 1) // upgraded
	fmt.Println(d.Policy.Name, d.Allowed, d.Remaining)

	u, _ := lim.Get(ctx, pro, "api-key-1")
	fmt.Println("used", u.Used)
	_ = lim.Set(ctx, pro, "api-key-1", 0) // a support agent grants a fresh quota
	u, _ = lim.Get(ctx, pro, "api-key-1")
	fmt.Println("used", u.Used)
	// Output:
	// free true 2
	// free true 1
	// free true 0
	// free false 0
	// pro true 996
	// used 4
	// used 0
}
