// Package transport sends redisstore's calls to Redis: through a client of
// the limiter's own, many concurrent calls in one script call (group
// commit), and on a Cluster one queue per node.
package transport

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
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

// Options are what New needs besides the client.
type Options struct {
	Script     script.Script
	Timeout    time.Duration
	MaxBatch   int  // calls one script call decides at most
	MaxFlights int  // round trips in flight at once
	TestClock  bool // calls carry their own now: batch only equal ones
}

// New returns the Sender of a limiter on rdb: a single node, Sentinel,
// Cluster or Ring client, which it rebuilds as the limiter's own (see
// ownClient); a client of another type is used as it is.
func New(rdb redis.UniversalClient, o Options) Sender {
	q := new(queueClock)
	own, ok := ownClient(rdb, q)
	c := &conf{Options: o, rdb: own, route: routePerKey, queueing: q}
	if ok {
		c.own = own
	}
	switch rc := own.(type) {
	case *redis.Client:
		c.route = routeOne
	case *redis.ClusterClient:
		c.route, c.cluster = routeCluster, rc
		return &cluster{batcher: &batcher{conf: c, route: routeCluster}}
	}
	return &batcher{conf: c, route: c.route}
}

// conf is what the batchers of one limiter share.
type conf struct {
	Options
	rdb     redis.UniversalClient // the limiter's own client
	own     redis.UniversalClient // the same, when New made it: closed by Close
	cluster *redis.ClusterClient  // the same client, when it is one
	route   route
	noCross atomic.Bool // the server rejected the cross-slot form: per key
	routed  atomic.Bool // a Cluster client knows the slots: per node

	queueing *queueClock // when a call last queued, for the readyConns
}

// Call is one decision or Reset on its way to Redis. The caller fills in
// the request; the round trip that carries it fills in the answer.
type Call struct {
	script.Call
	Del      bool      // Reset: DEL Key
	Deadline time.Time // when the call was made, plus the timeout
	Err      error     // Redis's error, or the round trip's

	rt    atomic.Uint64 // its round trip (roundTrips), once it starts; 0: not sent
	state atomic.Int32
	done  chan struct{} // capacity 1: answered, or (callLead) sender
	timer *time.Timer   // the caller's, reused with the call
}

const (
	callPending   = iota // queued, not yet sent
	callLead             // queued, handed the flight: its caller sends
	callSent             // taken by a round trip: it will answer
	callAbandoned        // the caller gave up before it was sent: skipped
)

// RoundTrip returns the number of the round trip that carried c: the
// breaker counts the calls of one failed round trip as one failure. 0: c
// was not sent, or its command was never written (see isUnsent).
func (c *Call) RoundTrip() uint64 { return c.rt.Load() }

var callPool = sync.Pool{New: func() any {
	c := &Call{done: make(chan struct{}, 1), timer: time.NewTimer(time.Hour)}
	c.timer.Stop()
	return c
}}

// NewCall returns an empty call.
func NewCall() *Call {
	c := callPool.Get().(*Call)
	c.state.Store(callPending)
	return c
}

// Release recycles a call whose answer the caller has read. A call the
// caller gave up on is never released: a round trip may still write to
// it.
func (c *Call) Release() {
	c.timer.Stop()
	*c = Call{done: c.done, timer: c.timer}
	callPool.Put(c)
}

// The errors of Send for a closed Sender and a call whose deadline passed.
var (
	ErrClosed   = errors.New("closed")
	ErrDeadline = errors.New("deadline")
)

// roundTrips numbers the round trips of all batchers, from 1.
var roundTrips atomic.Uint64

// IsTimeout reports whether err is a round trip running out of time:
// a socket deadline, or a context's while go-redis waited for a
// connection.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// isUnsent reports whether err says a command was never written because
// its deadline had passed: go-redis checks the context before it takes a
// connection (a deadline passing after that is the socket's,
// os.ErrDeadlineExceeded), and a readyConn refuses to write (errNotSent).
// Redis never saw it.
func isUnsent(err error) bool {
	return errors.Is(err, errNotSent) || errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded)
}
