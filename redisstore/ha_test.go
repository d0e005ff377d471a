package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
)

// The harness of the high-availability tests (ha_sentinel_test.go,
// ha_cluster_test.go): steady load through several app instances while a
// primary is killed or slots move, then a sweep that counts, per key, what
// was admitted in all.
//
// Every worker goroutine walks its own sequence of keys: it sends Allow for
// its current key until the key is denied (an error sends the same key
// again), then moves to the next. So at any instant there are keys being
// filled, keys just filled, and keys long full. The policy is a token
// bucket of haQuota per day: nothing refills during a test, so a key
// admits exactly haQuota in all unless Redis lost some of its writes. After
// the load stops, the sweep asks every key touched until it is denied: a
// key whose state was rolled back by a failover admits again there, and
// admitted (load + sweep) - haQuota is its over-admission. The limiters
// have no deny cache, so every call reaches Redis (a deny cache could only
// hide an over-admission).

// skipIfShort skips the high-availability tests under go test -short:
// they take about a minute and a half together (most of it
// TestClusterFailover waiting for go-redis to reload its slot map).
func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("high-availability test: runs without -short")
	}
}

// haQuota is each key's quota.
const haQuota = 10

// haPolicy admits haQuota per key and refills nothing within a test.
var haPolicy = core.TokenBucket(haQuota, 24*time.Hour)

// haTimeout is the limiters' timeout in the HA tests, and haMargin what a
// call may take beyond it (scheduling on a loaded 2-core machine under the
// race detector) before the test fails.
const (
	haTimeout = 250 * time.Millisecond
	haMargin  = 250 * time.Millisecond
)

// haLate is how far past the timeout a call counts as late in the report.
const haLate = 20 * time.Millisecond

// haPace is the least time between the starts of two calls of one worker:
// with 8 workers per instance, at most 800 calls per second per instance.
const haPace = 10 * time.Millisecond

// haLoad is the load of one test.
type haLoad struct {
	lims    []*Limiter // app instances, each with its own client
	names   []string   // their names, for the report
	workers int        // per instance
	// group names the group of a key (the master it lives on, whether
	// its slot moves); nil: one group.
	group func(key string) string
	// patience bounds each wait for the workers (default 60s).
	patience time.Duration

	event  atomic.Int64 // UnixNano of the kill or the start of resharding; 0 before
	stop   chan struct{}
	wg     sync.WaitGroup
	ws     []*haWorker
	start  time.Time
	stopAt time.Time
}

type haWorker struct {
	id, inst int
	lim      *Limiter

	mu       sync.Mutex
	next     int              // index of the current key
	admitted map[string]int64 // by the load, per key
	errors   map[string]int64 // per key
	calls    int64
	okAfter  int64                  // successful calls started after the event
	maxDur   time.Duration          // longest call
	late     int64                  // calls longer than haTimeout+haLate
	slow     []string               // calls longer than haTimeout+haMargin
	errKinds map[string]int64       // error texts, shortened
	groups   map[string]*groupStats // per group of keys
}

// groupStats is what the calls for one group of keys saw around the event.
type groupStats struct {
	calls, errors int64
	// firstOK is the end of the first successful call started after the
	// event; lastErr the end of the last failed call after it.
	firstOK, lastErr time.Time
	errorsAfter      int64
}

func (l *haLoad) key(w, i int) string { return fmt.Sprintf("w%d-%d", w, i) }

func (l *haLoad) groupOf(key string) string {
	if l.group == nil {
		return "all"
	}
	return l.group(key)
}

// run starts the workers.
func (l *haLoad) run() {
	l.stop = make(chan struct{})
	l.start = time.Now()
	for i, lim := range l.lims {
		for range l.workers {
			w := &haWorker{id: len(l.ws), inst: i, lim: lim, admitted: map[string]int64{}, errors: map[string]int64{},
				errKinds: map[string]int64{}, groups: map[string]*groupStats{}}
			l.ws = append(l.ws, w)
			l.wg.Go(func() { l.work(w) })
		}
	}
}

