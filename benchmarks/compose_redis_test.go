package benchmarks

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/redisstore"
)

// The Redis side of issue 26: the common API quota, 10 per second and
// 1,000 per day (token buckets), on one local redis-server, as
//
//   - single: one policy (10 per second), the round trip to beat;
//   - composite: core.AllOf of both, one script call;
//   - stacked: two limiters, one per policy, asked one after the other
//     (two round trips: what users do today, the baseline).
//
// Keys are picked at random from redisKeys clients, so nothing is denied.
var (
	composePerSecond = core.TokenBucket(10, time.Second).WithName("second")
	composePerDay    = core.TokenBucket(1000, 24*time.Hour).WithName("day")
)

// composeLimiter asks each of lims in turn, stopping at a denial.
type composeLimiter []*redisstore.Limiter

func (c composeLimiter) Allow(key string) (bool, error) {
	for _, lim := range c {
		d, err := lim.AllowN(context.Background(), key, 1)
		if err == nil && d.Source == core.SourceFallback {
			err = errNotRedis
		}
		if err != nil || !d.Allowed {
			return false, err
		}
	}
	return true, nil
}
func (c composeLimiter) Sweep() {}
func (c composeLimiter) Close() {
	for _, lim := range c {
		lim.Close()
	}
}

// newComposeLimiter builds the limiter of a scenario on a client as users
// create it, on an empty database.
func newComposeLimiter(tb testing.TB, scenario string) composeLimiter {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr(tb)})
	tb.Cleanup(func() { rdb.Close() })
	require.NoError(tb, rdb.FlushDB(context.Background()).Err())
	var policies []core.Policy
	switch scenario {
	case "single":
		policies = []core.Policy{composePerSecond}
	case "composite":
		policies = []core.Policy{core.AllOf(composePerSecond, composePerDay)}
	case "stacked":
		policies = []core.Policy{composePerSecond, composePerDay.WithName("")}
	}
	var c composeLimiter
	for i, p := range policies {
		lim, err := redisstore.New(rdb, p, redisstore.WithPrefix(fmt.Sprintf("bench%d", i)))
		require.NoError(tb, err)
		c = append(c, lim)
	}
	tb.Cleanup(c.Close)
	return c
}

var composeScenarios = []string{"single", "composite", "stacked"}

func TestComposeRedisDeniesAsConfigured(t *testing.T) {
	for _, scenario := range composeScenarios {
		lim := newComposeLimiter(t, scenario)
		assert.Equal(t, 10, countAllowed(t, lim, "192.0.2.1", 11), scenario)
	}
}

// BenchmarkComposeRedis: each scenario by 1 caller (a round trip's
// latency: ns/op) and 64 (throughput: decisions/s), with the server's
// time per decision as BenchmarkRedis reports it.
func BenchmarkComposeRedis(b *testing.B) {
	keys := ClientKeys(redisKeys)
	for _, scenario := range composeScenarios {
		for _, callers := range []int{1, 64} {
			b.Run(fmt.Sprintf("policy=%s/callers=%d", scenario, callers), func(b *testing.B) {
				lim := newComposeLimiter(b, scenario)
				stats := redis.NewClient(&redis.Options{Addr: redisAddr(b)})
				defer stats.Close()
				runCallers(b, callers, lim, keys, stats)
			})
		}
	}
}
