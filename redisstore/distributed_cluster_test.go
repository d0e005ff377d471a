package redisstore

import (
	"context"
	"fmt"
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

// TestDistributedExactnessCluster is TestDistributedExactness on a Redis
// Cluster: 8 app servers (8 limiters, each with its own cluster client and
// connection pools) with 100 goroutines each, one call per goroutine spread
// over 6 keys that live on several masters, all at one frozen instant:
// every key admits exactly the policy's capacity, under every algorithm.
func TestDistributedExactnessCluster(t *testing.T) {
	addrs := redistest.Cluster(t)
	owners, err := redistest.SlotOwners(context.Background(), addrs[0])
	require.NoError(t, err)
	checkSlotOf(t, addrs[0])
	const servers, goroutines, keys = 8, 100, 6
	masters := map[string]bool{}
	for k := range keys {
		masters[owners[slotOf(fmt.Sprintf("shared-%d", k))]] = true
	}
	require.Greater(t, len(masters), 1, "the keys should live on several masters")
	for _, p := range []core.Policy{
		core.FixedWindow(50, time.Minute),
		core.SlidingWindow(50, time.Minute),
		core.TokenBucket(50, time.Minute),
		core.LeakyBucket(50, time.Minute),
	} {
		t.Run(p.Algorithm.String()+" admits exactly its capacity per key", func(t *testing.T) {
			clock := coretest.NewClock(coretest.Epoch)
			prefix := WithPrefix(testPrefix())
			var lims []*Limiter
			for range servers {
				rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
				t.Cleanup(func() { _ = rdb.Close() })
				lims = append(lims, newLimiter(t, rdb, p, prefix, withClock(clock.Now), WithTimeout(30*time.Second)))
			}
			var admitted [keys]atomic.Int64
			var failed atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, lim := range lims {
				for g := range goroutines {
					k := (i*goroutines + g) % keys
					wg.Go(func() {
						<-start
						d, err := lim.Allow(context.Background(), fmt.Sprintf("shared-%d", k))
						switch {
						case err != nil:
							failed.Add(1)
						case d.Allowed:
							admitted[k].Add(1)
						}
					})
				}
			}
			close(start)
			wg.Wait()
			require.Zero(t, failed.Load())
			for k := range keys {
				assert.Equal(t, p.Capacity(), admitted[k].Load(), "key shared-%d", k)
			}
		})
	}
}
