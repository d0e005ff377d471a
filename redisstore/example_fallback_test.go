package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/redisstore"
)

// Four app servers share 100 requests per minute per tenant through Redis;
// while Redis is unavailable, each decides alone with a quarter of that.
// Here nothing listens at the client's address, so Redis fails from the
// start: the first calls fail and are decided by the fallback, the third
// failure opens the breaker, and later calls do not try Redis at all.
func ExampleWithFallback() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()

	lim, err := redisstore.New(rdb, core.TokenBucket(100, time.Minute),
		redisstore.WithFallback(core.TokenBucket(25, time.Minute),
			redisstore.BreakerFailures(3),
			redisstore.OnBreakerChange(func(c redisstore.BreakerChange) {
				// Log c.Err too: it says what went wrong with Redis.
				fmt.Printf("breaker %v -> %v\n", c.From, c.To)
			}),
		))
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()

	for range 4 {
		d, err := lim.Allow(context.Background(), "tenant-42")
		fmt.Println(d.Allowed, d.Source, d.Limit, d.Remaining, err)
	}
	// Output:
	// true fallback 25 24 <nil>
	// true fallback 25 23 <nil>
	// breaker closed -> open
	// true fallback 25 22 <nil>
	// true fallback 25 21 <nil>
}
