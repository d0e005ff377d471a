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
	//     requests wait until the debt is paid off (a debt beyond what the
	//     key's state can count saturates there and still denies: for
	//     MaxSpan in a token or leaky bucket, until its window passes in a
	//     fixed or sliding window);
	//   - less, a refund, is given back never beyond what was charged (cost
	//     >= 0) nor past the window it was charged in: a fixed window gives
	//     back only while the window of d.At is the current one, and at most
	//     its count; a sliding window only from the bucket of d.At, while it
	//     still counts; a token bucket (and a metering leaky bucket) at most
	//     what the charge still holds: it was all back d.ResetAfter after
	//     d.At (each part's for a policy made with AllOf, Decision.Parts),
	//     so at most what of it lies beyond now, and never a later
	//     request's charge, which lies after it: never more than the charge
	//     would have left taken had it been cost from the start; a delaying
	//     leaky bucket as the token bucket, but only while no request was
	//     queued after the one settled (a request canceled during its Delay
	//     gets its turn back), and else nothing: the requests queued keep
	//     their turns.
	//
	// A key's state does not record a Reset or Set: a refund settled after
	// the key was Reset or Set, and charged again, in the window or before
	// the end the refund is bound by, comes off those later charges, up to
	// the refund, and the key may admit that much beyond its quota. Settle
	// a request whose key was Reset or Set since its admission at its full
	// charge (no refund): the Reset gave it back already (the README's
	// failed-login recipe does so).
	//
	// Under a policy made with AllOf, each part of d.Policy that the key
	// still has is settled, matched by label as a plan move keeps parts: a
	// part the key has gained since (the request never charged it) is not,
	// nor, in memory, one it has dropped (on Redis a dropped part's key is
	// settled while it lasts); a delaying leaky bucket gives nothing back
	// there.
	//
	// It returns an error when d is not an admission, charged <= 0 or cost <
	// 0 (ErrInvalidCost), and a remote store's errors.
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
	st := settlement{from: r, at: at, end: at + int64(d.ResetAfter), delta: cost - charged}
	if d.parts != nil {
		if st.parts = d.partVerdicts(r); st.parts == nil {
			return fmt.Errorf("core: Settle: the decision's Policy (%v) is not the one that decided it", d.Policy)
		}
	}
	l.keys.settle(r, key, l.clock(), st)
	return nil
}

// settlement is what Settle adds to a key: delta units, a debt (> 0) or a
// refund (< 0), to a request admitted at the instant at, whose charge was
// all back (refilled, or served) at end: the decision's ResetAfter after
// at. from is the rule of the decision's policy; parts, for a decision
// under a policy made with AllOf, are its parts' verdicts, whose resets
// give each part's end.
type settlement struct {
	from           *rule
	at, end, delta int64
	parts          partVerdicts
}

// settle applies st to key's state at now (see Settler). A key no longer
// held (idle, evicted, Reset) has nothing to refund, and a debt starts it
// as a new key would start under r.
func (g *registry[S, P]) settle(r *rule, key string, now int64, st settlement) {
	sh, h, now := g.lock(key, now)
	defer sh.mu.Unlock()
	if _, e := lookup(sh.table.Load(), h, key); e != nil {
		P(&e.state).settle(e.rule, now, st)
		return
	}
	if st.delta < 0 {
		return
	}
	e, _, room := g.newcomer(sh, h, r, now, true)
	if !room {
		if in := g.heir(sh, r, now); in != nil {
			P(in).settle(r, now, st)
		}
		return
	}
	P(&e.state).settle(r, now, st)
	e.key = strings.Clone(key)
	g.insert(sh, h, e)
}

// settle moves the TAT by delta intervals: a debt from the later of the TAT
// and now (at most MaxSpan ahead, which denies every request); a refund
// back by at most what the charge still holds, the part of it beyond now
// (it ended at st.end, and a later request's charge lies after it), and
// down to now at most. A delaying leaky bucket takes a refund only while
// its TAT is st.end, the one the admission set: while no request was
// queued after it, whose turn the refund would give away.
func (s *gcraState) settle(r *rule, now int64, st settlement) {
	most := maxSpan / r.interval // units in MaxSpan
	for {
		tat := s.tat.Load()
		var next int64
		switch {
		case st.delta > 0:
			next = min(max(tat, now)+min(st.delta, most)*r.interval, now+maxSpan)
		case tat <= now || st.end <= now || r.delay && tat != st.end:
			return
		default:
			next = max(tat-min(min(-st.delta, most)*r.interval, st.end-now), now)
		}
		if s.tat.CompareAndSwap(tat, next) {
			return
		}
	}
}

// settle adds a debt to the current window's count (at most what the word
// holds), or takes a refund from it while it is at's window.
func (s *fixedState) settle(r *rule, now int64, st settlement) {
	at, delta := st.at, st.delta
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
func (s *slidingState) settle(r *rule, now int64, st settlement) {
	at, delta := st.at, st.delta
	s.mu.Lock()
	defer s.mu.Unlock()
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
	// A counter holds at most 2^32-1: a larger delta is as much, and
	// cannot overflow the sum.
	c := min(max(int64(s.counts[i])+min(delta, math.MaxUint32), 0), math.MaxUint32)
	s.total += c - int64(s.counts[i])
	s.counts[i] = uint32(c)
}

// settle settles each part of the key's rule r that the settled decision's
// policy has (matched by label, as a plan move keeps parts), each charge
// ending where that part's verdict said: a part the key has gained since
// was never charged by the request.
func (s *allState[S, P]) settle(r *rule, now int64, st settlement) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, j := range st.from.matches(r) {
		if st.delta < 0 && r.parts[j].delay {
			continue // a delaying leaky bucket gives nothing back as a part (Settler)
		}
		part := st
		if st.parts != nil {
			part.end = st.at + int64(st.parts[i].reset)
		}
		P(&s.parts[j]).settle(&r.parts[j], now, part)
	}
}

var _ Settler = (*MemoryLimiter)(nil)
