package redisstore

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/transport"
)

// refusingAddr returns the address of a stopped redis-server: its port
// refuses connections.
func refusingAddr(t *testing.T) string {
	srv := redistest.Start(t)
	srv.Stop()
	return srv.Addr
}

// TestOutageThroughMiddleware sends 200 requests for one client through
// nethttp's middleware on a real HTTP server, with every default, while
// Redis refuses connections: the local fallback limits them exactly (the
// first 100 pass, the rest are denied, with complete headers), and only the
// calls before the breaker opened, and one probe per probe interval, were
// handed to the Redis client. The elapsed time is logged, not asserted: the
// counts are what a loaded machine cannot change.
func TestOutageThroughMiddleware(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: refusingAddr(t)}) // go-redis's defaults
	t.Cleanup(func() { _ = rdb.Close() })
	calls := &redisCalls{}
	addHook(rdb, calls)
	lim, err := New(rdb, core.TokenBucket(100, 24*time.Hour), WithPrefix(testPrefix())) // every default
	require.NoError(t, err)
	t.Cleanup(func() { _ = lim.Close() })
	var fromFallback atomic.Int64
	mw := nethttp.Middleware(lim, nethttp.WithHook(func(ev nethttp.Event) {
		if ev.Decision.Source == core.SourceFallback && ev.Err == nil {
			fromFallback.Add(1)
		}
	}))
	srv := httptest.NewServer(mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	t.Cleanup(srv.Close)

	codes := map[int]int{}
	start := time.Now()
	for i := range 200 {
		resp, err := srv.Client().Get(srv.URL)
		require.NoError(t, err)
		_ = resp.Body.Close()
		codes[resp.StatusCode]++
		remaining := strconv.Itoa(max(99-i, 0))
		assert.Equal(t, []string{"100"}, resp.Header.Values(nethttp.HeaderLimit), "request %d", i)
		assert.Equal(t, []string{remaining}, resp.Header.Values(nethttp.HeaderRemaining), "request %d", i)
		assert.Len(t, resp.Header.Values(nethttp.HeaderReset), 1, "request %d", i)
	}
	elapsed := time.Since(start)
	t.Logf("200 requests with Redis refusing connections: %v; %d calls handed to the Redis client", elapsed, calls.n.Load())

	assert.Equal(t, map[int]int{http.StatusOK: 100, http.StatusTooManyRequests: 100}, codes)
	assert.Equal(t, int64(200), fromFallback.Load())
	assert.Equal(t, BreakerOpen, breakerState(lim))
	probes := int64(elapsed/defaultBreakerProbeInterval) + 1
	assert.LessOrEqual(t, calls.n.Load(), defaultBreakerFailures+probes)
}

// TestRefusedErrorNamesTheCause: WithoutFallback, the error of a call Redis
// refused, and of one the breaker then kept from Redis, wraps
// ErrUnavailable and the cause; the latter ErrBreakerOpen too.
func TestRefusedErrorNamesTheCause(t *testing.T) {
	rdb := newClient(t, refusingAddr(t))
	lim := newLimiter(t, rdb, core.TokenBucket(100, time.Hour), WithTimeout(defaultTimeout), WithoutFallback(), WithBreakerFailures(1))
	ctx := context.Background()
	_, err := lim.Allow(ctx, "k")
	require.ErrorIs(t, err, ErrUnavailable)
	assert.NotErrorIs(t, err, ErrBreakerOpen)
	var se *storeError
	require.ErrorAs(t, err, &se)
	cause := se.err // what went wrong with Redis
	_, err = lim.Allow(ctx, "k")
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.ErrorIs(t, err, ErrBreakerOpen)
	assert.ErrorIs(t, err, cause)
	assert.Equal(t, "redisstore: AllowN: circuit breaker open, Redis not called (last failure: "+cause.Error()+")", err.Error())
}

