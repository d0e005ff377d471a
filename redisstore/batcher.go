package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/redisstore/internal/script"
)

// batcher sends a limiter's calls to Redis, many concurrent decisions in
// one script call (one TIME, one Lua entry for all of them).
//
// Group commit, on the callers' own goroutines: at most maxFlights round
// trips are in flight at once. A call that finds fewer in flight sends its
// own round trip; the calls that arrive while all are in flight queue up,
// and when a round trip ends its sender sends everything queued by then
// (up to maxBatch) as its next round trip, or hands the flight to the
// oldest queued call's caller (see fly). A call still queued half its
// timeout in sends itself, beyond maxFlights (see escape). So a lone call costs one round
// trip and no hand-off, and under load every round trip carries what
// queued up during the previous one: the busier, the larger the batches
// and the less Redis time per decision. No goroutine of the batcher's own: a goroutine handed
// each lone call cost about 14 µs of its 80 µs round trip on the machine of
// benchmarks/README.md.
//
// The timeout is the clock: a call has until its deadline (when it was
// made, plus the timeout), queued or sent. The round trip carries the
// sender's deadline in its context, and the limiter's client (ownClient)
// applies a context's deadline to its sockets, so it returns by then
// without a second goroutine watching it.
type batcher struct {
	rdb        redis.UniversalClient // the limiter's own client (ownClient)
	cluster    *redis.ClusterClient  // the same client, when it is one
	route      route
	scripts    script.Script
	timeout    time.Duration
	maxBatch   int
	maxFlights int
	testClock  bool        // calls carry their own now: batch only equal ones
	noCross    atomic.Bool // the server rejected the cross-slot form: per key
	queueing   *queueClock // shared by a Cluster's node batchers and the connections (readyConn)

	mu      sync.Mutex
	pending []*call // FIFO
	flying  int     // round trips in flight
	closed  bool
	flights sync.WaitGroup // one per flight, for close

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
	// slots, a call goes to its node's batcher (routeNode); until then,
	// one script call per node, in a cluster pipeline.
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
)

// ownClient returns the client the limiter sends its round trips with:
// one built from rdb's options that applies a context's deadline to its
// sockets (ContextTimeoutEnabled), retries nothing (a retry would come
// after the deadline, or run a script twice) and dials once (a refused
// connection is an error at once, not after go-redis's back-off), with a
// pool of its own that keeps no idle connections beyond those used, and
// whose TCP connections are readyConns. ok is false for a client of
// another type, used as it is.
func ownClient(rdb redis.UniversalClient, queueing *queueClock) (own redis.UniversalClient, ok bool) {
	switch c := rdb.(type) {
	case *redis.Client:
		o := *c.Options()
		o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries = true, -1, 1
		o.ReadTimeout, o.WriteTimeout = -1, -1 // the context's deadline alone
		o.MinIdleConns = 0
		o.Dialer = readyDialer(o.Dialer, &o, queueing)
		// rdb's push processor already holds rdb's handlers: ours gets
		// its own (sharing it makes go-redis log a failure to register
		// them), and no client-side cache, which EVALSHA never reads.
		o.PushNotificationProcessor, o.ClientSideCache, o.ClientSideCacheConfig = nil, nil, nil
		own = redis.NewClient(&o)
	case *redis.ClusterClient:
		o := *c.Options()
		o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries = true, -1, 1
		o.ReadTimeout, o.WriteTimeout = -1, -1
		o.MinIdleConns = 0
		if o.Dialer != nil || o.TLSConfig == nil {
			o.Dialer = readyDialer(o.Dialer, &redis.Options{DialTimeout: o.DialTimeout}, queueing)
		}
		own = redis.NewClusterClient(&o)
	case *redis.Ring:
		o := *c.Options()
		o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries = true, -1, 1
		o.ReadTimeout, o.WriteTimeout = -1, -1
		o.MinIdleConns = 0
		if o.Dialer != nil || o.TLSConfig == nil {
			o.Dialer = readyDialer(o.Dialer, &redis.Options{DialTimeout: o.DialTimeout}, queueing)
		}
		own = redis.NewRing(&o)
	default:
		return rdb, false
	}
	for _, h := range ownHooks(rdb) {
		own.AddHook(h)
	}
	return own, true
}

// readyDialer returns dial (nil: go-redis's own for o) with its TCP
// connections made readyConns.
func readyDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error), o *redis.Options, queueing *queueClock) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		dial = redis.NewDialer(o)
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if tcp, ok := conn.(*net.TCPConn); ok {
			return &readyConn{TCPConn: tcp, queueing: queueing}, nil
		}
		return conn, err
	}
}

