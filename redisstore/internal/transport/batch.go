package transport

import (
	"context"
	"sync"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// maxBatch bounds the calls one script call decides: about a millisecond
// of Redis time, for which the server serves nobody else (measured in
// benchmarks/README.md).
const maxBatch = 512

// batcher sends a limiter's calls to Redis, many concurrent decisions in
// one script call (one TIME, one Lua entry for all of them).
//
// Group commit, on the callers' own goroutines: at most MaxFlights round
// trips are in flight at once. A call that finds fewer in flight sends its
// own round trip; the calls that arrive while all are in flight queue up,
// and when a round trip ends its sender sends everything queued by then
// (up to maxBatch) as its next round trip, or hands the flight to the
// oldest queued call's caller (see fly). A call still queued half its
// timeout in sends itself, beyond MaxFlights (see escape). So a lone call
// costs one round trip and no hand-off, and under load every round trip
// carries what queued up during the previous one: the busier, the larger
// the batches and the less Redis time per decision. No goroutine of the
// batcher's own: a goroutine handed each lone call cost about 14 µs of its
// 80 µs round trip (benchmarks/README.md).
//
// The timeout is the clock: a call has until its deadline (when it was
// made, plus the timeout), queued or sent. The round trip carries the
// sender's deadline in its context, and the limiter's client (NewSender)
// applies a context's deadline to its sockets, so it returns by then
// without a second goroutine watching it.
type batcher struct {
	*conf
	route route // routeNode for a Cluster node's batcher

	mu      sync.Mutex
	pending []*Call // FIFO
	flying  int     // round trips in flight
	closed  bool
	flights sync.WaitGroup // one per flight, for Close
}

// Send runs c: it sends c's round trip itself when fewer than MaxFlights
// are in flight, else queues c until a round trip carries it, the caller
// is handed the flight, or half of c's timeout has passed (escape).
func (b *batcher) Send(ctx context.Context, c *Call) error {
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return core.ErrClosed
	case b.flying < b.MaxFlights:
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
	return b.wait(ctx, c)
}

// wait waits for queued c's answer, or for its caller's turn to send.
func (b *batcher) wait(ctx context.Context, c *Call) error {
	// Half the timeout in, a call still queued sends itself (see escape);
	// at the deadline it gives up.
	c.timer.Reset(time.Until(c.Deadline) - b.Timeout/2)
	err := c.await(ctx)
	if err == ErrDeadline {
		if b.escape(c) {
			b.fly(ctx, c)
			return nil
		}
		c.timer.Reset(time.Until(c.Deadline))
		err = c.await(ctx)
	}
	switch {
	case err == nil: // answered, or handed the flight
		if c.state.Load() == callLead {
			b.fly(ctx, c)
		}
		return nil
	case c.state.CompareAndSwap(callPending, callAbandoned):
		return err // never sent
	case c.state.Load() == callLead:
		b.mu.Lock()
		b.handOn() // the others may still be in time
		b.mu.Unlock()
		return err
	}
	select {
	case <-c.done: // answered meanwhile: the answer wins
		return nil
	default:
		return err
	}
}

// await waits for c's signal (nil), ctx's end (its error) or c's timer
// (ErrDeadline).
func (c *Call) await(ctx context.Context) error {
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.timer.C:
		return ErrDeadline
	}
}

// escape makes c, queued for half its timeout, a flight of its own beyond
// MaxFlights, and reports whether it did: c is still queued, so the round
// trips in flight have stalled (their senders wait for a CPU behind
// thousands of runnable goroutines on a saturated process), while c's
// caller, woken by its timer, runs next. Without it, every call queued
// behind a stalled flight misses its deadline unsent.
func (b *batcher) escape(c *Call) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || !time.Now().Before(c.Deadline) || !c.state.CompareAndSwap(callPending, callSent) {
		return false
	}
	b.flying++
	b.flights.Add(1)
	return true
}

// fly sends the round trip of own, the call of the flight's holder, with
// the calls queued behind it; then, while calls are queued and at least
// half of own's timeout is left, theirs too: the holder is running, where
// a goroutine woken to send them would first wait its turn in the run
// queue, longer than a round trip on a saturated process. Then it hands
// the flight on. own's deadline bounds every round trip (the calls queued
// behind own were made after it); alone, ctx too. A caller whose context
// ends before own's deadline must return by then, and the calls of others
// by theirs: it sends its own call alone.
func (b *batcher) fly(ctx context.Context, own *Call) {
	lone, cancel := context.WithDeadline(ctx, own.Deadline)
	defer cancel()
	d, ok := ctx.Deadline()
	alone := ok && d.Before(own.Deadline)
	var shared context.Context // for round trips that carry others' calls
	batch := []*Call{own}
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
				shared, cancel = context.WithDeadline(context.WithoutCancel(ctx), own.Deadline)
				defer cancel()
			}
			rt = shared
		}
		b.exec(rt, batch)
		for _, c := range batch {
			if c != own {
				c.done <- struct{}{}
			}
		}
		clear(batch)
		b.mu.Lock()
		var next *Call
		if !alone && time.Until(own.Deadline) >= b.Timeout/2 {
			next = b.pop(callSent)
		}
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
func (b *batcher) pop(state int32) *Call {
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
	if b.flying <= b.MaxFlights { // not an escaped flight's
		if c := b.pop(callLead); c != nil {
			c.done <- struct{}{}
			return
		}
	}
	b.flying--
	b.flights.Done()
}

// take moves up to maxBatch queued calls to batch (which holds the
// flight's own call), oldest first, skipping those given up, and only
// those with the first one's now: a script call has one (calls differ
// only with a test clock). b.mu is held.
func (b *batcher) take(batch []*Call) []*Call {
	first := batch[0]
	rest := b.pending[:0]
	for _, c := range b.pending {
		switch {
		case len(batch) >= maxBatch || c.Now != first.Now:
			rest = append(rest, c)
		case c.state.CompareAndSwap(callPending, callSent):
			batch = append(batch, c)
		}
	}
	clear(b.pending[len(rest):])
	b.pending = rest
	return batch
}

// stop refuses new calls and waits for the round trips in flight.
func (b *batcher) stop() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.flights.Wait()
}
