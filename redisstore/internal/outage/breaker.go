// Package outage is what redisstore does while Redis fails: the circuit
// breaker in front of Redis, and the local fallback that decides the calls
// Redis did not.
package outage

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// State is the state of the breaker.
type State uint8

// The states of the breaker, in redisstore.BreakerState's order.
const (
	Closed   State = iota // calls go to Redis
	Open                  // Redis is not called
	HalfOpen              // one call, the probe, is on its way to Redis
)

// Change is one change of the breaker's state; Err is the failure that
// opened it, nil for the other changes.
type Change struct {
	From, To State
	Err      error
}

// Breaker is a circuit breaker in front of Redis.
//
// Closed: every call goes to Redis; threshold consecutive failed round
// trips open it (Done). Open: no call goes to Redis until interval has
// passed; then the first call to arrive becomes the probe (half-open).
// Half-open: the probe is the only call to Redis; its success closes the
// breaker, its failure opens it again for another interval, and a probe
// that says nothing about Redis (its caller gave up) leaves it half-open
// for the next call to probe.
//
// The request path takes no lock: in the closed state, Admit is one atomic
// load and a success one more; in the open state, a clock reading. Only
// failures, probes and changes take mu. Each change also starts a new
// generation (word's upper bits), so that the outcome of a call admitted
// before a change (one in flight when the breaker opened, say) never
// counts after it.
type Breaker struct {
	threshold int32
	interval  int64 // ns
	now       func() int64
	hook      func(Change)
	cause     atomic.Pointer[error] // the failure that last opened it

	word    atomic.Uint64 // generation<<2 | state; written under mu
	fails   atomic.Int32  // closed: consecutive failures; written under mu
	probeAt atomic.Int64  // open: when a probe may go
	probing atomic.Bool   // half-open: the probe is out; set under mu

	mu      sync.Mutex
	lastRT  uint64   // the round trip of the last failure counted; under mu
	changes []Change // not yet given to hook; under mu
	calling sync.Mutex
}

// NewBreaker returns a closed breaker that threshold consecutive failed
// round trips open, probing every interval on the clock now (ns), and
// calls hook with each change: one at a time, in order, on the goroutine
// of a call (see report).
func NewBreaker(threshold int, interval time.Duration, now func() int64, hook func(Change)) *Breaker {
	return &Breaker{threshold: int32(min(threshold, 1<<30)), interval: int64(interval), now: now, hook: hook}
}

// Ticket is what Admit hands a call sent to Redis: the breaker's word at
// that time, so that Done can tell whether the call's outcome still
// counts.
type Ticket struct {
	word  uint64
	probe bool
}

// State returns the breaker's state.
func (b *Breaker) State() State { return State(b.word.Load() & 3) }

// Admit reports whether a call may go to Redis now.
func (b *Breaker) Admit() (Ticket, bool) {
	w := b.word.Load()
	switch {
	case State(w&3) == Closed:
		return Ticket{word: w}, true
	case !b.mayProbe(w):
		return Ticket{}, false
	}
	b.mu.Lock()
	if w = b.word.Load(); !b.mayProbe(w) { // another call took the probe, or it closed
		b.mu.Unlock()
		return Ticket{}, false
	}
	if State(w&3) == Open {
		w = b.change(w, HalfOpen, nil)
	}
	b.probing.Store(true)
	b.mu.Unlock()
	b.report()
	return Ticket{word: w, probe: true}, true
}

// mayProbe reports whether a call may probe Redis now, the breaker's word
// being w: open for its interval, or half-open with no probe out.
func (b *Breaker) mayProbe(w uint64) bool {
	s := State(w & 3)
	return s == Open && b.now() >= b.probeAt.Load() || s == HalfOpen && !b.probing.Load()
}

// Done records the outcome of a call Admit let through: err nil for a
// success; else rt is the round trip that Redis failed, the calls of one
// counting as one failure, or 0 for a call that says nothing about Redis
// (its caller or Close ended it, or this process did not send it in time).
func (b *Breaker) Done(t Ticket, rt uint64, err error) {
	if err == nil && !t.probe && b.fails.Load() == 0 {
		return // the request path: nothing to change
	}
	b.mu.Lock()
	w := b.word.Load()
	switch {
	case w != t.word: // a change came in between: the outcome no longer counts
	case err == nil && t.probe:
		b.change(w, Closed, nil)
	case err == nil:
		b.fails.Store(0)
	case rt == 0: // the probe's, if t is it, goes to the next call; else false already
		b.probing.Store(false)
	case t.probe || rt != b.lastRT:
		b.lastRT = rt
		if !t.probe && b.fails.Load()+1 < b.threshold {
			b.fails.Add(1)
			break
		}
		cause := err // a copy: taking err's address would move it to the heap on every call
		b.cause.Store(&cause)
		now := b.now()
		b.probeAt.Store(now + min(b.interval, math.MaxInt64-now)) // saturated: an interval of ages waits
		b.change(w, Open, err)
	}
	b.mu.Unlock()
	b.report() // off the request path: a failure, or a probe's outcome
}

// Refused returns, while the breaker is open, how long until it lets a
// probe through, and the failure that last opened it (nil if none).
func (b *Breaker) Refused() (retry time.Duration, cause error) {
	if c := b.cause.Load(); c != nil {
		cause = *c
	}
	if b.State() == Open {
		retry = time.Duration(max(b.probeAt.Load()-b.now(), 0))
	}
	return retry, cause
}

// change moves the breaker from the state in w to to, under mu, and
// queues the change for the hook. It returns the new word.
func (b *Breaker) change(w uint64, to State, err error) uint64 {
	b.fails.Store(0)
	b.probing.Store(false)
	next := (w>>2+1)<<2 | uint64(to)
	b.word.Store(next)
	b.changes = append(b.changes, Change{From: State(w & 3), To: to, Err: err})
	return next
}

// report gives the queued changes to the hook, in order, one call at a
// time. A goroutine that finds another one calling the hook leaves its
// changes to it (which also lets the hook call the limiter without
// deadlocking); the check after unlocking catches a change queued just
// before.
func (b *Breaker) report() {
	for b.calling.TryLock() {
		b.drain()
		b.mu.Lock()
		more := len(b.changes) > 0
		b.mu.Unlock()
		if !more {
			return
		}
	}
}

// drain calls the hook for every queued change; the caller holds calling,
// which drain releases, even when the hook panics.
func (b *Breaker) drain() {
	defer b.calling.Unlock()
	for {
		b.mu.Lock()
		if len(b.changes) == 0 {
			b.mu.Unlock()
			return
		}
		c := b.changes[0]
		b.changes = b.changes[1:]
		b.mu.Unlock()
		b.hook(c)
	}
}