// readyConn is a TCP connection that reads an answer as soon as this
// process runs the reader after the answer has arrived, however busy the
// process. A reader waiting for bytes is woken by the network poller,
// which a saturated process consults only every 10 ms and whose readied
// goroutines wait behind every other runnable one (hundreds of ms while
// thousands of HTTP connections open: benchmarks/README.md), while a
// timer's goroutine runs next. So Read waits for the poller in steps
// (pollFirst, doubling up to pollMost) and, woken by a step's timer,
// looks at the socket again; at the deadline it looks once more, so that
// an answer that reached this host in time is never a timeout. A step
// that finds nothing costs a timer and a system call.
//
// It does so only within a second of a call queueing for a round trip
// (queueing): a process that keeps up reads as any connection does, where
// the timers cost two callers about a fifth of their throughput
// (benchmarks/README.md).
type readyConn struct {
	*net.TCPConn
	rd, wd   time.Time   // the read and write deadlines; zero: none
	queueing *queueClock // when a call last queued
}

// queueClock is when a call of the limiter last queued for a round trip,
// in Unix ns, to a millisecond.
type queueClock struct{ at atomic.Int64 }

// queued records that a call queues now.
func (q *queueClock) queued() {
	if now := time.Now().UnixNano(); now-q.at.Load() > int64(time.Millisecond) {
		q.at.Store(now)
	}
}

// busy reports whether a call queued within the last second.
func (q *queueClock) busy() bool { return time.Now().UnixNano()-q.at.Load() < int64(time.Second) }

const (
	pollFirst = time.Millisecond
	pollMost  = 8 * time.Millisecond
)

func (c *readyConn) SetDeadline(t time.Time) error {
	c.rd, c.wd = t, t
	return c.TCPConn.SetDeadline(t)
}

func (c *readyConn) SetWriteDeadline(t time.Time) error {
	c.wd = t
	return c.TCPConn.SetWriteDeadline(t)
}

// Write writes nothing once the write deadline has passed, and says so
// (errNotSent): then Redis never saw the command.
func (c *readyConn) Write(p []byte) (int, error) {
	if !c.wd.IsZero() && !time.Now().Before(c.wd) {
		return 0, errNotSent
	}
	return c.TCPConn.Write(p)
}

// errNotSent is a command's deadline passing before it was written: a
// timeout (it wraps os.ErrDeadlineExceeded) that tells nothing about Redis.
var errNotSent = fmt.Errorf("deadline passed before the command was written: %w", os.ErrDeadlineExceeded)

func (c *readyConn) SetReadDeadline(t time.Time) error {
	c.rd = t
	return c.TCPConn.SetReadDeadline(t)
}

func (c *readyConn) Read(p []byte) (int, error) {
	if !c.queueing.busy() {
		return c.TCPConn.Read(p)
	}
	for step := pollFirst; ; step = min(2*step, pollMost) {
		until := time.Now().Add(step)
		last := !c.rd.IsZero() && !until.Before(c.rd)
		if last {
			until = c.rd
		}
		if err := c.TCPConn.SetReadDeadline(until); err != nil {
			return 0, err
		}
		n, err := c.TCPConn.Read(p)
		if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		if last {
			return c.late(p, err)
		}
	}
}

// late reads what is there once the deadline has passed, without waiting;
// err is the deadline's error, returned when nothing is.
func (c *readyConn) late(p []byte, err error) (int, error) {
	raw, rerr := c.TCPConn.SyscallConn()
	if rerr != nil || c.TCPConn.SetReadDeadline(time.Time{}) != nil {
		return 0, err
	}
	n := 0
	rerr = raw.Read(func(fd uintptr) bool {
		n, rerr = syscall.Read(int(fd), p)
		return true // never wait
	})
	_ = c.TCPConn.SetReadDeadline(c.rd)
	if rerr != nil || n <= 0 {
		return 0, err
	}
	return n, nil
}

// ownHooks returns the hooks to add to rdb's own client: tests see the
// limiter's commands through them.
var ownHooks = func(redis.UniversalClient) []redis.Hook { return nil }

// call is one decision or Reset on its way to Redis. The caller fills in
// the request; the round trip that carries it fills in the answer.
type call struct {
	script.Call
	del bool // Reset: DEL Key

	deadline time.Time     // when the call was made, plus the timeout
	rt       atomic.Uint64 // its round trip (roundTrips), once it starts; 0: not sent
	state    atomic.Int32
	err      error
	done     chan struct{} // capacity 1: answered, or (callLead) sender
	timer    *time.Timer   // the caller's, reused with the call
}

