package redisstore

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/core"
)

// batcher sends a limiter's calls to Redis, many concurrent decisions in
// one script call (one TIME, one Lua entry for all of them).
//
// Group commit: at most maxFlights round trips are in flight at once, each
// sent by a worker goroutine of the batcher. A call that finds fewer in
// flight hands itself to an idle worker (or starts one, up to maxFlights)
// and waits for its answer; the calls that arrive while all are in flight
// queue up, and the next round trip to finish sends all of them (up to
// maxBatch) as its next round trip. So a lone call costs one round trip
// and one hand-off, and under load every round trip carries what queued
// up during the previous one: the busier, the larger the batches and the
// less Redis time per decision.
//
// Why another goroutine at all: the caller waits for its answer with its
// own timer, so that a call returns at its timeout whatever the client
// does (go-redis honours a context's deadline on the socket only with
// ContextTimeoutEnabled, and retries on its own schedule). The woken worker
// runs on the caller's P as soon as the caller blocks, so nothing crosses
// to another core. Workers stay parked between round trips, because a
// goroutine started per round trip measured about 14% slower than the
// caller's own (its stack grows anew through go-redis each time), and a
// parked one no slower (BenchmarkHandoff, benchmarks/README.md); Close
// stops them.
//
// What the timeout measures: that Redis is slow or down, not that this
// process is busy. A sent call fails once its round trip has been out for
// the timeout; a queued call, once no round trip has been sent or answered
// for the timeout (Redis has stopped answering, and the calls ahead of it
// are stuck). Time spent queued behind round trips that Redis answers does
// not count: the queue moves at Redis's pace, which is the backpressure.
// Nor does time this process spent too busy to read an answer (lagWatch):
// on a saturated process a timer wakes its goroutine at once while the
// answer Redis sent in time waits for the network poller and the run
// queue. And before concluding that Redis did not answer, a caller lets
// the goroutines that were ready to run before it run first (catchUp).
type batcher struct {
	rdb        redis.UniversalClient
	cluster    *redis.ClusterClient // the same client, when it is one
	route      route
	scripts    scripts
	timeout    time.Duration
	maxBatch   int
	maxFlights int
	testClock  bool        // calls carry their own now: batch only equal ones
	noCross    atomic.Bool // the server rejected the cross-slot form: per key

	mu      sync.Mutex
	pending []*call   // FIFO
	flying  int       // round trips in flight (workers not idle)
	idle    []*worker // parked workers
	closed  bool
	wg      sync.WaitGroup // the workers

	lag          *lagWatch    // shared by a Cluster's node batchers
	progress     atomic.Int64 // nanotime when a round trip was last sent or answered
	progressLost atomic.Int64 // lag.lost then

	// On a Cluster (routeCluster), a batcher per node once the cluster
	// client knows the slots (routed), so that each node's calls go
	// together and wait for that node alone.
	routed  atomic.Bool
	nodesMu sync.Mutex
	nodes   map[*redis.Client]*batcher // route routeNode
}

// route says how the calls of one round trip are grouped into script calls.
type route uint8

const (
	// routeOne: one server (a *redis.Client: a single node, or the primary
	// of a Sentinel failover client). All calls in one script call.
	routeOne route = iota
	// routeCluster: a *redis.ClusterClient. Once the client knows the
	// slots, submit hands each call to its node's batcher (routeNode);
	// until then, one script call per node, in a cluster pipeline.
	routeCluster
	// routePerKey: any other client (a Ring shards keys by its own hash,
	// which this package cannot see). One script call per key.
	routePerKey
	// routeNode: the calls of one Cluster node, sent through the cluster
	// client: one script call, in the cross-slot form when it decides
	// several keys.
	routeNode
)

