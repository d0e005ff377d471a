package coretest

import (
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// This file models policies given per call (core.PolicyLimiter), from
// "Policies per call" in the package docs of core:
//
//   - A key has one state, held under the policy it was last decided
//     under. A call that decides the key (AllowN, AllowPolicy with a cost
//     from 1 to the policy's capacity) under another policy is decided on
//     the state converted to that policy at the instant of the call, and
//     when it is admitted the key stays under it: "the new policy applies
//     from then on" (a denial leaves the key as it was). Peek, Get and calls that return an error (a cost <= 0 or above
//     the capacity, an invalid policy, another algorithm, a usage out of
//     range) change nothing; Peek and Get report the converted state
//     without keeping it.
//   - A denial, Peek or Get under another policy than the key's leaves
//     the key recovering under its own: their RetryAfter is the time
//     until the state, converted then, admits the cost, their ResetAfter
//     until it is back to the full quota (see look).
//   - Conversion keeps what the key has used, in units of cost, counting
//     what might still lie inside the new policy's window where the state
//     cannot know exactly ("stricter, never more generous"):
//     token bucket and metering leaky bucket: the tokens taken and not yet
//     refilled, fractions included (nanoseconds of refill under A, times
//     B's interval over A's, rounded up, since a change never adds
//     capacity), refilling at B's rate, possibly more than B's Burst, and
//     at most core.MaxSpan of B's refill;
//     leaky bucket: likewise, except that the instant the bucket is empty
//     never moves earlier (the requests queued keep their instants and new
//     ones are served after them);
//     fixed window: the count of A's window of the latest write, if that
//     window overlaps B's window holding now and is A's window holding now
//     or the one before (it may have ended), plus
//     A's Limit when A's window before it overlaps B's window too and the
//     window of the latest write is A's window holding now, counted in B's
//     window holding now (at most what a fixed-window word of B holds);
//     sliding window: each of A's Buckets+1 buckets ending with now's,
//     counted in the newest of B's buckets that it overlaps but not after
//     now's (those older than B's Buckets+1 buckets dropped; at most
//     2^32-1 per bucket).
//   - Set(p, key, used) makes the state that of a key new under p that has
//     just been admitted cost used (nothing for 0): used units counted in
//     p's current window or bucket, used tokens taken, used requests in
//     the bucket with the first starting now.

// keyState is a key's model and the policy it is held under.
type keyState struct {
	p core.Policy
	m keyModel // nil: a key never seen, or Reset
}

// view returns the key's model under p at now, without changing the key:
// its own model when p is the policy it is held under, else a converted
// copy.
func (s *keyState) view(p core.Policy, now int64) keyModel {
	switch {
	case s.m == nil:
		return newKeyModel(p)
	case s.p == p:
		return s.m
	}
	return convert(s.m, s.p, p, now)
}

// decide answers a call of cost n (1 <= n <= capacity) under p at now,
// moving the key to p and recording the request if it is admitted. A
// denial leaves the key as it was.
func (s *keyState) decide(p core.Policy, now, n int64) verdict {
	m := s.view(p, now)
	if v := m.decide(now, n, false); !v.allowed && s.m != nil && s.p != p {
		return s.look(p, now, n)
	}
	v := m.decide(now, n, true)
	s.m, s.p = m, p
	return v
}

// look answers a call of cost n under p at now without changing the key
// (Peek and Get: n = 1): decided on its view under p. A key held under
// another policy stays there, recovering as that policy says, so its
// RetryAfter is the time until its view admits n, and its ResetAfter the
// time until its view is back to p's full quota (Remaining = capacity).
func (s *keyState) look(p core.Policy, now, n int64) verdict {
	v := s.view(p, now).decide(now, n, false)
	if s.m == nil || s.p == p {
		return v
	}
	// The first instant at which ok holds of the view, by bisection: a key
	// left alone only recovers, so once a view admits, every later one
	// does; by 2^61 ns on (73 years) every state has recovered.
	first := func(ok func(v verdict) bool) int64 {
		lo, hi := now, now+1<<61
		if ok(v) {
			return now
		}
		if !ok(s.view(p, hi).decide(hi, n, false)) {
			panic("coretest: a key's view under another policy never recovers")
		}
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if ok(s.view(p, mid).decide(mid, n, false)) {
				hi = mid
			} else {
				lo = mid
			}
		}
		return hi
	}
	full := func(v verdict) bool { return v.remaining == p.Capacity() }
	reset := first(full) - now
	if !v.allowed {
		v.retry = first(func(v verdict) bool { return v.allowed }) - now
	}
	v.reset = reset
	return v
}