func (l *haLoad) work(w *haWorker) {
	ctx := context.Background()
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		w.mu.Lock()
		key := l.key(w.id, w.next)
		w.mu.Unlock()
		start := time.Now()
		d, err := w.lim.Allow(ctx, key)
		end := time.Now()
		dur := end.Sub(start)
		ev := l.event.Load()
		after := ev != 0 && start.UnixNano() >= ev

		w.mu.Lock()
		w.calls++
		w.maxDur = max(w.maxDur, dur)
		if dur > haTimeout+haLate {
			w.late++
		}
		if dur > haTimeout+haMargin {
			w.slow = append(w.slow, fmt.Sprintf("%v (%v)", dur, err))
		}
		gname := l.names[w.inst] + ", keys " + l.groupOf(key)
		g := w.groups[gname]
		if g == nil {
			g = &groupStats{}
			w.groups[gname] = g
		}
		g.calls++
		switch {
		case err != nil:
			g.errors++
			w.errors[key]++
			w.errKinds[errKind(err)]++
			if ev != 0 && end.UnixNano() >= ev {
				g.errorsAfter++
				g.lastErr = end
			}
		default:
			if after {
				w.okAfter++
				if g.firstOK.IsZero() {
					g.firstOK = end
				}
			}
			if d.Allowed {
				w.admitted[key]++
			} else {
				w.next++
			}
		}
		w.mu.Unlock()
		// A steady load, not a flood: the figures measure the store
		// and Redis, not goroutines queueing for 2 busy cores (the race
		// detector makes every call several times dearer), and a refused
		// connection, which fails at once, does not turn a worker into a
		// busy loop.
		time.Sleep(time.Until(start.Add(haPace)))
	}
}

// errKind shortens an error for counting: timeouts as one kind, others by
// their text without addresses.
func errKind(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	s := err.Error()
	if i := strings.Index(s, "127.0.0.1"); i >= 0 {
		s = s[:i] + "…"
	}
	return s
}

// markEvent records now as the instant of the kill or the resharding.
func (l *haLoad) markEvent() time.Time {
	now := time.Now()
	l.event.Store(now.UnixNano())
	return now
}

// eventAt returns the instant markEvent recorded.
func (l *haLoad) eventAt() time.Time { return time.Unix(0, l.event.Load()) }

// waitWarm waits until every worker has filled a few keys, so that the
// event finds keys in every state.
func (l *haLoad) waitWarm(t *testing.T) {
	t.Helper()
	l.waitFor(t, "every worker filled 3 keys", func(w *haWorker) bool { return w.next >= 3 })
}

// waitResumed waits until every worker has had n successful calls started
// after the event.
func (l *haLoad) waitResumed(t *testing.T, n int64) {
	t.Helper()
	l.waitFor(t, fmt.Sprintf("every worker had %d decisions after the event", n), func(w *haWorker) bool { return w.okAfter >= n })
}

// waitFor polls the workers until cond holds for each, for at most
// l.patience (default 60s).
func (l *haLoad) waitFor(t *testing.T, what string, cond func(*haWorker) bool) {
	t.Helper()
	patience := cmp.Or(l.patience, 60*time.Second)
	deadline := time.Now().Add(patience)
	for {
		ok := true
		for _, w := range l.ws {
			w.mu.Lock()
			ok = ok && cond(w)
			w.mu.Unlock()
		}
		if ok {
			return
		}
		require.True(t, time.Now().Before(deadline), "not within %v: %s", patience, what)
		time.Sleep(10 * time.Millisecond)
	}
}

// admitted returns how many requests the load has admitted so far.
func (l *haLoad) admitted() int64 {
	var n int64
	for _, w := range l.ws {
		w.mu.Lock()
		for _, a := range w.admitted {
			n += a
		}
		w.mu.Unlock()
	}
	return n
}

// halt stops the workers and waits for them.
func (l *haLoad) halt() {
	close(l.stop)
	l.wg.Wait()
	l.stopAt = time.Now()
}

// haResult is what a test measured.
type haResult struct {
	keys      int              // keys touched
	total     map[string]int64 // admitted per key, load and sweep
	errors    map[string]int64 // failed calls per key during the load
	calls     int64
	maxDur    []time.Duration // per instance
	late      []int64         // per instance: calls longer than haTimeout+haLate
	slow      []string
	errKinds  map[string]int64
	groups    map[string]*groupStats // per instance and group of keys, merged over workers
	over      map[string]int64       // keys admitted more than haQuota: the excess
	overByGrp map[string][]int64     // the excess of every key, per group of keys
}