// TestHungRedisOpensTheBreaker: a listener that accepts connections and
// never answers. The calls before the breaker opens wait for the timeout;
// the ones after it are not handed to the Redis client at all.
func TestHungRedisOpensTheBreaker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	rdb := newClient(t, ln.Addr().String())
	calls := &redisCalls{}
	addHook(rdb, calls)
	clock := coretest.NewClock(coretest.Epoch)
	lim := newLimiter(t, rdb, core.TokenBucket(100, time.Hour), withClock(clock.Now), WithTimeout(50*time.Millisecond))
	ctx := context.Background()
	for i := range 100 {
		d, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, core.SourceFallback, d.Source)
		assert.Equal(t, int64(99-i), d.Remaining)
	}
	assert.Equal(t, BreakerOpen, breakerState(lim))
	// A call given up before the batcher sent it is never handed over.
	assert.LessOrEqual(t, calls.n.Load(), int64(defaultBreakerFailures), "only calls before the breaker opened")
}

// TestUnsentCallsOpenNoBreaker: a round trip whose deadline passes before
// it is written (a process too busy to send it) is decided by the fallback
// and counts as no failure: it says this process was busy, not that Redis
// failed, and Redis never sees it. With a breaker that opens at the first
// failure, twenty such calls leave it closed, and Redis decides the next
// call. Without a fallback, such a call's error says so.
//
// A client hook hands go-redis each script call as a busy process would,
// its deadline already past, rather than holding it for the timeout: the
// limiters keep testTimeout, so the one call Redis must decide has all of
// it. (Held until a real 5ms timeout, the calls left the limiter's client
// without a connection, and that call, a dial, HELLO, EVALSHA refused as
// NOSCRIPT and EVAL, missed its own 5ms on a loaded machine.)
func TestUnsentCallsOpenNoBreaker(t *testing.T) {
	srv := redistest.Start(t)
	var busy atomic.Bool
	var late atomic.Int64
	rdb := newClient(t, srv.Addr)
	addHook(rdb, hookFunc(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if busy.Load() && isScriptCall(cmd) {
			late.Add(1)
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, time.Now()) // done already
			defer cancel()
		}
		return next(ctx, cmd)
	}))
	var changes changeLog
	lim := newLimiter(t, rdb, core.TokenBucket(100, time.Hour), WithBreakerFailures(1), WithBreakerHook(changes.add))
	strict := newLimiter(t, rdb, core.TokenBucket(100, time.Hour), WithBreakerFailures(1), WithoutFallback())
	ctx := context.Background()
	busy.Store(true)
	for i := range 20 {
		d, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, core.SourceFallback, d.Source)
		assert.Equal(t, int64(99-i), d.Remaining)
	}
	assert.Equal(t, BreakerClosed, breakerState(lim))
	assert.Empty(t, changes.path())
	_, err := strict.Allow(ctx, "k")
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, "redisstore: AllowN: not sent to Redis within "+testTimeout.String()+", this process too busy to send it: context deadline exceeded", err.Error())
	assert.Equal(t, BreakerClosed, breakerState(strict))
	assert.Equal(t, int64(21), late.Load(), "every call was handed to the Redis client")
	n, err := rdb.DBSize(ctx).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "Redis saw none of them")

	busy.Store(false)
	d, err := lim.Allow(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, core.SourceStore, d.Source)
	assert.Equal(t, int64(99), d.Remaining, "Redis's count: the fallback's is its own")
	assert.Empty(t, changes.path())
}