// convert returns the state m, held under from, as it is under to at now.
// m is not changed.
func convert(m keyModel, from, to core.Policy, now int64) keyModel {
	mustNotGoBack(now, m.lastAdmitted())
	out := newKeyModel(to)
	switch old := m.(type) {
	case *fixedModel:
		n := out.(*fixedModel)
		if c := fixedCarry(old, from, to, now); c > 0 {
			n.admitted = []admission{{now, c}}
		}
		n.last = now
	case *slidingModel:
		n := out.(*slidingModel)
		n.admitted = slidingCarry(old, n, now)
		n.last = now
	case *tokenModel, *queueModel:
		// The time until the key is back to full (empty), in ns at from's
		// rate, rescaled to to's rate; a queue never ends earlier.
		var debt int64
		if t, ok := old.(*tokenModel); ok {
			debt = t.full - t.levelAt(now)
		} else if q := old.(*queueModel); len(q.queued) > 0 {
			debt = max(0, q.free()-now)
		}
		scaled := scaleUp(debt, int64(to.Interval()), int64(from.Interval()))
		if _, ok := out.(*queueModel); ok {
			scaled = max(scaled, debt)
		}
		debt = scaled
		fromDebt(out, now, debt)
	default:
		panic(fmt.Sprintf("coretest: no conversion from %T", m))
	}
	return out
}

// fixedCarry is the count a fixed-window key held under from carries into
// to's window holding now.
func fixedCarry(old *fixedModel, from, to core.Policy, now int64) int64 {
	if len(old.admitted) == 0 {
		return 0
	}
	ws, cur := floorDiv(old.admitted[len(old.admitted)-1].at, old.window), floorDiv(now, old.window) // the window of the latest write, now's
	if ws < cur-1 {
		return 0 // every request in it is more than one Window old
	}
	start, w := ws*old.window, int64(to.Window)
	lo := floorDiv(now, w) * w
	hi := lo + w
	var c int64
	if start < hi && start+old.window > lo {
		c = old.usedIn(ws)
	}
	if ws == cur && start-old.window < hi && start > lo {
		c += from.Limit
	}
	// What a fixed-window word of to holds beside its window number, and
	// at most 2^32-1 (what the Redis store's counter holds).
	bits := 64 - (big.NewInt(math.MaxInt64/w).BitLen() + 1)
	return min(c, int64(1)<<bits-1, math.MaxUint32)
}

// slidingCarry returns the admissions a sliding-window key held as old
// carries into n, a new model, at now: each of old's buckets in the
// newest of n's buckets it overlaps, not after now's.
func slidingCarry(old, n *slidingModel, now int64) []admission {
	kOld, k := floorDiv(now, old.width), floorDiv(now, n.width)
	per := map[int64]int64{}
	for _, a := range old.admitted {
		b := floorDiv(a.at, old.width)
		j := min(floorDiv((b+1)*old.width-1, n.width), k)
		if b < kOld-old.buckets || k-j > n.buckets {
			continue
		}
		per[j] = min(per[j]+a.n, math.MaxUint32)
	}
	var out []admission
	for _, j := range slices.Sorted(maps.Keys(per)) {
		out = append(out, admission{j * n.width, per[j]})
	}
	return out
}

