// Package transport sends redisstore's calls to Redis: through a client of
// the limiter's own, many concurrent calls in one script call (group
// commit), and on a Cluster one queue per node.
package transport

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/redisstore/internal/script"
)

// Options are what NewSender needs besides the client.
type Options struct {
	Script     script.Script
	Timeout    time.Duration
	MaxFlights int // round trips in flight at once
}

// conf is what the batchers of one limiter share.
type conf struct {
	Options
	rdb      redis.UniversalClient // the limiter's own client
	closeRDB bool                  // NewSender made rdb: Close closes it
	cluster  *redis.ClusterClient  // the same client, when it is one
	noCross  atomic.Bool           // the server rejected the cross-slot form: per key
	routed   atomic.Bool           // a Cluster client knows the slots: per node

	queueing *queueClock // when a call last queued, for the readyConns
}

// Sender runs a limiter's calls on Redis through its batcher, whose route
// follows the client's type. On a Cluster, once the client knows the
// slots, a call goes to its node's batcher (routeNode) instead, so that
// each node's calls go together and wait for that node alone; until then,
// and after a server rejected the cross-slot form, to the batcher of
// routeCluster.
type Sender struct {
	*batcher
	mu    sync.Mutex
	nodes map[*redis.Client]*batcher
}

// NewSender returns the Sender of a limiter on rdb: a single node, Sentinel,
// Cluster or Ring client, which it rebuilds as the limiter's own from rdb's
// options (see tune); a client of another type is used as it is.
func NewSender(rdb redis.UniversalClient, o Options) *Sender {
	c := &conf{Options: o, closeRDB: true, queueing: new(queueClock)}
	route := routePerKey
	switch rc := rdb.(type) {
	case *redis.Client:
		c.rdb, route = redis.NewClient(tune(*rc.Options(), c.queueing)), routeOne
	case *redis.ClusterClient:
		c.cluster = redis.NewClusterClient(tune(*rc.Options(), c.queueing))
		c.rdb, route = c.cluster, routeCluster
	case *redis.Ring:
		c.rdb = redis.NewRing(tune(*rc.Options(), c.queueing))
	default:
		c.rdb, c.closeRDB = rdb, false // used as it is
	}
	if c.closeRDB {
		for _, h := range OwnHooks(rdb) {
			c.rdb.AddHook(h)
		}
	}
	return &Sender{batcher: &batcher{conf: c, route: route}, nodes: make(map[*redis.Client]*batcher)}
}

// Send runs c, which the caller made at c.Deadline less the timeout, on
// its node's batcher when the slots are known (which needs no round trip).
// It returns nil once c has its answer (Res, Used, or Err, Redis's error),
// or the error of a call given up: core.ErrClosed, ctx's error or ErrDeadline,
// and then c must not be released. An answer that is there when the caller
// gives up, even at the same instant, wins.
func (s *Sender) Send(ctx context.Context, c *Call) error {
	if s.routed.Load() && !s.noCross.Load() {
		if n, err := s.cluster.MasterForKey(ctx, c.Key); err == nil {
			return s.node(n).Send(ctx, c)
		}
	}
	return s.batcher.Send(ctx, c)
}

// node returns the batcher of a Cluster node, made on first use; once s
// is closed, s's own, which refuses every call.
func (s *Sender) node(n *redis.Client) *batcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nodes == nil {
		return s.batcher
	}
	nb := s.nodes[n]
	if nb == nil {
		nb = &batcher{conf: s.conf, route: routeNode}
		s.nodes[n] = nb
	}
	return nb
}

// nodeBatchers returns the nodes' batchers made so far.
func (s *Sender) nodeBatchers() []*batcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.nodes))
}

// Ping sends PING through the limiter's own client.
func (s *Sender) Ping(ctx context.Context) error { return s.rdb.Ping(ctx).Err() }

// Close waits for the round trips in flight (and the calls queued behind
// them), refuses new calls and closes the limiter's own client. The
// batcher of the Sender's route stops first: on a Cluster its round trips
// in flight may make node batchers, which then stop too.
func (s *Sender) Close() {
	s.batcher.stop()
	s.mu.Lock()
	nodes := s.nodes
	s.nodes = nil // no node batcher is made after it: node returns s's
	s.mu.Unlock()
	for _, nb := range nodes {
		nb.stop()
	}
	if s.closeRDB {
		_ = s.rdb.Close()
	}
}

// Waiting returns how many calls wait in s's queues for a round trip, for
// tests.
func Waiting(s *Sender) int {
	n := 0
	for _, b := range append(s.nodeBatchers(), s.batcher) {
		b.mu.Lock()
		for _, c := range b.pending {
			if c.state.Load() == callPending {
				n++
			}
		}
		b.mu.Unlock()
	}
	return n
}
