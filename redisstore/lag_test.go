package redisstore

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/redisstore/redistest"
)

// saturate keeps 4 goroutines per processor running without blocking for
// d, so that every goroutine that becomes ready meanwhile waits for a CPU
// (the runtime preempts a running goroutine every 10ms or so, and the
// others queue behind it), and 32 more waking every millisecond: the
// runtime records the wait of one wake in eight, so they make sure it has
// many to record.
func saturate(d time.Duration) (wait func()) {
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for time.Now().Before(deadline) {
			}
		})
	}
	for range 32 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		})
	}
	return wg.Wait
}

func TestLagWatchCountsTimeBehind(t *testing.T) {
	w := newLagWatch()
	before := w.lost.Load()
	saturate(300 * time.Millisecond)()
	w.check()
	lost := time.Duration(w.lost.Load() - before)
	// 8 goroutines on 2 processors preempted every ~10ms: a ready one waits
	// several of those turns.
	assert.GreaterOrEqual(t, lost, 10*time.Millisecond, "time behind while saturated")
	assert.LessOrEqual(t, lost, time.Since(clockBase), "never more than the time that passed")

	t.Run("no more than the time between readings", func(t *testing.T) {
		w := newLagWatch()
		start := w.lost.Load()
		readAt := nanotime()
		wait := saturate(50 * time.Millisecond)
		for range 10 {
			time.Sleep(5 * time.Millisecond)
			w.check()
		}
		wait()
		w.check()
		assert.LessOrEqual(t, w.lost.Load()-start, nanotime()-readAt+int64(time.Millisecond))
	})

	t.Run("a busy moment before a round trip is sent is not given to it", func(t *testing.T) {
		w := newLagWatch()
		before := w.lost.Load()
		saturate(300 * time.Millisecond)()
		// The round trip is sent more than lagRefresh after the last
		// reading: it reads first, so the busy moment is in what was lost
		// before it was sent.
		w.readAt.Add(-int64(lagRefresh))
		w.refresh(nanotime())
		atSend := w.lost.Load()
		assert.GreaterOrEqual(t, time.Duration(atSend-before), 10*time.Millisecond, "the busy moment")
		w.refresh(nanotime())
		assert.Equal(t, atSend, w.lost.Load(), "a send within lagRefresh of a reading does not read")
	})
}

// TestBusyProcessIsNotRedisDown: Redis answers every call at once, but
// this process is too busy to read the answers within the timeout. That
// is not Redis failing: every call gets its decision, and exactly Limit
// are admitted. A Redis that stops answering is still reported within the
// timeout (TestRedisDown, TestSlowRedis).
func TestBusyProcessIsNotRedisDown(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	const timeout = 20 * time.Millisecond
	lim := newLimiter(t, rdb, core.FixedWindow(100, time.Hour), WithTimeout(timeout), WithoutDenyCache())
	ctx := context.Background()
	_, err := lim.Allow(ctx, "warm") // the connection is open before the load
	require.NoError(t, err)

	wait := saturate(time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted, denied := 0, 0
	var errs []error
	for range 8 {
		wg.Go(func() {
			for range 25 {
				d, err := lim.Allow(ctx, "k")
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case d.Allowed:
					admitted++
				default:
					denied++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wait()
	assert.Empty(t, errs, "no call failed: Redis answered every one")
	assert.Equal(t, 100, admitted)
	assert.Equal(t, 100, denied)
}
