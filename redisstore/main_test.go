package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/transport"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the tests that stop Redis on
	// purpose would fill the output with them.
	redis.SetLogger(quiet{})
	// A go-redis pool whose dials keep failing (a killed master in the
	// failover tests) starts a goroutine that redials every second until
	// one succeeds or the pool is closed: after Close it may still sleep
	// up to a second, longer than goleak retries, before it returns.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// hooked holds the hooks that tests add to clients with addHook.
var hooked struct {
	sync.Mutex
	of map[redis.UniversalClient][]redis.Hook
}

// addHook adds h to rdb, and to the own client of every limiter New builds
// on rdb afterwards (transport.NewSender), so that h sees the limiter's commands.
func addHook(rdb redis.UniversalClient, h redis.Hook) {
	rdb.AddHook(h)
	hooked.Lock()
	defer hooked.Unlock()
	if hooked.of == nil {
		hooked.of = make(map[redis.UniversalClient][]redis.Hook)
		transport.OwnHooks = func(rdb redis.UniversalClient) []redis.Hook {
			hooked.Lock()
			defer hooked.Unlock()
			return hooked.of[rdb]
		}
	}
	hooked.of[rdb] = append(hooked.of[rdb], h)
}

// quiet drops go-redis's log lines, counting those about its push
// notification handlers (see TestOwnClientLogsNothing).
type quiet struct{}

var pushLogLines atomic.Int64

func (quiet) Printf(_ context.Context, format string, args ...any) {
	if strings.Contains(fmt.Sprintf(format, args...), "maintnotifications") {
		pushLogLines.Add(1)
	}
}

// withClock makes the scripts read now from the given clock instead of the
// server's TIME, and the deny cache and the breaker too. It exists only in
// this package's tests: nothing in the exported API can pass a time to the
// scripts, so a production limiter always runs on the server's clock. (An
// exported testing option would let any caller turn it on by accident or
// by malice: a client-side clock is exactly what the design rules out.)
//
// A test clock moves independently of the real time by which Redis expires
// keys: the keys live an hour longer, long enough for any test.
func withClock(now func() time.Time) Option {
	return func(c *config) error {
		c.clock, c.local, c.ttlPlus = now, unixNano(now), time.Hour
		return nil
	}
}

// withLocalClock replaces only the deny cache's clock: the scripts still
// read the server's TIME.
func withLocalClock(now func() time.Time) Option {
	return func(c *config) error { c.local = unixNano(now); return nil }
}

// unixNano is the clock now in nanoseconds, as the limiter's local clock.
func unixNano(now func() time.Time) func() int64 {
	return func() int64 { return now().UnixNano() }
}

// withMaxFlights bounds the round trips in flight, for benchmarks.
func withMaxFlights(n int) Option {
	return func(c *config) error { c.maxFlights = n; return nil }
}

// newClient returns a client as users create it, with go-redis's defaults.
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var prefixSeq atomic.Int64

// testPrefix is a key prefix of its own for every limiter a test builds,
// so that tests sharing a Redis (REDIS_ADDR) never see each other's keys.
func testPrefix() string {
	return fmt.Sprintf("rstest%d-%d", time.Now().UnixNano(), prefixSeq.Add(1))
}

// testTimeout is the timeout of the limiters newLimiter builds unless a
// test sets its own: the tests that are not about timeouts must not fail
// because a loaded CI machine (the race detector, other packages' tests on
// the same cores) took longer than defaultTimeout for a round trip.
const testTimeout = 10 * time.Second

// newLimiter builds a limiter with a prefix of its own and testTimeout;
// opts come after both and may replace them.
func newLimiter(t testing.TB, rdb redis.UniversalClient, p core.Policy, opts ...Option) *Limiter {
	t.Helper()
	l, err := New(rdb, p, append([]Option{WithPrefix(testPrefix()), WithTimeout(testTimeout)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// awaitDecision polls lim until a restarted Redis decides a call (admitted,
// on a fresh key "k"), failing t after 15 s. Polling, not a sleep for
// correctness: how long go-redis takes to reconnect is not this package's.
func awaitDecision(t *testing.T, lim *Limiter) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		d, err := lim.Allow(context.Background(), "k")
		if err == nil {
			assert.True(t, d.Allowed)
			return
		}
		require.True(t, time.Now().Before(deadline), "no decision within 15s of the restart: %v", err)
		time.Sleep(20 * time.Millisecond)
	}
}

// breakerState returns the state of l's circuit breaker.
func breakerState(l *Limiter) BreakerState { return BreakerState(l.br.State()) }
