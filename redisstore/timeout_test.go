package redisstore

import (
	"context"
	"fmt"
	"math"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/transport"
)

// ops are the limiter's calls that go to Redis, each returning its error.
func ops(l *Limiter) map[string]func(ctx context.Context, key string) error {
	other := core.TokenBucket(7, time.Minute)
	return map[string]func(ctx context.Context, key string) error{
		"AllowN": func(ctx context.Context, key string) error { _, err := l.AllowN(ctx, key, 1); return err },
		"Peek":   func(ctx context.Context, key string) error { _, err := l.Peek(ctx, key); return err },
		"Reset":  func(ctx context.Context, key string) error { return l.Reset(ctx, key) },
		"AllowPolicy": func(ctx context.Context, key string) error {
			_, err := l.AllowPolicy(ctx, other, key, 1)
			return err
		},
		"Get": func(ctx context.Context, key string) error { _, err := l.Get(ctx, other, key); return err },
		"Set": func(ctx context.Context, key string) error { return l.Set(ctx, other, key, 1) },
		"Settle": func(ctx context.Context, key string) error {
			admitted := core.Decision{Allowed: true, Policy: other, At: time.Now()}
			return l.Settle(ctx, key, admitted, 1, 0)
		},
	}
}

// silentListener accepts connections on a loopback port and never answers.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// TestTimeoutIsTheClock: against a Redis that accepts connections and
// never answers, while goroutines of this process keep every CPU busy,
// every call returns within WithTimeout plus the slack of the package docs
// (checked with room to spare: 300 ms for a 50 ms timeout), alone or
// queued behind others, with an error that says Redis did not answer.
// Before, the lag accounting counted the busy CPUs as time this process was
// behind and gave it back to the calls: up to 5 s each.
func TestTimeoutIsTheClock(t *testing.T) {
	redistest.RequireTimingTests(t) // a wall-clock budget: alone, without -race (.ci/run)
	const timeout, budget = 50 * time.Millisecond, 300 * time.Millisecond
	addr := silentListener(t)
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			var stop atomic.Bool
			var busy sync.WaitGroup
			for range 2 * procs {
				busy.Go(func() {
					for !stop.Load() {
					}
				})
			}
			defer busy.Wait()
			defer stop.Store(true)

			rdb := newClient(t, addr)
			lim := newLimiter(t, rdb, core.TokenBucket(10, time.Second), WithTimeout(timeout), errorsOnly)
			var longest atomic.Int64
			defer func() { t.Logf("longest call: %v", time.Duration(longest.Load())) }()
			check := func(t *testing.T, op string, call func(context.Context, string) error) {
				start := time.Now()
				err := call(context.Background(), "k")
				elapsed := time.Since(start)
				for l := longest.Load(); int64(elapsed) > l && !longest.CompareAndSwap(l, int64(elapsed)); l = longest.Load() {
				}
				assert.ErrorIs(t, err, ErrUnavailable, op)
				assert.ErrorIs(t, err, context.DeadlineExceeded, op)
				assert.Less(t, elapsed, budget, "%s returned after %v", op, elapsed)
			}
			for op, call := range ops(lim) {
				for range 3 {
					check(t, op, call)
				}
			}
			t.Run("concurrent calls, most of them queued", func(t *testing.T) {
				var wg sync.WaitGroup
				for i := range 16 {
					wg.Go(func() { check(t, "AllowN", ops(lim)["AllowN"]) })
					if i%4 == 0 {
						time.Sleep(timeout / 4) // some queue behind a flight that is halfway
					}
				}
				wg.Wait()
			})
		})
	}
}

// TestRefusedConnection: with nothing listening on Redis's port, a call
// fails at once (not after the timeout, nor after go-redis's retry and
// dial back-off: 400 ms and more by default) with an error that names the
// cause. Whatever the client's settings: the limiter's own client retries
// nothing.
func TestRefusedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	forClients(t, func(t *testing.T, newClient func(string) *redis.Client) {
		lim := newLimiter(t, newClient(addr), core.TokenBucket(10, time.Second), WithTimeout(10*time.Second), errorsOnly)
		for op, call := range ops(lim) {
			for range 5 { // beyond the first, go-redis may answer from its last dial error
				checkRefused(t, op, call)
			}
		}
	})
}

// TestStoppedRedis: a redis-server that stops under a running limiter
// (its connections reset, then refused) fails calls at once, with the
// cause, and decisions resume once it is back.
func TestStoppedRedis(t *testing.T) {
	srv := redistest.Start(t)
	lim := newLimiter(t, newClient(t, srv.Addr), core.TokenBucket(10, time.Second), WithTimeout(10*time.Second), errorsOnly)
	ctx := context.Background()
	_, err := lim.Allow(ctx, "k")
	require.NoError(t, err)

	srv.Stop()
	for op, call := range ops(lim) {
		for range 5 {
			checkRefused(t, op, call)
		}
	}
	srv.Restart()
	awaitDecision(t, lim)
}

// checkRefused makes one call and checks that it failed at once with a
// refused connection.
func checkRefused(t *testing.T, op string, call func(context.Context, string) error) {
	t.Helper()
	start := time.Now()
	err := call(context.Background(), "k")
	elapsed := time.Since(start)
	assert.ErrorIs(t, err, ErrUnavailable, op)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, op)
	if assert.Error(t, err, op) {
		assert.Contains(t, err.Error(), "connection refused", op)
		assert.Contains(t, err.Error(), "redisstore: "+op, op)
	}
	assert.Less(t, elapsed, 250*time.Millisecond, "%s returned after %v", op, elapsed)
}

