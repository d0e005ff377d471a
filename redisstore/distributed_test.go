package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
)

// TestDistributedExactness plays 8 app servers (8 limiters, each with its
// own client and connection pool) with 100 goroutines each, all on one key
// at one frozen instant: exactly the capacity is admitted.
func TestDistributedExactness(t *testing.T) {
	addr := redistest.Addr(t)
	const servers, goroutines = 8, 100
	for _, p := range []core.Policy{
		core.FixedWindow(50, time.Minute),
		core.SlidingWindow(50, time.Minute),
		core.TokenBucket(50, time.Minute),
		core.LeakyBucket(50, time.Minute),
	} {
		t.Run(p.Algorithm.String()+" admits exactly its capacity", func(t *testing.T) {
			clock := coretest.NewClock(coretest.Epoch)
			prefix := WithPrefix(testPrefix())
			var lims []*Limiter
			for range servers {
				lims = append(lims, newLimiter(t, newClient(t, addr), p, prefix, withClock(clock.Now), WithTimeout(30*time.Second)))
			}
			var admitted, failed atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for _, lim := range lims {
				for range goroutines {
					wg.Go(func() {
						<-start
						d, err := lim.Allow(context.Background(), "shared")
						if err != nil {
							failed.Add(1)
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
					})
				}
			}
			close(start)
			wg.Wait()
			require.Zero(t, failed.Load())
			assert.Equal(t, p.Capacity(), admitted.Load())
		})
	}
}

// TestRedisDown stops the server under a running limiter: calls fail with
// an error within the timeout, never hang; once the server is back on the
// same port, decisions resume with the same limiter. The client has
// go-redis's defaults (retries, 3s socket timeouts, context deadlines not
// applied to the socket): the limiter's timeout holds regardless.
func TestRedisDown(t *testing.T) {
	forClients(t, testRedisDown)
}

// forClients runs test with a client that has go-redis's defaults (calls
// go through the batcher's goroutine, the caller waiting with its own
// timer) and with one that applies context deadlines to its sockets (a
// lone call goes out on the caller's goroutine).
func forClients(t *testing.T, test func(t *testing.T, newClient func(addr string) *redis.Client)) {
	for _, tc := range []struct {
		name string
		opts func(addr string) *redis.Options
	}{
		{"with go-redis defaults", func(addr string) *redis.Options { return &redis.Options{Addr: addr} }},
		{"with ContextTimeoutEnabled", func(addr string) *redis.Options {
			return &redis.Options{Addr: addr, ContextTimeoutEnabled: true}
		}},
		// -2: go-redis sets no socket deadline at all, so it cannot
		// apply the context's either.
		{"with ContextTimeoutEnabled and socket deadlines disabled", func(addr string) *redis.Options {
			return &redis.Options{Addr: addr, ContextTimeoutEnabled: true, ReadTimeout: -2, WriteTimeout: -2}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			test(t, func(addr string) *redis.Client {
				c := redis.NewClient(tc.opts(addr))
				t.Cleanup(func() { _ = c.Close() })
				return c
			})
		})
	}
}

func testRedisDown(t *testing.T, newClient func(string) *redis.Client) {
	srv := redistest.Start(t)
	rdb := newClient(srv.Addr)
	const timeout = 100 * time.Millisecond
	lim := newLimiter(t, rdb, core.TokenBucket(1000, time.Second), WithTimeout(timeout), WithoutFallback())
	ctx := context.Background()

	_, err := lim.Allow(ctx, "k")
	require.NoError(t, err)

	srv.Stop()
	for i := range 5 {
		start := time.Now()
		_, err := lim.Allow(ctx, "k")
		elapsed := time.Since(start)
		require.Error(t, err, "call %d with the server down", i)
		assert.ErrorIs(t, err, ErrUnavailable, "a store failure")
		assert.Contains(t, err.Error(), "redisstore: AllowN")
		assert.Less(t, elapsed, 5*timeout, "call %d took %v", i, elapsed)
	}

	t.Run("a cost above capacity is still a denial", func(t *testing.T) {
		d, err := lim.AllowN(ctx, "k", 1001)
		assert.ErrorIs(t, err, core.ErrCostExceedsCapacity)
		assert.False(t, d.Allowed)
		assert.Zero(t, d.RetryAfter)
		assert.Equal(t, int64(1000), d.Limit)
	})

	srv.Restart()
	awaitDecision(t, lim)
}

// TestSlowRedis puts a relay that delays every reply by three seconds
// (redistest.Relay) between the client and the server: calls return a timeout error within
// the timeout (plus scheduling), concurrent ones too, and the limiter
// recovers when the delay goes. The timeout (300ms) leaves room for the
// scheduling delays of a loaded CI machine, and the delay ten times that
// keeps a call that waited for its reply apart from one that did not.
func TestSlowRedis(t *testing.T) {
	forClients(t, testSlowRedis)
}

func testSlowRedis(t *testing.T, newClient func(string) *redis.Client) {
	relay := redistest.StartRelay(t, redistest.Addr(t))
	rdb := newClient(relay.Addr())
	const timeout = 300 * time.Millisecond
	lim := newLimiter(t, rdb, core.SlidingWindow(1000, time.Second), WithTimeout(timeout), WithoutFallback(), WithBreakerFailures(1000))
	ctx := context.Background()

	_, err := lim.Allow(ctx, "k")
	require.NoError(t, err)

	relay.SetDelay(10 * timeout)
	start := time.Now()
	d, err := lim.Allow(ctx, "k") // alone
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, ErrUnavailable, "Redis did not answer: a store failure")
	assert.Equal(t, core.Decision{Limit: 1000, Policy: lim.Policy()}, d, "what is known without Redis")
	assert.Less(t, time.Since(start), 5*timeout)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			start := time.Now()
			_, err := lim.Allow(ctx, "k")
			elapsed := time.Since(start)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Less(t, elapsed, 5*timeout)
		})
	}
	wg.Wait()

	t.Run("a context deadline shorter than the timeout wins", func(t *testing.T) {
		short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := lim.Allow(short, "k")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, ErrUnavailable, "the caller's own deadline: not a store failure")
		assert.Less(t, time.Since(start), timeout)
	})

	relay.SetDelay(0)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := lim.Allow(ctx, "k"); err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "no decision within 15s of the delay's end")
		time.Sleep(20 * time.Millisecond)
	}
}