// TestRoundTripCountsOnce: the calls that one round trip carries, and
// that fail with it, are one failure of Redis's, whatever their number;
// the next round trip that fails is another. Against a listener that
// never answers, with a breaker that opens at the second failure: three
// calls queue behind a call in flight, whose caller's context ends first
// (its deadline: no failure); the three go in one round trip, which times
// out (one failure, the breaker stays closed); one more call, one more
// round trip that times out: open.
func TestRoundTripCountsOnce(t *testing.T) {
	rdb := newClient(t, silentListener(t))
	var sent atomic.Int64
	addHook(rdb, hookFunc(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if isScriptCall(cmd) {
			sent.Add(1)
		}
		return next(ctx, cmd)
	}))
	lim := newLimiter(t, rdb, core.TokenBucket(100, time.Hour), WithTimeout(time.Second),
		WithBreakerFailures(2), withMaxFlights(1))
	first, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := lim.Allow(first, "k")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, ErrUnavailable)
	})
	queued := func(n int) bool { return transport.Waiting(lim.tr) == n }
	require.Eventually(t, func() bool { return sent.Load() == 1 }, 5*time.Second, time.Millisecond, "the first call in flight")
	srcs := make([]core.Source, 3)
	for i := range srcs {
		wg.Go(func() {
			d, err := lim.Allow(context.Background(), "k")
			assert.NoError(t, err)
			srcs[i] = d.Source
		})
	}
	require.Eventually(t, func() bool { return queued(3) }, 300*time.Millisecond, time.Millisecond, "three calls queued behind it")
	wg.Wait()
	assert.Equal(t, []core.Source{core.SourceFallback, core.SourceFallback, core.SourceFallback}, srcs)
	assert.Equal(t, BreakerClosed, breakerState(lim), "one failure: the round trip")
	d, err := lim.Allow(context.Background(), "k")
	require.NoError(t, err)
	assert.Equal(t, core.SourceFallback, d.Source)
	assert.Equal(t, BreakerOpen, breakerState(lim), "a second round trip failed")
}

// TestPeekAgreesWithAllowN: Peek tells what the next unit AllowN at the
// same instant gets, in every state of the breaker, for a key that is
// fresh, partly used, denied in the deny cache, and denied in the fallback.
// While the breaker is closed Peek asks Redis where AllowN may take the
// deny cache's denial: the same denial, from another Source.
func TestPeekAgreesWithAllowN(t *testing.T) {
	ctx := context.Background()
	p := core.TokenBucket(3, time.Hour)
	s := newBreakerSetup(t, p)
	agree := func(t *testing.T, state BreakerState, key string) {
		t.Helper()
		require.Equal(t, state, breakerState(s.lim))
		peek, err := s.lim.Peek(ctx, key)
		require.NoError(t, err)
		d, err := s.lim.Allow(ctx, key)
		require.NoError(t, err)
		what := fmt.Sprintf("%v, key %s: Peek %+v, AllowN %+v", state, key, peek, d)
		require.Equal(t, peek.Allowed, d.Allowed, what)
		if state == BreakerClosed {
			peek.Source = d.Source
		}
		if d.Allowed {
			assert.Equal(t, peek.Remaining-1, d.Remaining, what)
			peek.Remaining, peek.ResetAfter = d.Remaining, d.ResetAfter
		}
		assert.Equal(t, peek, d, what)
	}
	use := func(key string, n int) {
		for range n {
			_, err := s.lim.Allow(ctx, key)
			require.NoError(t, err)
		}
	}
	states := []BreakerState{BreakerClosed, BreakerOpen, BreakerHalfOpen}
	for _, st := range states { // while Redis decides
		use(st.String()+"-partial", 1)
		use(st.String()+"-denied", 4) // the fourth is denied: cached
	}
	check := func(t *testing.T, st BreakerState) {
		for _, k := range []string{"fresh", "partial", "denied", "local"} {
			agree(t, st, st.String()+"-"+k)
		}
	}
	t.Run("closed", func(t *testing.T) {
		use("closed-local", 3)
		check(t, BreakerClosed)
	})
	s.open(t)
	use("open-local", 3) // by the fallback
	use("half-open-local", 3)
	t.Run("open", func(t *testing.T) { check(t, BreakerOpen) })
	t.Run("half-open", func(t *testing.T) {
		// Checked from the hook, on the probe's goroutine, while the
		// probe is out.
		checked := false
		s.changes.mu.Lock()
		s.changes.then = func(c BreakerChange) {
			if c.To == BreakerHalfOpen {
				check(t, BreakerHalfOpen)
				checked = true
			}
		}
		s.changes.mu.Unlock()
		s.clock.Advance(breakerTestInterval)
		_, err := s.lim.Allow(ctx, "probe")
		require.NoError(t, err)
		assert.True(t, checked)
	})
}