// errorsOnly makes every call that Redis fails return its error: no local
// fallback, and a breaker that never opens, so that each call meets Redis.
var errorsOnly Option = func(c *config) error {
	if err := WithoutFallback()(c); err != nil {
		return err
	}
	return WithBreakerFailures(math.MaxInt32)(c)
}

// TestQueuedCallKeepsItsContextDeadline: a call whose context ends before
// its WithTimeout returns by its context's deadline, whatever round trip
// carries it. The issue-24 scenario: a Redis that accepts and never
// answers, WithTimeout(2s), two round trips hung in flight; a call queued
// behind them with a 1.5 s context deadline sent its own round trip half
// its timeout in, carrying the calls queued after it, and returned after
// 2 s, its round trip bounded by the timeout alone. The same for a call
// handed the flight when a hung round trip times out. The others return
// by their own timeout.
func TestQueuedCallKeepsItsContextDeadline(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := newClient(t, srv.Addr)
	testQueuedCallKeepsItsContextDeadline(t, rdb, srv.Pause)
}

func TestQueuedCallKeepsItsContextDeadlineCluster(t *testing.T) {
	t.Parallel()
	nodes := redistest.ClusterNodes(t)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	testQueuedCallKeepsItsContextDeadline(t, rdb, func() {
		for _, n := range nodes {
			n.Pause()
		}
	})
}

func testQueuedCallKeepsItsContextDeadline(t *testing.T, rdb redis.UniversalClient, hang func()) {
	const timeout, slack = 2 * time.Second, 250 * time.Millisecond
	var sent atomic.Int64
	addHook(rdb, hookFunc(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if isScriptCall(cmd) {
			sent.Add(1)
		}
		return next(ctx, cmd)
	}))
	lim := newLimiter(t, rdb, core.TokenBucket(100, time.Hour), WithTimeout(timeout), errorsOnly)
	_, err := lim.Allow(context.Background(), "k") // a Cluster client learns the slots
	require.NoError(t, err)
	hang()

	// call makes a call for "k" with ctx's deadline d after now (none: 0)
	// and checks when it returns.
	var wg sync.WaitGroup
	call := func(t *testing.T, name string, d time.Duration) {
		wg.Go(func() {
			ctx := context.Background()
			if d > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, d)
				defer cancel()
			}
			start := time.Now()
			_, err := lim.Allow(ctx, "k")
			took := time.Since(start)
			assert.ErrorIs(t, err, context.DeadlineExceeded, name)
			bound := timeout
			if d > 0 {
				bound = d
			}
			assert.Less(t, took, bound+slack, "%s returned after %v", name, took)
		})
	}
	flights := func(t *testing.T, n int64) {
		before := sent.Load()
		for range n {
			call(t, "a round trip in flight", 0)
		}
		require.Eventually(t, func() bool { return sent.Load() == before+n }, 5*time.Second, time.Millisecond)
	}
	begin := sent.Load()
	flights(t, int64(defaultMaxFlights))
	require.Eventually(t, func() bool { return transport.Waiting(lim.tr) == 0 }, time.Second, time.Millisecond)

	t.Run("sending its own round trip half its timeout in", func(t *testing.T) {
		call(t, "the call with a context deadline", 1500*time.Millisecond)
		require.Eventually(t, func() bool { return transport.Waiting(lim.tr) == 1 }, time.Second, time.Millisecond)
		call(t, "a call queued after it", 0)
		call(t, "another call queued after it", 0)
		require.Eventually(t, func() bool { return transport.Waiting(lim.tr) == 3 }, time.Second, time.Millisecond)
		wg.Wait()
	})
	t.Run("handed the flight by a round trip that timed out", func(t *testing.T) {
		flights(t, int64(defaultMaxFlights))
		time.Sleep(timeout * 6 / 10) // queue in the flights' second half
		call(t, "the call with a context deadline", timeout*6/10)
		require.Eventually(t, func() bool { return transport.Waiting(lim.tr) == 1 }, time.Second, time.Millisecond)
		call(t, "a call queued after it", 0)
		wg.Wait()
	})
	assert.Greater(t, sent.Load(), begin+2*int64(defaultMaxFlights), "calls queued and sent")
}

// TestPingKeepsItsBound: the startup check returns by its context's
// deadline against a Redis that accepts and never answers (SIGSTOP), and
// at once against a refused port, with an error that says Redis failed;
// a live Redis answers.
func TestPingKeepsItsBound(t *testing.T) {
	t.Parallel()
	const bound, slack = 300 * time.Millisecond, 250 * time.Millisecond
	ping := func(t *testing.T, addr string) (time.Duration, error) {
		lim := newLimiter(t, newClient(t, addr), core.TokenBucket(10, time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		start := time.Now()
		err := lim.Ping(ctx)
		return time.Since(start), err
	}
	t.Run("a live Redis answers", func(t *testing.T) {
		_, err := ping(t, redistest.Addr(t))
		require.NoError(t, err)
	})
	t.Run("a hung Redis fails by the context's deadline", func(t *testing.T) {
		srv := redistest.Start(t)
		srv.Pause()
		took, err := ping(t, srv.Addr)
		require.ErrorIs(t, err, ErrUnavailable)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.GreaterOrEqual(t, took, bound-10*time.Millisecond, "it waited for the answer")
		assert.Less(t, took, bound+slack)
	})
	t.Run("a refused port fails at once", func(t *testing.T) {
		srv := redistest.Start(t)
		srv.Stop()
		took, err := ping(t, srv.Addr)
		require.ErrorIs(t, err, ErrUnavailable)
		assert.ErrorIs(t, err, syscall.ECONNREFUSED)
		assert.Less(t, took, slack)
	})
}