const (
	callPending   = iota // queued, not yet sent
	callLead             // queued, handed the flight: its caller sends
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
// caller gave up on is never recycled: a round trip may still write to it.
func putCall(c *call) {
	c.timer.Stop()
	*c = call{done: c.done, timer: c.timer}
	callPool.Put(c)
}

func newBatcher(rdb redis.UniversalClient, s script.Script, timeout time.Duration, maxBatch, maxFlights int, testClock bool, queueing *queueClock) *batcher {
	b := &batcher{rdb: rdb, scripts: s, timeout: timeout, maxBatch: maxBatch, maxFlights: maxFlights, testClock: testClock, route: routePerKey, queueing: queueing}
	switch c := rdb.(type) {
	case *redis.Client:
		b.route = routeOne
	case *redis.ClusterClient:
		b.route, b.cluster = routeCluster, c
	}
	return b
}

// node returns the batcher of a Cluster node, made on first use.
func (b *batcher) node(n *redis.Client) *batcher {
	b.nodesMu.Lock()
	defer b.nodesMu.Unlock()
	nb := b.nodes[n]
	if nb == nil {
		nb = &batcher{rdb: b.rdb, scripts: b.scripts, timeout: b.timeout, maxBatch: b.maxBatch, maxFlights: b.maxFlights, testClock: b.testClock, route: routeNode, cluster: b.cluster, queueing: b.queueing}
		if b.nodes == nil {
			b.nodes = make(map[*redis.Client]*batcher)
		}
		b.nodes[n] = nb
	}
	return nb
}

// do runs c: it sends c's round trip itself when fewer than maxFlights
// are in flight, else queues c until a round trip carries it, the caller
// is handed the flight, or half of c's timeout has passed (escape). It returns nil once c has its answer (in
// c.err too), or the error of a call given up: errClosed, ctx's error or
// errDeadline, and then c must not be recycled. An answer that is there
// when the caller gives up, even at the same instant, wins.
func (b *batcher) do(ctx context.Context, c *call) error {
	if b.route == routeCluster && b.routed.Load() && !b.noCross.Load() {
		// The slots are known, so this needs no round trip.
		if n, err := b.cluster.MasterForKey(ctx, c.Key); err == nil {
			return b.node(n).do(ctx, c)
		}
	}
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return errClosed
	case b.flying < b.maxFlights:
		b.flying++
		b.flights.Add(1)
		b.mu.Unlock()
		c.state.Store(callSent)
		b.fly(ctx, c)
		return nil
	}
	b.pending = append(b.pending, c)
	b.mu.Unlock()
	b.queueing.queued()
	// Half the timeout in, a call still queued sends itself (see
	// escape); at the deadline it gives up.
	c.timer.Reset(time.Until(c.deadline) - b.timeout/2)
	escaping := true
	var err error
wait:
	select {
	case <-c.done:
	case <-ctx.Done():
		err = ctx.Err()
	case <-c.timer.C:
		if escaping {
			escaping = false
			if b.escape(c) {
				b.fly(ctx, c)
				return nil
			}
			c.timer.Reset(time.Until(c.deadline))
			goto wait
		}
		err = errDeadline
	}
	if err != nil && c.state.CompareAndSwap(callPending, callAbandoned) {
		return err // never sent
	}
	if c.state.Load() == callLead {
		if err != nil {
			b.mu.Lock()
			b.handOn() // the others may still be in time
			b.mu.Unlock()
			return err
		}
		b.fly(ctx, c)
		return nil
	}
	if err != nil && !c.answered() {
		return err
	}
	return nil
}

// escape makes c, queued for half its timeout, a flight of its own beyond
// maxFlights, and reports whether it did: c is still queued, so the round
// trips in flight have stalled (their senders wait for a CPU behind
// thousands of runnable goroutines on a saturated process), while c's
// caller, woken by its timer, runs next. Without it, every call queued
// behind a stalled flight misses its deadline unsent.
func (b *batcher) escape(c *call) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || !time.Now().Before(c.deadline) || !c.state.CompareAndSwap(callPending, callSent) {
		return false
	}
	b.flying++
	b.flights.Add(1)
	return true
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

// errClosed and errDeadline are do's errors for a closed batcher and a
// call whose deadline passed.
var (
	errClosed   = errors.New("closed")
	errDeadline = errors.New("deadline")
)

// roundTrips numbers the round trips of all batchers, from 1: the breaker
// counts the calls of one failed round trip as one failure.
var roundTrips atomic.Uint64