// TestCostAboveCapacityWhileRedisIsDown: a request costing more than the
// policy ever admits, through nethttp's middleware on a real HTTP server,
// while Redis refuses connections. Without a fallback nobody knows the
// key's state: 429 with the limit alone, before and after the breaker
// opens. With the fallback (the default), the fallback's state of the key
// is known and written.
func TestCostAboveCapacityWhileRedisIsDown(t *testing.T) {
	cost := nethttp.WithCostFunc(func(r *http.Request) (int64, error) {
		return strconv.ParseInt(r.URL.Query().Get("cost"), 10, 64)
	})
	serve := func(t *testing.T, opts ...Option) (*Limiter, func(cost int) http.Header) {
		rdb := newClient(t, refusingAddr(t))
		lim := newLimiter(t, rdb, core.TokenBucket(100, time.Hour), append([]Option{WithTimeout(defaultTimeout), WithBreakerFailures(2)}, opts...)...)
		srv := httptest.NewServer(nethttp.Middleware(lim, cost, nethttp.WithHeaderStyle(nethttp.HeadersBoth))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
		t.Cleanup(srv.Close)
		return lim, func(n int) http.Header {
			t.Helper()
			resp, err := srv.Client().Get(srv.URL + "?cost=" + strconv.Itoa(n))
			require.NoError(t, err)
			_ = resp.Body.Close()
			require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			return resp.Header
		}
	}
	fields := func(h http.Header) map[string]string {
		out := map[string]string{}
		for _, k := range []string{nethttp.HeaderLimit, nethttp.HeaderRemaining, nethttp.HeaderReset,
			nethttp.HeaderRetryAfter, nethttp.HeaderRateLimitPolicy, nethttp.HeaderRateLimit} {
			if v := h.Values(k); len(v) > 0 {
				out[k] = v[0]
			}
		}
		return out
	}
	known := map[string]string{nethttp.HeaderLimit: "100", nethttp.HeaderRateLimitPolicy: `"tokenbucket-100-per-3600s";q=100;w=3600`}

	t.Run("without a fallback: the limit and the policy only", func(t *testing.T) {
		lim, get := serve(t, WithoutFallback())
		for i := range 3 {
			assert.Equal(t, known, fields(get(101)), "request %d", i)
		}
		assert.Equal(t, BreakerOpen, breakerState(lim))
		assert.Equal(t, known, fields(get(101)))
	})
	t.Run("with the fallback: the limit and the policy only, as for every cost above capacity", func(t *testing.T) {
		lim, get := serve(t)
		for range 2 {
			get(101)
		}
		require.Equal(t, BreakerOpen, breakerState(lim))
		assert.Equal(t, known, fields(get(101)))
	})
}

// TestStartWhileRedisIsDown: New does not contact Redis; a limiter built
// while Redis is down decides every call in the fallback, and once Redis
// is up, the first probe after the interval closes the breaker and Redis
// decides again.
func TestStartWhileRedisIsDown(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	rdb := newClient(t, srv.Addr)
	clock := coretest.NewClock(coretest.Epoch)
	lim := newLimiter(t, rdb, core.TokenBucket(100, time.Hour), withClock(clock.Now), WithTimeout(defaultTimeout))
	ctx := context.Background()
	for i := range defaultBreakerFailures + 3 {
		d, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, core.SourceFallback, d.Source, "call %d", i)
	}
	require.Equal(t, BreakerOpen, breakerState(lim))

	srv.Restart()
	// go-redis may still answer a probe right after the restart with the
	// dial error it keeps for a moment; the next probe gets through.
	deadline := time.Now().Add(15 * time.Second)
	for breakerState(lim) != BreakerClosed {
		require.True(t, time.Now().Before(deadline), "no probe got through within 15s of the restart")
		clock.Advance(defaultBreakerProbeInterval)
		_, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
	}
	d, err := lim.Allow(ctx, "other")
	require.NoError(t, err)
	assert.Equal(t, core.SourceStore, d.Source)
	assert.Equal(t, int64(99), d.Remaining)
}