// Defaults of the batcher, measured in benchmarks/README.md.
const (
	// defaultMaxBatch bounds the calls one script call decides: about a
	// millisecond of Redis time, for which the server serves nobody else.
	defaultMaxBatch = 512
	// defaultMaxFlights is how many round trips may be in flight at once:
	// with one, two callers take turns; with more than two, 64 callers'
	// batches get smaller and their decisions slower (BenchmarkRedis,
	// benchmarks/README.md).
	defaultMaxFlights = 2
	// catchUpLag: an overdue call whose yield took this long or longer
	// finds the process behind, and yields again (at most catchUpRounds
	// times) until the time lost is accounted for (lagWatch); once it
	// finds the process keeping up, it waits this long more for a worker
	// that is delivering its answer.
	catchUpLag    = time.Millisecond
	catchUpRounds = 64
	// flightLimit bounds a round trip on clients that honour context
	// deadlines (the callers have given up long before): a busy process
	// may read an answer late, and a deadline that passes before the read
	// turns an answer that is there into an error.
	flightLimit = 10 * time.Second
)

// call is one decision or Reset on its way to Redis. The caller fills in
// the request; the batcher fills in the answer and signals done.
type call struct {
	key    string // the Redis key
	n      int64  // the cost; 0 for Peek and Get; -1-used for Set
	ps     *pspec // the policy given with the call; nil: the limiter's own
	del    bool   // Reset: DEL key
	now    int64  // tests: the script's now in ns, when hasNow
	hasNow bool

	b        *batcher // the batcher it was submitted to
	state    atomic.Int32
	sentAt   atomic.Int64 // nanotime when it was sent
	sentLost atomic.Int64 // b.lag.lost then
	res      core.Decision
	used     int64 // Peek and Get: the key's usage
	err      error
	done     chan struct{} // capacity 1: the batcher never blocks on it
	timer    *time.Timer   // the caller's, reused with the call
}

const (
	callPending   = iota // queued, not yet sent
	callSent             // taken by a round trip: it will answer
	callAbandoned        // the caller gave up before it was sent: skipped
)

var callPool = sync.Pool{New: func() any {
	c := &call{done: make(chan struct{}, 1), timer: time.NewTimer(time.Hour)}
	c.timer.Stop()
	return c
}}

func getCall() *call {
	c := callPool.Get().(*call)
	c.state.Store(callPending)
	return c
}

// putCall recycles a call whose answer the caller has read. A call the
// caller gave up on is never recycled: the batcher may still write to it.
func putCall(c *call) {
	c.timer.Stop()
	*c = call{done: c.done, timer: c.timer}
	callPool.Put(c)
}

// answered reports whether c's answer is there (and takes the signal).
func (c *call) answered() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func newBatcher(rdb redis.UniversalClient, s scripts, timeout time.Duration, maxBatch, maxFlights int, testClock bool) *batcher {
	b := newQueue(rdb, s, timeout, maxBatch, maxFlights, testClock)
	b.lag = newLagWatch()
	switch c := rdb.(type) {
	case *redis.Client:
		b.route = routeOne
	case *redis.ClusterClient:
		b.route, b.cluster = routeCluster, c
	}
	return b
}

// newQueue returns a batcher of route routePerKey.
func newQueue(rdb redis.UniversalClient, s scripts, timeout time.Duration, maxBatch, maxFlights int, testClock bool) *batcher {
	return &batcher{
		rdb:        rdb,
		scripts:    s,
		timeout:    timeout,
		maxBatch:   maxBatch,
		maxFlights: maxFlights,
		testClock:  testClock,
		route:      routePerKey,
	}
}

// node returns the batcher of a Cluster node, made on first use.
func (b *batcher) node(n *redis.Client) *batcher {
	b.nodesMu.Lock()
	defer b.nodesMu.Unlock()
	nb := b.nodes[n]
	if nb == nil {
		nb = newQueue(b.rdb, b.scripts, b.timeout, b.maxBatch, b.maxFlights, b.testClock)
		nb.route, nb.cluster, nb.lag = routeNode, b.cluster, b.lag
		if b.nodes == nil {
			b.nodes = make(map[*redis.Client]*batcher)
		}
		b.nodes[n] = nb
	}
	return nb
}

// worker is a goroutine of the batcher that sends round trips.
type worker struct {
	wake chan *call // the first call of its next round trip; nil: stop
}