// sweep counts what every touched key admits now and merges the workers'
// figures. The cluster has settled: a sweep call that fails is retried.
func (l *haLoad) sweep(t *testing.T) haResult {
	t.Helper()
	r := haResult{total: map[string]int64{}, errors: map[string]int64{}, maxDur: make([]time.Duration, len(l.lims)), late: make([]int64, len(l.lims)),
		errKinds: map[string]int64{}, groups: map[string]*groupStats{}, over: map[string]int64{}, overByGrp: map[string][]int64{}}
	var keys []string
	for _, w := range l.ws {
		for i := 0; i <= w.next; i++ {
			keys = append(keys, l.key(w.id, i))
		}
		maps.Copy(r.total, w.admitted)
		maps.Copy(r.errors, w.errors)
		r.calls += w.calls
		r.maxDur[w.inst] = max(r.maxDur[w.inst], w.maxDur)
		r.late[w.inst] += w.late
		r.slow = append(r.slow, w.slow...)
		for k, n := range w.errKinds {
			r.errKinds[k] += n
		}
		for name, g := range w.groups {
			m := r.groups[name]
			if m == nil {
				m = &groupStats{}
				r.groups[name] = m
			}
			m.calls += g.calls
			m.errors += g.errors
			m.errorsAfter += g.errorsAfter
			if !g.firstOK.IsZero() && (m.firstOK.IsZero() || g.firstOK.Before(m.firstOK)) {
				m.firstOK = g.firstOK
			}
			if g.lastErr.After(m.lastErr) {
				m.lastErr = g.lastErr
			}
		}
	}
	r.keys = len(keys)

	var mu sync.Mutex
	var wg sync.WaitGroup
	next := atomic.Int64{}
	ctx := context.Background()
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(keys) {
					return
				}
				key := keys[i]
				var admitted int64
				for calls, fails := 0, 0; calls <= haQuota; {
					d, err := l.lims[0].Allow(ctx, key)
					if err != nil {
						fails++
						if !assert.Less(t, fails, 50, "sweep of %s: %v", key, err) {
							return
						}
						continue
					}
					calls++
					if !d.Allowed {
						break
					}
					admitted++
				}
				mu.Lock()
				r.total[key] += admitted
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, key := range keys {
		extra := r.total[key] - haQuota
		g := l.groupOf(key)
		if extra > 0 {
			r.over[key] = extra
		}
		r.overByGrp[g] = append(r.overByGrp[g], max(extra, 0))
	}
	return r
}

// report logs the figures: what benchmarks/README.md quotes. Times are
// from the event (the kill, the start of resharding).
func (l *haLoad) report(t *testing.T, r haResult) {
	t.Helper()
	ev := l.eventAt()
	t.Logf("load: %d calls in %v through %d instances x %d workers, %d keys of quota %d; timeout %v",
		r.calls, l.stopAt.Sub(l.start).Round(time.Millisecond), len(l.lims), l.workers, r.keys, haQuota, haTimeout)
	for i, d := range r.maxDur {
		t.Logf("%s: longest call %v, %d calls over the timeout + %v", l.names[i], d.Round(100*time.Microsecond), r.late[i], haLate)
	}
	for _, name := range slices.Sorted(maps.Keys(r.groups)) {
		g := r.groups[name]
		line := fmt.Sprintf("%s: %d calls, %d errors (%d after the event)", name, g.calls, g.errors, g.errorsAfter)
		if !g.firstOK.IsZero() {
			line += fmt.Sprintf("; first decision after the event at +%v", g.firstOK.Sub(ev).Round(time.Millisecond))
		}
		if !g.lastErr.IsZero() {
			line += fmt.Sprintf(", last error at +%v", g.lastErr.Sub(ev).Round(time.Millisecond))
		}
		t.Log(line)
	}
	for _, name := range slices.Sorted(maps.Keys(r.overByGrp)) {
		var sum, worst, n int64
		for _, e := range r.overByGrp[name] {
			sum += e
			worst = max(worst, e)
			if e > 0 {
				n++
			}
		}
		t.Logf("over-admission, keys %s: %d of %d keys, %d requests in all, at most %d on one key (%.1f quota)",
			name, n, len(r.overByGrp[name]), sum, worst, float64(worst)/haQuota)
	}
	for _, k := range slices.Sorted(maps.Keys(r.errKinds)) {
		t.Logf("errors: %6d × %s", r.errKinds[k], k)
	}
}

// checkBounds asserts the promises every HA test shares: no call outlived
// the timeout by more than haMargin, and no key was admitted more than one
// extra quota.
func checkBounds(t *testing.T, r haResult) {
	t.Helper()
	assert.Empty(t, r.slow, "calls longer than the timeout %v + %v", haTimeout, haMargin)
	for key, extra := range r.over {
		assert.LessOrEqual(t, extra, int64(haQuota), "key %s admitted %d in all", key, r.total[key])
	}
}

// slotOf is the Redis Cluster slot of the limiter's key for the user key
// k (which needs no escaping): CRC16 (XMODEM) of the hash tag, mod 16384.
func slotOf(k string) int {
	var crc uint16
	for i := 0; i < len(k); i++ {
		crc ^= uint16(k[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) & 16383
}
