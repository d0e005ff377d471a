package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/redisstore"
)

// While Redis is unavailable, each app server limits on its own with the
// same policy (the default). Here nothing listens at the client's address,
// so Redis fails from the start: the first calls fail and are decided by
// the local fallback, the third failure opens the breaker, and later calls
// do not try Redis at all.
func Example_outage() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()

	lim, err := redisstore.New(rdb, core.TokenBucket(100, time.Minute),
		redisstore.WithBreakerFailures(3),
		redisstore.WithBreakerHook(func(c redisstore.BreakerChange) {
			// Log c.Err too: it says what went wrong with Redis.
			fmt.Printf("breaker %v -> %v\n", c.From, c.To)
		}),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()

	for range 4 {
		d, err := lim.Allow(context.Background(), "tenant-42")
		fmt.Println(d.Allowed, d.Source, d.Limit, d.Remaining, err)
	}
	// Output:
	// true fallback 100 99 <nil>
	// true fallback 100 98 <nil>
	// breaker closed -> open
	// true fallback 100 97 <nil>
	// true fallback 100 96 <nil>
}

// WithoutFallback leaves Redis's failures to the adapter's failure policy:
// the error wraps ErrUnavailable and the cause, and once the breaker is
// open, ErrBreakerOpen too.
func ExampleWithoutFallback() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()

	lim, err := redisstore.New(rdb, core.TokenBucket(100, time.Minute),
		redisstore.WithoutFallback(), redisstore.WithBreakerFailures(1))
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()

	for range 2 {
		_, err := lim.Allow(context.Background(), "tenant-42")
		fmt.Println(errors.Is(err, redisstore.ErrUnavailable), errors.Is(err, redisstore.ErrBreakerOpen))
	}
	// Output:
	// true false
	// true true
}