// submit hands c to the batcher: to an idle or new worker when fewer than
// maxFlights round trips are in flight, else to the queue. It returns
// false when the batcher is closed.
func (b *batcher) submit(c *call) bool {
	if b.route == routeCluster && b.routed.Load() && !b.noCross.Load() {
		// The slots are known, so this needs no round trip.
		if n, err := b.cluster.MasterForKey(context.Background(), c.key); err == nil {
			return b.node(n).submit(c)
		}
	}
	c.b = b
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return false
	case b.flying < b.maxFlights:
		b.flying++
		if n := len(b.idle); n > 0 {
			w := b.idle[n-1]
			b.idle[n-1] = nil
			b.idle = b.idle[:n-1]
			b.mu.Unlock()
			w.wake <- c
			return true
		}
		b.wg.Add(1)
		b.mu.Unlock()
		go b.work(c)
	default:
		b.pending = append(b.pending, c)
		b.mu.Unlock()
	}
	return true
}

// work sends first, then whatever queued up meanwhile until the queue is
// empty, then parks until submit wakes it again or close stops it.
func (b *batcher) work(first *call) {
	defer b.wg.Done()
	w := &worker{wake: make(chan *call, 1)}
	batch := make([]*call, 0, 8)
	for c := first; c != nil; c = <-w.wake {
		batch = append(batch[:0], c)
		for {
			b.send(batch)
			clear(batch)
			b.mu.Lock()
			if len(b.pending) == 0 {
				break
			}
			batch = b.take(batch[:0])
			b.mu.Unlock()
		}
		b.flying--
		if b.closed {
			b.mu.Unlock()
			return
		}
		b.idle = append(b.idle, w)
		b.mu.Unlock()
	}
}

// take moves up to maxBatch queued calls to batch, oldest first (with a
// test clock, only those with the first one's now). b.mu is held.
func (b *batcher) take(batch []*call) []*call {
	if !b.testClock {
		k := min(len(b.pending), b.maxBatch)
		batch = append(batch, b.pending[:k]...)
		rest := copy(b.pending, b.pending[k:])
		clear(b.pending[rest:])
		b.pending = b.pending[:rest]
		return batch
	}
	rest := b.pending[:0]
	first := b.pending[0]
	for _, c := range b.pending {
		if len(batch) < b.maxBatch && c.hasNow == first.hasNow && c.now == first.now {
			batch = append(batch, c)
		} else {
			rest = append(rest, c)
		}
	}
	clear(b.pending[len(rest):])
	b.pending = rest
	return batch
}

// send runs one round trip for the calls of batch whose callers still wait.
func (b *batcher) send(batch []*call) {
	now := nanotime()
	b.lag.refresh(now)
	lost := b.lag.lost.Load()
	live := batch[:0]
	for _, c := range batch {
		c.sentLost.Store(lost)
		c.sentAt.Store(now)
		if c.state.CompareAndSwap(callPending, callSent) {
			live = append(live, c)
		}
	}
	b.progressLost.Store(lost)
	b.progress.Store(now)
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), flightLimit)
	b.exec(ctx, live)
	cancel()
	b.progressLost.Store(b.lag.lost.Load())
	b.progress.Store(nanotime())
	for _, c := range live {
		c.done <- struct{}{}
	}
}

// untilOverdue is how long c may still wait before Redis counts as not
// answering it (<= 0: overdue): its round trip's time out, or, while it
// is queued, the time since a round trip was last sent or answered; either
// without the time this process was behind meanwhile (lagWatch), for at
// most behindLimit past the timeout.
func (b *batcher) untilOverdue(c *call) time.Duration {
	since, lost := b.progress.Load(), b.progressLost.Load()
	if c.state.Load() == callSent {
		since, lost = c.sentAt.Load(), c.sentLost.Load()
	}
	return overdueIn(b.timeout, nanotime(), since, b.lag.lost.Load()-lost)
}

// overdueIn is untilOverdue's arithmetic, in ns of nanotime: the timeout
// less the time waited since since, less the time lost (this process
// behind) meanwhile, which counts only until behindLimit past the timeout.
func overdueIn(timeout time.Duration, now, since, lost int64) time.Duration {
	waited := now - since
	if waited < int64(timeout+behindLimit) {
		waited -= min(lost, waited)
	}
	return timeout - time.Duration(waited)
}

