package transport

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-ratelimit/ratelimit/redisstore/internal/script"
)

// Call is one decision or Reset on its way to Redis. The caller fills in
// the request; the round trip that carries it fills in the answer.
type Call struct {
	script.Call
	Del      bool      // Reset: DEL Key and the keys of More
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
	// More's array is kept for the next call's parts.
	*c = Call{Call: script.Call{More: c.More[:0]}, done: c.done, timer: c.timer}
	callPool.Put(c)
}

// ErrDeadline is the error of Send for a call whose deadline passed.
var ErrDeadline = errors.New("deadline")

// roundTrips numbers the round trips of all batchers, from 1.
var roundTrips atomic.Uint64

// IsTimeout reports whether err is a round trip running out of time:
// a socket deadline, or a context's while go-redis waited for a
// connection.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
