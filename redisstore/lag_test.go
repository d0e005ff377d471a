package redisstore

import (
	"context"
	"math"
	"runtime"
	"runtime/metrics"
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

// fakeLag is a lagWatch on a histogram and clock of the test's: buckets
// of 0-1ms, 1-10ms, 10-100ms, 100ms-1s and 1s and over.
type fakeLag struct {
	*lagWatch
	h   metrics.Float64Histogram
	now int64
}

func newFakeLag() *fakeLag {
	f := &fakeLag{h: metrics.Float64Histogram{
		Counts:  make([]uint64, 5),
		Buckets: []float64{0, 0.001, 0.01, 0.1, 1, math.Inf(1)},
	}}
	f.lagWatch = &lagWatch{
		read:  func() *metrics.Float64Histogram { return &f.h },
		clock: func() int64 { return f.now },
	}
	f.check() // the first reading: a baseline
	return f
}

// wait records a goroutine's wait ending in bucket i, and advance moves
// the clock.
func (f *fakeLag) wait(i int)              { f.h.Counts[i]++ }
func (f *fakeLag) advance(d time.Duration) { f.now += int64(d) }
func (f *fakeLag) lostNow() time.Duration  { return time.Duration(f.lost.Load()) }

func TestLagWatchAccounting(t *testing.T) {
	const ms = time.Millisecond
	t.Run("the first reading is a baseline", func(t *testing.T) {
		f := newFakeLag()
		f.lagWatch.prev = nil // as when the Limiter is made
		f.advance(time.Second)
		f.wait(4) // a wait of over a second before then
		f.check()
		assert.Zero(t, f.lostNow())
	})
	t.Run("four times the longest wait of an interval, at most the interval", func(t *testing.T) {
		f := newFakeLag()
		f.advance(100 * ms)
		f.wait(0)
		f.wait(1) // < 10ms
		f.check()
		assert.Equal(t, 40*ms, f.lostNow(), "4 x the bucket's upper bound")
		f.advance(100 * ms)
		f.wait(2) // < 100ms: 4 x 100ms, more than the interval
		f.check()
		assert.Equal(t, 140*ms, f.lostNow())
		f.advance(100 * ms)
		f.check() // nobody waited
		assert.Equal(t, 140*ms, f.lostNow())
		f.advance(2 * time.Second)
		f.wait(4) // 1s and over: the bucket's lower bound, 4s, capped at 2s
		f.check()
		assert.Equal(t, 2140*ms, f.lostNow())
	})
	t.Run("a caller's own measured wait counts as one", func(t *testing.T) {
		f := newFakeLag()
		f.advance(100 * ms)
		f.observe(int64(3 * ms))
		f.observe(int64(2 * ms)) // the longest is kept
		f.check()
		assert.Equal(t, 12*ms, f.lostNow())
		f.advance(100 * ms)
		f.check() // consumed by the previous reading
		assert.Equal(t, 12*ms, f.lostNow())
	})
	t.Run("readings are at most one per lagReadEvery", func(t *testing.T) {
		f := newFakeLag()
		f.advance(lagReadEvery / 2)
		f.wait(1)
		f.check()
		assert.Zero(t, f.lostNow(), "too soon: not read")
		f.advance(lagReadEvery / 2)
		f.check()
		assert.Equal(t, lagReadEvery, f.lostNow(), "read: 40ms capped at the interval")
	})
	t.Run("a send reads only past lagRefresh", func(t *testing.T) {
		f := newFakeLag()
		f.advance(lagRefresh - 1)
		f.wait(3)
		f.refresh(f.now)
		assert.Zero(t, f.lostNow())
		f.advance(1)
		f.refresh(f.now)
		assert.Equal(t, lagRefresh, f.lostNow())
	})
}

func TestOverdueIn(t *testing.T) {
	const ms = int64(time.Millisecond)
	timeout := 50 * time.Millisecond
	for _, tc := range []struct {
		name             string
		now, since, lost int64
		want             time.Duration
	}{
		{"a process that keeps up: the timeout", 30 * ms, 0, 0, 20 * time.Millisecond},
		{"overdue at the timeout", 50 * ms, 0, 0, 0},
		{"past it", 70 * ms, 0, 0, -20 * time.Millisecond},
		{"time lost is given back", 70 * ms, 0, 30 * ms, 10 * time.Millisecond},
		{"never more than was waited", 70 * ms, 0, 500 * ms, timeout},
		{"counted from since", 170 * ms, 100 * ms, 30 * ms, 10 * time.Millisecond},
		{"until behindLimit past the timeout", int64(timeout+behindLimit) - 1, 0, int64(behindLimit), 1},
		{"then no longer", int64(timeout + behindLimit), 0, int64(behindLimit), -behindLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, overdueIn(timeout, tc.now, tc.since, tc.lost))
		})
	}
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
