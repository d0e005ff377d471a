package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
)

// haLag is how far behind the replica is when the primary dies, in the
// scenario that puts it behind (redistest.Sentinel.DelayReplication): it
// misses about that much of the load.
const haLag = 100 * time.Millisecond

// TestSentinelFailover kills (SIGKILL) the primary of a primary, a replica
// and three Sentinels under steady load from two app instances, each with
// its own go-redis failover client (one with go-redis's defaults, one with
// ContextTimeoutEnabled), and measures the over-admission per key, the time
// until decisions resume and the longest call (see ha_test.go): once with
// the replica in sync, once with it haLag behind. It asserts that no call
// outlived the timeout by more than haMargin, that no key was admitted more
// than one extra quota, and that decisions resume once the replica is
// promoted. Run with -v for the figures; -short skips it.
func TestSentinelFailover(t *testing.T) {
	redistest.RequireTimingTests(t)
	skipIfShort(t)
	t.Run("replica in sync", func(t *testing.T) { testSentinelFailover(t, 0) })
	t.Run("replica 100ms behind", func(t *testing.T) { testSentinelFailover(t, haLag) })
}

func testSentinelFailover(t *testing.T, lag time.Duration) {
	const downAfter = time.Second
	s := redistest.StartSentinel(t, downAfter)
	prefix := WithPrefix(testPrefix())
	load := &haLoad{workers: 8}
	for _, tc := range []struct {
		name string
		cte  bool
	}{{"failover client, go-redis defaults", false}, {"failover client, ContextTimeoutEnabled", true}} {
		rdb := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs, ContextTimeoutEnabled: tc.cte,
		})
		t.Cleanup(func() { _ = rdb.Close() })
		load.lims = append(load.lims, newLimiter(t, rdb, haPolicy, prefix, WithTimeout(haTimeout), WithDenyCacheSize(0)))
		load.names = append(load.names, tc.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	load.run()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			load.halt()
		}
	})
	load.waitWarm(t)
	if lag > 0 {
		s.DelayReplication(lag)
		// The replica is lag behind once lag has passed; wait for twice
		// that and for some admissions the replica has not seen yet.
		before, since := load.admitted(), time.Now()
		for time.Since(since) < 2*lag || load.admitted() < before+50 {
			require.Less(t, time.Since(since), 30*time.Second, "the load admits nothing")
			time.Sleep(10 * time.Millisecond)
		}
	}
	killed := load.markEvent()
	s.Master.Stop() // SIGKILL
	promoted, err := s.WaitFailover(ctx)
	require.NoError(t, err)
	promotedAfter := time.Since(killed)
	load.waitResumed(t, 50)
	time.Sleep(500 * time.Millisecond) // steady load on the new primary, for the figures
	load.halt()
	stopped = true

	r := load.sweep(t)
	t.Logf("down-after-milliseconds %v; replica %v behind; the Sentinels named the replica primary %v after the kill",
		downAfter, lag, promotedAfter.Round(time.Millisecond))
	load.report(t, r)
	checkBounds(t, r)
	assert.Equal(t, s.Replica.Addr, promoted)
	if lag > 0 {
		assert.NotEmpty(t, r.over, "a replica %v behind lost no write: the scenario shows nothing", lag)
	}
}
