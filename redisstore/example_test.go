package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/redisstore"
)

// Every app server builds the same limiter on the same Redis: they share
// one limit per client. (No Output: the example needs a Redis server;
// examples/redis runs the same against a real one.)
func Example() {
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
	defer rdb.Close()

	lim, err := redisstore.New(rdb, core.SlidingWindow(100, time.Minute), redisstore.WithPrefix("myapp"))
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()

	perIP := nethttp.Middleware(lim) // fails open if Redis is down
	http.Handle("/", perIP(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
}

// Calling the limiter directly, as a job worker would.
func ExampleLimiter_AllowN() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	lim, err := redisstore.New(rdb, core.TokenBucket(10, time.Second).WithBurst(20),
		redisstore.WithPrefix("jobs"), redisstore.WithTimeout(20*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()

	d, err := lim.AllowN(context.Background(), "tenant-42", 5)
	switch {
	case errors.Is(err, redisstore.ErrUnavailable):
		log.Printf("rate limit unavailable: %v", err) // apply your failure policy
	case err != nil:
		log.Printf("not decided: %v", err) // the context ended, or a cost above the limit
	case !d.Allowed:
		log.Printf("over the limit, retry in %v", d.RetryAfter)
	default:
		log.Printf("admitted, %d left", d.Remaining)
	}
}
