package redisstore

import (
	"math"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// lagWatch measures how long this process has lately been too busy to
// read Redis's answers on time, from the Go runtime's own record of how
// long goroutines that were ready to run waited for a CPU
// (/sched/latencies:seconds). That wait is what a batcher's worker spends
// between Redis's answer reaching the socket and reading it: on a saturated
// process (a connection storm, a CPU shared with other work) it reaches
// hundreds of milliseconds while Redis answers in one (benchmarks/README.md,
// "Load scenario"). Time the process spent behind is not held against Redis
// (batcher.untilOverdue).
//
// It reads the runtime when a Limiter is made, when a call is overdue (at
// most once per lagReadEvery) and when a round trip is sent if the last
// reading is older than lagRefresh; no goroutine of its own. Each reading
// compares the histogram with the previous one, so successive readings (by
// any caller) cover the time since the first without a gap. For each
// interval between two readings it adds to lost the longest wait that ended
// in it, times lagSteps, at most the interval. The runtime records one wait
// in eight, and only once it ends, so an overdue caller also measures its
// own (observe): how long yielding the processor kept it waiting.
// A call is given back what
// was added after its round trip was sent; the refresh on sending keeps the
// interval that straddles that instant short while traffic flows, so a
// busy moment long before a call is not given to it.
type lagWatch struct {
	// read returns the runtime's histogram of waits (nil: not measured),
	// and clock the nanotime; tests replace both.
	read  func() *metrics.Float64Histogram
	clock func() int64

	mu     sync.Mutex
	sample [1]metrics.Sample
	prev   []uint64     // the histogram's counts at the previous reading
	readAt atomic.Int64 // nanotime of the previous reading

	seen atomic.Int64 // the longest wait observed since the last reading, ns
	lost atomic.Int64 // ns this process was behind, summed since it was made
}

const (
	schedLatencies = "/sched/latencies:seconds"
	// lagReadEvery spaces the readings: under a storm of overdue calls,
	// one reads and the others use its result.
	lagReadEvery = time.Millisecond
	// lagRefresh: a round trip sent after this long without a reading
	// reads first.
	lagRefresh = 100 * time.Millisecond
	// lagSteps: a round trip waits for a CPU a few times (to write, to
	// read, and a few more when it opens a connection first), each up to
	// the longest wait the runtime saw.
	lagSteps = 4
	// behindLimit bounds the time a call is given back while the process
	// is behind, past its own timeout.
	behindLimit = 5 * time.Second
)

func newLagWatch() *lagWatch {
	w := &lagWatch{clock: nanotime}
	w.sample[0].Name = schedLatencies
	w.read = w.readRuntime
	w.check()
	return w
}

// readRuntime reads /sched/latencies:seconds. w.mu is held.
func (w *lagWatch) readRuntime() *metrics.Float64Histogram {
	metrics.Read(w.sample[:])
	if w.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return w.sample[0].Value.Float64Histogram()
}

// observe records a wait of d ns for a CPU that a caller measured itself.
func (w *lagWatch) observe(d int64) {
	for s := w.seen.Load(); d > s && !w.seen.CompareAndSwap(s, d); s = w.seen.Load() {
	}
}

// check adds to lost the time this process was behind since the previous
// reading, unless that reading is younger than lagReadEvery.
func (w *lagWatch) check() { w.checkOlder(lagReadEvery) }

// refresh is check for a round trip about to be sent at now: it reads only
// when the previous reading is older than lagRefresh.
func (w *lagWatch) refresh(now int64) {
	if now-w.readAt.Load() >= int64(lagRefresh) {
		w.checkOlder(lagRefresh)
	}
}

func (w *lagWatch) checkOlder(age time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock()
	if w.prev != nil && now-w.readAt.Load() < int64(age) {
		return
	}
	h := w.read()
	if h == nil {
		return // not measured by this runtime: never behind
	}
	first := w.prev == nil
	if first {
		w.prev = make([]uint64, len(h.Counts))
	}
	// Counts[i] is the waits in [Buckets[i], Buckets[i+1]).
	var longest float64
	for i, n := range h.Counts {
		if n != w.prev[i] {
			longest = h.Buckets[i+1]
			if math.IsInf(longest, 1) {
				longest = h.Buckets[i]
			}
		}
		w.prev[i] = n
	}
	longest = max(longest, time.Duration(w.seen.Swap(0)).Seconds())
	if !first {
		behind := time.Duration(longest*float64(time.Second)) * lagSteps
		w.lost.Add(min(int64(behind), now-w.readAt.Load()))
	}
	w.readAt.Store(now)
}

// clockBase is the origin of nanotime, shared by every batcher and
// lagWatch of the process so that their instants compare.
var clockBase = time.Now()

// nanotime is the monotonic time since clockBase, in ns.
func nanotime() int64 { return int64(time.Since(clockBase)) }
