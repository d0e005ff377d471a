package redisstore

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
)

// modelSuite is the model-based suite for the Redis store on rdb, the
// scripts reading the suite's clock, with the deny cache on (the default).
//
// The scripts decide at the instant they are given, which may be earlier
// than one a key was already given: the suite is not told MonotonicClock.
// A script's state is a function of the requests it admitted, so a call at
// an instant no earlier than its key's latest admission is compared field
// by field; an earlier one must be no more generous than standing still at
// that admission (see coretest.Suite.RunModel).
func modelSuite(rdb redis.UniversalClient) coretest.Suite {
	return coretest.Suite{New: func(t *testing.T, p core.Policy, now func() time.Time) core.Limiter {
		// A generous timeout: under the race detector on 2 cores, with
		// other packages' tests running, a round trip can take a while.
		return newLimiter(t, rdb, p, withClock(now), WithTimeout(10*time.Second))
	}}
}

// TestModelRedis compares every decision of the Redis store on one server
// with the reference model, and checks the admission properties, on random
// policies and traffic (see coretest.Suite.RunModel;
// RATELIMIT_MODEL_DURATION runs it longer, RATELIMIT_MODEL_SEED replays a
// failure).
func TestModelRedis(t *testing.T) {
	t.Parallel()
	s := modelSuite(newClient(t, redistest.Addr(t)))
	t.Run("model", s.RunModel)
	t.Run("properties", s.RunProperties)
	t.Run("plan scenarios", s.RunPlanScenarios)
	t.Run("composites and settlements", s.RunComposites)
}

// TestModelCluster is TestModelRedis on a three-master Redis Cluster.
func TestModelCluster(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.Cluster(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	s := modelSuite(rdb)
	t.Run("model", s.RunModel)
	t.Run("properties", s.RunProperties)
	t.Run("plan scenarios", s.RunPlanScenarios)
	t.Run("composites and settlements", s.RunComposites)
}