// fromDebt sets a fresh bucket model to be debt ns from full (empty) at
// now.
func fromDebt(m keyModel, now, debt int64) {
	switch n := m.(type) {
	case *tokenModel:
		n.level, n.last = n.full-debt, now
	case *queueModel:
		if debt > 0 {
			// debt ns of service left: u units, the first partly served.
			u := ceilDiv(debt, n.q)
			n.queued = []admission{{now + debt - u*n.q, u}}
		}
		n.last = now
	}
}

// setModel is the model of a key Set to used units under p at now.
func setModel(p core.Policy, now, used int64) keyModel {
	m := newKeyModel(p)
	switch n := m.(type) {
	case *fixedModel:
		if used > 0 {
			n.admitted = []admission{{now, used}}
		}
		n.last = now
	case *slidingModel:
		if used > 0 {
			n.admitted = []admission{{now, used}}
		}
		n.last = now
	case *tokenModel:
		fromDebt(n, now, used*n.q)
	case *queueModel:
		fromDebt(n, now, used*n.q)
	}
	return m
}

// scaleUp returns ceil(x*num/den), at most core.MaxSpan, for x >= 0 and
// num, den > 0.
func scaleUp(x, num, den int64) int64 {
	if x == 0 || num == den {
		return x
	}
	p := new(big.Int).Mul(big.NewInt(x), big.NewInt(num))
	d := big.NewInt(den)
	q, r := new(big.Int).QuoRem(p, d, new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if most := big.NewInt(int64(core.MaxSpan)); q.Cmp(most) > 0 {
		return int64(core.MaxSpan)
	}
	return q.Int64()
}

// checkPolicy returns the error a PolicyLimiter whose own policy is own
// must return for a call under p: p's validation error, or
// core.ErrAlgorithmMismatch.
func checkPolicy(own, p core.Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if p.Algorithm != own.Algorithm {
		return fmt.Errorf("%w: %v, the limiter's is %v", core.ErrAlgorithmMismatch, p.Algorithm, own.Algorithm)
	}
	return nil
}

// AllowPolicy is what a store must answer to AllowPolicy(p, key, n) at
// now: p's validation error for an invalid p, an error wrapping
// core.ErrAlgorithmMismatch for a p of another algorithm than the model's
// policy, and otherwise what AllowN answers, under p. A key last decided
// under another policy is converted to p first, and stays under p.
func (m *refModel) AllowPolicy(p core.Policy, key string, now time.Time, n int64) (core.Decision, error) {
	if err := checkPolicy(m.p, p); err != nil {
		return core.Decision{}, err
	}
	return m.allowPolicy(p, key, now.UnixNano(), n)
}

// Get is what a store must answer to Get(p, key) at now: the key's usage
// under p, converted if it was last decided under another policy, without
// changing anything. Errors as for AllowPolicy.
func (m *refModel) Get(p core.Policy, key string, now time.Time) (core.Usage, error) {
	if err := checkPolicy(m.p, p); err != nil {
		return core.Usage{}, err
	}
	k, ok := m.keys[key]
	if !ok {
		k = &keyState{}
	}
	ns := now.UnixNano()
	v := k.look(p, ns, 1)
	return core.Usage{Used: k.view(p, ns).used(ns), Remaining: v.remaining, ResetAfter: time.Duration(v.reset), Policy: p}, nil
}

// Set is what a store does for Set(p, key, used) at now: the key is
// under p with used units used now (see setModel). Errors as for
// AllowPolicy, and an error wrapping core.ErrInvalidUsage for used outside
// [0, p.Capacity()], which change nothing.
func (m *refModel) Set(p core.Policy, key string, now time.Time, used int64) error {
	if err := checkPolicy(m.p, p); err != nil {
		return err
	}
	if used < 0 || used > p.Capacity() {
		return fmt.Errorf("%w: %d, capacity %d", core.ErrInvalidUsage, used, p.Capacity())
	}
	m.keys[key] = &keyState{p: p, m: setModel(p, now.UnixNano(), used)}
	return nil
}