// fly sends the round trip of own, the call of the flight's holder, with
// the calls queued behind it; then, while calls are queued and at least
// half of own's timeout is left, theirs too: the holder is running, where
// a goroutine woken to send them would first wait its turn in the run
// queue, longer than a round trip on a saturated process. Then it hands
// the flight on. own's deadline bounds every round trip (the calls
// queued behind own were made after it); alone, ctx too. A caller whose
// context has an earlier deadline sends only its own call.
func (b *batcher) fly(ctx context.Context, own *call) {
	lone, cancel := context.WithDeadline(ctx, own.deadline)
	defer cancel()
	// A caller whose context ends before its call's deadline must return
	// by then, and the calls of others by theirs: it sends its call alone.
	d, ok := ctx.Deadline()
	alone := ok && d.Before(own.deadline)
	var shared context.Context // for round trips that carry others' calls
	batch := []*call{own}
	for {
		if !alone {
			b.mu.Lock()
			batch = b.take(batch)
			b.mu.Unlock()
		}
		rt := lone
		if len(batch) > 1 || batch[0] != own {
			if shared == nil {
				var cancel context.CancelFunc
				shared, cancel = context.WithDeadline(context.WithoutCancel(ctx), own.deadline)
				defer cancel()
			}
			rt = shared
		}
		id := roundTrips.Add(1)
		for _, c := range batch {
			c.rt.Store(id)
		}
		b.exec(rt, batch)
		for _, c := range batch {
			if c != own {
				c.done <- struct{}{}
			}
		}
		clear(batch)
		b.mu.Lock()
		if alone || time.Until(own.deadline) < b.timeout/2 {
			b.handOn()
			b.mu.Unlock()
			return
		}
		next := b.pop(callSent)
		if next == nil {
			b.handOn()
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		batch = append(batch[:0], next)
	}
}

// pop takes the oldest queued call that is still waiting and moves it to
// state; nil when none is. b.mu is held.
func (b *batcher) pop(state int32) *call {
	for len(b.pending) > 0 {
		c := b.pending[0]
		b.pending[0] = nil
		b.pending = b.pending[1:]
		if c.state.CompareAndSwap(callPending, state) {
			return c
		}
	}
	b.pending = nil
	return nil
}

// handOn passes the flight to the oldest queued call, or ends it. b.mu is
// held.
func (b *batcher) handOn() {
	if b.flying <= b.maxFlights { // not an escaped flight's
		if c := b.pop(callLead); c != nil {
			c.done <- struct{}{}
			return
		}
	}
	b.flying--
	b.flights.Done()
}

// take moves up to maxBatch queued calls to batch (which holds the
// flight's own call), oldest first (with a test clock, only those with the
// first one's now), skipping those given up. b.mu is held.
func (b *batcher) take(batch []*call) []*call {
	first := batch[0]
	rest := b.pending[:0]
	for _, c := range b.pending {
		switch {
		case len(batch) >= b.maxBatch || b.testClock && c.Now != first.Now:
			rest = append(rest, c)
		case c.state.CompareAndSwap(callPending, callSent):
			batch = append(batch, c)
		}
	}
	clear(b.pending[len(rest):])
	b.pending = rest
	return batch
}

// close waits for the round trips in flight (and the calls queued behind
// them) and refuses new calls.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.flights.Wait()
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
			node, err := b.cluster.MasterForKey(ctx, c.Key)
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
		g := byKey[c.Key]
		if g == nil {
			g = &group{}
			byKey[c.Key] = g
			order = append(order, g)
		}
		g.calls = append(g.calls, c)
	}
	return order
}

func distinctKeys(calls []*call) int {
	first := calls[0].Key
	for _, c := range calls[1:] {
		if c.Key != first {
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
		cmd := redis.NewCmd(ctx, "del", calls[0].Key)
		cmd.SetFirstKeyPos(1)
		return cmd
	}
	f := &b.scripts.Keyed
	if g.cross {
		f = &b.scripts.Cross
	}
	return script.Command(ctx, f, calls, g.cross, g.eval)
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
		err = script.Parse(g.cmd.Val(), g.calls)
	}
	unsent := isUnsent(err)
	for _, c := range g.calls {
		c.err = err
		if unsent {
			c.rt.Store(0)
		}
	}
}

// isUnsent reports whether err says a command was never written because
// its deadline had passed: go-redis checks the context before it takes a
// connection (a deadline passing after that is the socket's,
// os.ErrDeadlineExceeded), and a readyConn refuses to write (errNotSent).
// Redis never saw it.
func isUnsent(err error) bool {
	return errors.Is(err, errNotSent) || errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded)
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

// isNoScript reports whether err says the server does not have the
// script cached (restart, failover, SCRIPT FLUSH).
func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}
