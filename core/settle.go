package core

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Settler is a Limiter that settles a request's cost once it is known,
// after the request was admitted with an estimate: the tokens an LLM
// completion used, or nothing for a request that failed
// (nethttp.WithFinalCost does it for HTTP). The in-memory limiter and the
// Redis store are Settlers.
type Settler interface {
	Limiter
	// Settle charges key the difference between cost, the request's final
	// cost, and charged, what d, this limiter's admission of the request,
	// charged it, counted in units of cost under the policy the key is
	// under now:
	//
	//   - more, a debt, is charged at once and never refused, since the
	//     request was served: the key may go past its quota, and its next
	//     requests wait until the debt is paid off;
	//   - less, a refund, is given back never beyond what was charged (cost
	//     >= 0) nor past the window it was charged in: a fixed window gives
	//     back only while the window of d.At is the current one, and at most
	//     its count; a sliding window only from the bucket of d.At, while it
	//     still counts; a token bucket (and a metering leaky bucket) at most
	//     what is still taken, so never more than the charge would have left
	//     taken had it been cost from the start; a delaying leaky bucket
	//     as the token bucket, but only while no request was queued after
	//     the one settled (a request canceled during its Delay gets its
	//     turn back), and else nothing: the requests queued keep their
	//     turns.
	//
	// A policy made with AllOf settles each part, but for a delaying leaky
	// bucket, which gives nothing back there. It returns an error when d
	// is not an admission, charged <= 0 or cost < 0 (ErrInvalidCost), and a
	// remote store's errors.
	Settle(ctx context.Context, key string, d Decision, charged, cost int64) error
}

// ErrNotAdmitted: Settle got a decision that admitted nothing.
var ErrNotAdmitted = errors.New("core: settle: the decision admitted nothing, so nothing was charged")

// CheckSettle returns Settle's error for arguments it cannot settle, for
// every store alike.
func CheckSettle(d Decision, charged, cost int64) error {
	switch {
	case !d.Allowed:
		return ErrNotAdmitted
	case charged <= 0 || cost < 0:
		return fmt.Errorf("%w: settle charged=%d cost=%d (charged > 0, cost >= 0)", ErrInvalidCost, charged, cost)
	}
	return nil
}

// Settle is [Settler.Settle]. It takes the key's shard lock, as Set does.
func (l *MemoryLimiter) Settle(_ context.Context, key string, d Decision, charged, cost int64) error {
	if l.closed.Load() {
		return ErrClosed
	}
	if err := CheckSettle(d, charged, cost); err != nil {
		return err
	}
	r, err := l.resolve(d.Policy)
	if err != nil || cost == charged {
		return err
	}
	at := d.At.UnixNano()
	if r.delay {
		at += int64(d.ResetAfter) // the TAT the admission set: see gcraState.settle
	}
	l.keys.settle(r, key, l.clock(), at, cost-charged)
	return nil
}

// settle adds delta units, a debt (> 0) or a refund (< 0) of what was
// charged at `at`, to key's state at now (see Settler). A key no longer
// held (idle, evicted, Reset) has nothing to refund, and a debt starts it
// as a new key would start under r.
func (g *registry[S, P]) settle(r *rule, key string, now, at, delta int64) {
	sh, h, now := g.lock(key, now)
	defer sh.mu.Unlock()
	if _, e := lookup(sh.table.Load(), h, key); e != nil {
		P(&e.state).settle(e.rule, now, at, delta)
		return
	}
	if delta < 0 {
		return
	}
	e, _, room := g.newcomer(sh, h, r, now, true)
	if !room {
		if in := g.heir(sh, r, now); in != nil {
			P(in).settle(r, now, at, delta)
		}
		return
	}
	P(&e.state).settle(r, now, at, delta)
	e.key = strings.Clone(key)
	g.insert(sh, h, e)
}

// settle moves the TAT by delta intervals: a debt from the later of the TAT
// and now (at most MaxSpan ahead, which denies every request), a refund
// down to now at most. A delaying leaky bucket takes a refund only while
// its TAT is at, the one the admission set: while no request was queued
// after it, whose turn the refund would give away.
func (s *gcraState) settle(r *rule, now, at, delta int64) {
	for {
		tat := s.tat.Load()
		var next int64
		switch {
		case delta > 0:
			next = max(tat, now) + min(delta, maxSpan/r.interval)*r.interval
			next = min(next, now+maxSpan)
		case tat <= now || r.delay && tat != at:
			return
		default:
			next = max(tat-min(-delta, maxSpan/r.interval)*r.interval, now)
		}
		if s.tat.CompareAndSwap(tat, next) {
			return
		}
	}
}

// settle adds a debt to the current window's count (at most what the word
// holds), or takes a refund from it while it is at's window.
func (s *fixedState) settle(r *rule, now, at, delta int64) {
	for {
		word := s.w.Load()
		window, count := s.current(r, word, now)
		switch {
		case delta > 0:
			count = min(count+min(delta, r.countMask), r.countMask)
		case floorDiv(at, r.window) != window || count == 0:
			return
		default:
			count = max(count+delta, 0)
		}
		next := int64(0)
		if count > 0 {
			next = r.packFixed(window, count)
		}
		if s.w.CompareAndSwap(word, next) {
			return
		}
	}
}

// settle adds a debt to the current bucket (at most a counter's 2^32-1),
// or takes a refund from at's bucket while it still counts.
func (s *slidingState) settle(r *rule, now, at, delta int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return
	}
	if now-s.head*r.interval >= r.interval {
		s.advance(r, floorDiv(now, r.interval))
	}
	i, b := int64(s.at), floorDiv(at, r.interval)
	if delta < 0 {
		if b > s.head || s.head-b >= r.ring {
			return
		}
		i = b % r.ring
	}
	c := min(max(int64(s.counts[i])+delta, 0), math.MaxUint32)
	s.total += c - int64(s.counts[i])
	s.counts[i] = uint32(c)
}

func (s *allState[S, P]) settle(r *rule, now, at, delta int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return
	}
	for i := range s.parts {
		P(&s.parts[i]).settle(&r.parts[i], now, at, delta)
	}
}

var _ Settler = (*MemoryLimiter)(nil)