// catchUp is called when c is overdue, before its caller gives up: it
// gives this process the chance to read an answer that Redis sent in
// time. It yields the processor to the goroutines that were ready before
// the caller (the worker that has an answer to read among them), then has
// lagWatch account for the time the process has been behind, the yield's
// own wait included: if that makes c no longer overdue, the caller waits
// again. While each yield still waits catchUpLag or more, it tries again;
// once one does not, it gives c's round trip catchUpLag more to deliver.
// It reports whether c was answered.
func (b *batcher) catchUp(ctx context.Context, c *call) bool {
	for range catchUpRounds {
		start := nanotime()
		runtime.Gosched()
		if c.answered() {
			return true
		}
		yielded := nanotime() - start
		b.lag.observe(yielded)
		b.lag.check()
		if b.untilOverdue(c) > 0 {
			return false
		}
		if yielded < int64(catchUpLag) {
			break // the process keeps up: no answer is waiting to be read
		}
	}
	runtime.Gosched()
	c.timer.Reset(catchUpLag)
	select {
	case <-c.done:
		return true
	case <-ctx.Done():
	case <-c.timer.C:
	}
	return false
}

// close stops the workers, once they have sent what was submitted.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	for _, w := range b.idle {
		w.wake <- nil
	}
	b.idle = nil
	b.mu.Unlock()
	b.wg.Wait()
	b.nodesMu.Lock()
	nodes := b.nodes
	b.nodesMu.Unlock()
	for _, nb := range nodes {
		nb.close()
	}
}

// group is one command of a round trip: a script call deciding calls, or
// a DEL.
type group struct {
	calls []*call
	cross bool // the cross-slot form
	eval  bool // send the source (EVAL): the server lacked the script
	cmd   *redis.Cmd
}

// exec runs the calls of one round trip and fills in their answers.
func (b *batcher) exec(ctx context.Context, calls []*call) {
	b.run(ctx, b.group(ctx, calls))
}

// run sends groups, then again those the server could not run as sent,
// and fills in their calls' answers.
func (b *batcher) run(ctx context.Context, groups []*group) {
	for round := 0; len(groups) > 0; round++ {
		for _, g := range groups {
			g.cmd = b.command(ctx, g)
		}
		b.process(ctx, groups)
		var again []*group
		for _, g := range groups {
			err := g.cmd.Err()
			switch {
			case err == nil || round >= 3 || g.calls[0].del:
			case isNoScript(err) && !g.eval:
				// EVAL runs the script from source and caches it on
				// that server, so the next EVALSHA there succeeds.
				g.eval = true
				again = append(again, g)
				continue
			case g.cross && isClusterRefusal(err):
				// Nothing was written (every read comes before any
				// write): decide the keys one by one, through the
				// cluster client's MOVED and ASK handling.
				if isCompileError(err) {
					b.noCross.Store(true)
				}
				again = append(again, perKey(g.calls)...)
				continue
			}
			b.answer(g)
		}
		groups = again
	}
}

// group splits the calls of a round trip into commands, each call's
// order kept among the calls of its key.
func (b *batcher) group(ctx context.Context, calls []*call) []*group {
	var groups []*group
	var decisions []*call
	for _, c := range calls {
		if c.del {
			groups = append(groups, &group{calls: []*call{c}})
		} else {
			decisions = append(decisions, c)
		}
	}
	if len(decisions) == 0 {
		return groups
	}
	switch {
	case b.route == routeOne:
		return append(groups, &group{calls: decisions})
	case b.route == routeNode && !b.noCross.Load():
		return append(groups, &group{calls: decisions, cross: distinctKeys(decisions) > 1})
	case b.route == routeCluster && !b.noCross.Load():
		byNode := make(map[*redis.Client]*group)
		var order []*group
		for _, c := range decisions {
			node, err := b.cluster.MasterForKey(ctx, c.key)
			if err != nil {
				node = nil // the cluster client reports the error on the call
			} else {
				b.routed.Store(true) // from now on submit routes by node
			}
			g := byNode[node]
			if g == nil {
				g = &group{}
				byNode[node] = g
				order = append(order, g)
			}
			g.calls = append(g.calls, c)
		}
		for _, g := range order {
			g.cross = distinctKeys(g.calls) > 1
		}
		return append(groups, order...)
	default:
		return append(groups, perKey(decisions)...)
	}
}

