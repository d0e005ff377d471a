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

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
)

func TestBatch(t *testing.T) {
	t.Parallel()
	rdb := newClient(t, redistest.Addr(t))
	rec := &recorder{}
	addHook(rdb, rec)
	testBatch(t, rdb, rec)
}

func TestBatchCluster(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.Cluster(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	rec := &recorder{}
	addHook(rdb, rec)
	testBatch(t, rdb, rec)

	t.Run("keys of many slots on one node share a script call", func(t *testing.T) {
		assert.Positive(t, rec.cross.Load(), "cross-slot script calls")
	})
}

// testBatch: concurrent calls share script calls and decide exactly (the
// scripts' batches are checked call by call in internal/script).
func testBatch(t *testing.T, rdb redis.UniversalClient, rec *recorder) {
	t.Run("concurrent calls share script calls and stay exact", func(t *testing.T) {
		p := core.FixedWindow(100, time.Hour)
		clock := coretest.NewClock(coretest.Epoch)
		lim := newLimiter(t, rdb, p, withClock(clock.Now), WithDenyCacheSize(0))
		const callers, each = 64, 20
		sent := rec.commands.Load()
		var admitted atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range callers {
			wg.Go(func() {
				<-start
				for i := range each {
					d, err := lim.Allow(context.Background(), fmt.Sprintf("key%d", (g+i)%8))
					if !assert.NoError(t, err) {
						return
					}
					if d.Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		assert.Equal(t, int64(8*100), admitted.Load(), "8 keys, 100 each, of 1280 calls")
		assert.Less(t, rec.commands.Load()-sent, int64(callers*each), "script calls for %d decisions", callers*each)
	})
}
