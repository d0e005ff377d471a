// Package transport sends redisstore's calls to Redis: through a client of
// the limiter's own, many concurrent calls in one script call (group
// commit), and on a Cluster one queue per node.
package transport

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/redisstore/internal/script"
)

// Sender runs calls on Redis.
type Sender interface {
	// Send runs c, which the caller made at c.Deadline less the timeout.
	// It returns nil once c has its answer (Res, Used, or Err, Redis's
	// error), or the error of a call given up: ErrClosed, ctx's error or
	// ErrDeadline, and then c must not be released. An answer that is
	// there when the caller gives up, even at the same instant, wins.
	Send(ctx context.Context, c *Call) error
	// Ping sends PING through the limiter's own client.
	Ping(ctx context.Context) error
	// Close waits for the round trips in flight (and the calls queued
	// behind them), refuses new calls and closes the limiter's own client.
	Close()
}

// Options are what NewSender needs besides the client.
type Options struct {
	Script     script.Script
	Timeout    time.Duration
	MaxBatch   int  // calls one script call decides at most
	MaxFlights int  // round trips in flight at once
	TestClock  bool // calls carry their own now: batch only equal ones
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

// NewSender returns the Sender of a limiter on rdb: a single node, Sentinel,
// Cluster or Ring client, which it rebuilds as the limiter's own (see
// ownClient); a client of another type is used as it is.
func NewSender(rdb redis.UniversalClient, o Options) Sender {
	q := new(queueClock)
	own, ok := ownClient(rdb, q)
	c := &conf{Options: o, rdb: own, closeRDB: ok, queueing: q}
	switch rc := own.(type) {
	case *redis.Client:
		return &batcher{conf: c, route: routeOne}
	case *redis.ClusterClient:
		c.cluster = rc
		return &router{batcher: &batcher{conf: c, route: routeCluster}, nodes: make(map[*redis.Client]*batcher)}
	}
	return &batcher{conf: c, route: routePerKey}
}

// Waiting returns how many calls wait in s's queues for a round trip, for
// tests.
func Waiting(s Sender) int {
	var bs []*batcher
	switch s := s.(type) {
	case *batcher:
		bs = []*batcher{s}
	case *router:
		bs = append(s.nodeBatchers(), s.batcher)
	}
	n := 0
	for _, b := range bs {
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