// perKey returns one group per key of calls, in order.
func perKey(calls []*call) []*group {
	byKey := make(map[string]*group)
	var order []*group
	for _, c := range calls {
		g := byKey[c.key]
		if g == nil {
			g = &group{}
			byKey[c.key] = g
			order = append(order, g)
		}
		g.calls = append(g.calls, c)
	}
	return order
}

func distinctKeys(calls []*call) int {
	first := calls[0].key
	for _, c := range calls[1:] {
		if c.key != first {
			return 2
		}
	}
	return 1
}

// command builds the Redis command of g. A fresh one every time: a client
// hook may keep a command after it was answered.
func (b *batcher) command(ctx context.Context, g *group) *redis.Cmd {
	calls := g.calls
	if calls[0].del {
		cmd := redis.NewCmd(ctx, "del", calls[0].key)
		cmd.SetFirstKeyPos(1)
		return cmd
	}
	s := b.scripts.keyed
	if g.cross {
		s = b.scripts.cross
	}
	// The distinct policies given with the calls, usually none.
	var given []*pspec
	for _, c := range calls {
		if c.ps != nil && !slices.Contains(given, c.ps) {
			given = append(given, c.ps)
		}
	}
	m := len(calls)
	size := 6 + 2*m
	if len(given) > 0 {
		size += m + len(given)*len(given[0].args)
	}
	args := make([]any, 0, size)
	if g.eval {
		args = append(args, "eval", s.src)
	} else {
		args = append(args, "evalsha", s.sha)
	}
	if g.cross {
		args = append(args, 0) // the keys are arguments
	} else {
		args = append(args, m)
	}
	for _, c := range calls {
		args = append(args, c.key)
	}
	for _, c := range calls {
		args = append(args, c.n)
	}
	if len(given) > 0 {
		for _, c := range calls {
			args = append(args, slices.Index(given, c.ps)+1) // 0: the limiter's own
		}
		for _, ps := range given {
			args = append(args, ps.args...)
		}
	}
	args = append(args, len(given))
	if c := calls[0]; c.hasNow {
		args = append(args, strconv.FormatInt(c.now/1000, 10), c.now%1000)
	} else {
		args = append(args, "", "")
	}
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3) // a cluster client routes by the first key
	return cmd
}

// process sends the commands of groups: one alone, several as a pipeline
// (which a cluster client splits by node and sends to each at once).
func (b *batcher) process(ctx context.Context, groups []*group) {
	if len(groups) == 1 || b.route == routeNode {
		// One node: rather than a cluster pipeline, which sends from a
		// goroutine per node that a busy process runs late, one command
		// after the other (there is one but for a Reset, or after a
		// refusal).
		for _, g := range groups {
			_ = b.rdb.Process(ctx, g.cmd)
		}
		return
	}
	if len(groups) == 1 {
		_ = b.rdb.Process(ctx, groups[0].cmd)
		return
	}
	pipe := b.rdb.Pipeline()
	for _, g := range groups {
		_ = pipe.Process(ctx, g.cmd)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
}

// answer fills in the answers of g's calls from its command.
func (b *batcher) answer(g *group) {
	err := g.cmd.Err()
	if err == nil && !g.calls[0].del {
		err = parseReplies(g.cmd.Val(), g.calls)
	}
	for _, c := range g.calls {
		c.err = err
	}
}

// isClusterRefusal reports whether err is Redis Cluster refusing a
// cross-slot script call before it changed anything: a key that another
// node serves or that is moving, or a server without the flag.
func isClusterRefusal(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false // no reply from the server: the script may have run
	}
	msg := err.Error()
	for _, prefix := range []string{"MOVED", "ASK", "TRYAGAIN", "CROSSSLOT"} {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return strings.Contains(msg, "non local key") || isCompileError(err)
}

// isCompileError reports whether err is a server refusing the cross-slot
// form's flag (Redis before 7.0).
func isCompileError(err error) bool {
	return strings.Contains(err.Error(), "Error compiling script") || strings.Contains(err.Error(), "shebang")
}