// TestFailClosedSaysWhenTheBreakerProbes: with WithoutFallback and
// nethttp.WithFailClosed, a request the open breaker kept from Redis is
// answered 503 with Retry-After, the whole seconds until the breaker lets a
// probe through; the call that failed before it opened carries none (when
// Redis will answer is not known).
func TestFailClosedSaysWhenTheBreakerProbes(t *testing.T) {
	clock := coretest.NewClock(coretest.Epoch)
	rdb := redis.NewClient(&redis.Options{Addr: refusingAddr(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	lim := newLimiter(t, rdb, core.TokenBucket(100, time.Hour), withClock(clock.Now),
		WithoutFallback(), WithBreakerFailures(1), WithBreakerProbeInterval(10*time.Second))
	srv := httptest.NewServer(nethttp.Middleware(lim, nethttp.WithFailClosed())(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	t.Cleanup(srv.Close)
	get := func() *http.Response {
		resp, err := srv.Client().Get(srv.URL)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp
	}

	resp := get() // refused: opens the breaker
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Empty(t, resp.Header.Values("Retry-After"))
	assert.Equal(t, BreakerOpen, breakerState(lim))

	resp = get()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, []string{"10"}, resp.Header.Values("Retry-After"))
	clock.Advance(8500 * time.Millisecond)
	assert.Equal(t, []string{"2"}, get().Header.Values("Retry-After"))

	_, err := lim.Allow(context.Background(), "k")
	var retry interface{ RetryAfter() time.Duration }
	require.ErrorAs(t, err, &retry)
	assert.Equal(t, 1500*time.Millisecond, retry.RetryAfter())
	assert.ErrorIs(t, err, ErrBreakerOpen)
}

// TestOutageLogsOneLineEachWay: the README's breaker hook, which logs the
// change from closed and the return to closed, writes exactly two lines
// for an outage however many probes fail in it, each naming the limiter.
func TestOutageLogsOneLineEachWay(t *testing.T) {
	srv := redistest.Start(t)
	rdb := newClient(t, srv.Addr)
	clock := coretest.NewClock(coretest.Epoch)
	var lines []string
	hook := func(c BreakerChange) { // the README's recipe
		switch {
		case c.From == BreakerClosed && c.To == BreakerOpen:
			lines = append(lines, fmt.Sprintf("ratelimit %s: Redis unavailable, limiting locally", c.Policy.Label()))
		case c.From != BreakerClosed && c.To == BreakerClosed:
			lines = append(lines, fmt.Sprintf("ratelimit %s: back on Redis", c.Policy.Label()))
		}
	}
	lim := newLimiter(t, rdb, core.SlidingWindow(100, time.Minute).WithName("per-ip"),
		withClock(clock.Now), WithTimeout(defaultTimeout), WithBreakerHook(hook))
	ctx := context.Background()
	srv.Stop()
	for range defaultBreakerFailures + 20 { // opens, then 20 failed probes
		_, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		clock.Advance(defaultBreakerProbeInterval)
	}
	require.Equal(t, BreakerOpen, breakerState(lim))
	srv.Restart()
	deadline := time.Now().Add(15 * time.Second)
	for breakerState(lim) != BreakerClosed {
		require.True(t, time.Now().Before(deadline), "no probe got through within 15s of the restart")
		clock.Advance(defaultBreakerProbeInterval)
		_, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
	}
	assert.Equal(t, []string{
		"ratelimit per-ip: Redis unavailable, limiting locally",
		"ratelimit per-ip: back on Redis",
	}, lines)
}
