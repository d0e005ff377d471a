package coretest

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// refModel is the reference model of one policy: what a store enforcing it
// must answer, computed slowly and plainly from the definitions in the
// package docs of core, never from the fast code. Each key keeps the
// requests it admitted, or the textbook state of its algorithm:
//
//   - FixedWindow: the admitted (instant, cost) pairs. Windows are
//     [kW, (k+1)W) from the Unix epoch; n is admitted when the cost already
//     admitted in now's window plus n is at most Limit.
//   - SlidingWindow: the admitted (instant, cost) pairs. Buckets are
//     [kI, (k+1)I) with I = Window/Buckets; n is admitted in bucket k when
//     buckets k-B+1..k hold at most Limit-n and buckets k-B..k at most
//     Limit+ceil(Limit/B)-n. Buckets drop out only at bucket boundaries.
//   - TokenBucket, and LeakyBucket as a meter: a level of tokens that
//     refills continuously by one token per Interval up to Burst, kept
//     exactly in nanoseconds of refill (Burst tokens are Burst*Interval);
//     n is admitted when at least n tokens are there.
//   - LeakyBucket: a queue served one unit per Interval, in order; n joins
//     when the units in it (waiting, or being served now) plus n are at most
//     Burst, and Delay is the time until its first unit starts being served.
//
// The fields of every Decision follow core.Decision: Remaining is how many
// unit requests would pass right now after this one (for Peek, which
// consumes nothing, right now), ResetAfter the time until a unit Peek would
// report Remaining equal to the capacity (0 if it already does),
// RetryAfter, for a denial, the time until the same cost would pass with no
// other traffic, Delay the leaky-bucket wait of an admitted request (0 for
// Peek, a denial and every other algorithm).
//
// A call may also carry a policy of the same algorithm (AllowPolicy, Get,
// Set, as core.PolicyLimiter): see "Policies per call" in the package docs
// of core, and convert in policymodel.go for how a key's state is carried
// from one policy to another.
//
// The model has no clock of its own: each call says when it happens. Times
// for one key must not go back before the latest instant its state was
// written (an admission, a change of policy, a Set; a store that makes its
// clock monotonic, like core.MemoryLimiter, is modelled by passing the
// latest instant it has seen). A refModel is not safe for concurrent use.
type refModel struct {
	p    core.Policy
	keys map[string]*keyState
}

// newRefModel returns the model of p, with every key new. It returns p's
// validation error when p is invalid.
func newRefModel(p core.Policy) (*refModel, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &refModel{p: p, keys: map[string]*keyState{}}, nil
}

// Policy returns the modelled policy.
func (m *refModel) Policy() core.Policy { return m.p }

// AllowN is what a store must answer to AllowN(key, n) at now: the same
// Decision, and an error wrapping core.ErrInvalidCost for n <= 0 or
// core.ErrCostExceedsCapacity (with a denial reporting the key's state and
// no RetryAfter) for n above the capacity. It is AllowPolicy under the
// model's own policy: a key last decided under another one is converted
// back.
func (m *refModel) AllowN(key string, now time.Time, n int64) (core.Decision, error) {
	return m.allowPolicy(m.p, key, now.UnixNano(), n)
}

// Peek is what a store must answer to Peek(key) at now: the key's state
// under the model's own policy, which it does not change (a key last
// decided under another policy is not moved).
func (m *refModel) Peek(key string, now time.Time) core.Decision {
	return m.peek(m.p, key, now.UnixNano())
}

// Reset forgets key.
func (m *refModel) Reset(key string) { delete(m.keys, key) }

func (m *refModel) allowPolicy(p core.Policy, key string, now, n int64) (core.Decision, error) {
	switch {
	case n <= 0:
		return core.Decision{}, fmt.Errorf("%w, got %d", core.ErrInvalidCost, n)
	case n > p.Capacity():
		d := m.peek(p, key, now)
		d.Allowed, d.RetryAfter = false, 0
		return d, fmt.Errorf("%w: n=%d", core.ErrCostExceedsCapacity, n)
	}
	k, ok := m.keys[key]
	if !ok {
		k = &keyState{}
		m.keys[key] = k
	}
	return decisionOf(p, k.decide(p, now, n)), nil
}

func (m *refModel) peek(p core.Policy, key string, now int64) core.Decision {
	k, ok := m.keys[key]
	if !ok {
		k = &keyState{} // a key never seen: not stored
	}
	return decisionOf(p, k.look(p, now, 1))
}

func decisionOf(p core.Policy, v verdict) core.Decision {
	return core.Decision{
		Allowed: v.allowed, Limit: p.Limit, Remaining: v.remaining,
		ResetAfter: time.Duration(v.reset), RetryAfter: time.Duration(v.retry),
		Delay: time.Duration(v.delay), Policy: p,
	}
}

// verdict is a Decision without the fields every decision of a policy
// shares; durations in ns.
type verdict struct {
	allowed             bool
	remaining           int64
	reset, retry, delay int64
}

// keyModel is the model of one key.
type keyModel interface {
	// decide answers a request of cost n (1 <= n <= capacity) at now,
	// recording it if it is admitted and consume is set (consume unset is
	// Peek, for n = 1). now must not be before lastAdmitted().
	decide(now, n int64, consume bool) verdict
	// lastAdmitted is the latest instant the state was written at (an
	// admission, or the instant it was converted from another policy or
	// Set), or MinInt64.
	lastAdmitted() int64
	// used is Usage.Used at now: what the key has used, in units of cost.
	used(now int64) int64
}

func newKeyModel(p core.Policy) keyModel {
	switch p.Algorithm {
	case core.AlgFixedWindow:
		return &fixedModel{limit: p.Limit, window: int64(p.Window), last: math.MinInt64}
	case core.AlgSlidingWindow:
		return &slidingModel{
			limit: p.Limit, width: int64(p.Window) / p.Buckets, buckets: p.Buckets,
			cap2: p.Limit + (p.Limit+p.Buckets-1)/p.Buckets, last: math.MinInt64,
		}
	case core.AlgLeakyBucket:
		if !p.Meter {
			return &queueModel{q: int64(p.Interval()), burst: p.Burst, last: math.MinInt64}
		}
	}
	q := int64(p.Interval())
	return &tokenModel{q: q, full: p.Burst * q, last: math.MinInt64}
}

// admission is one admitted request.
type admission struct{ at, n int64 }

// ceilDiv divides rounding toward plus infinity (b > 0).
func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

// floorDiv divides rounding toward minus infinity.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func mustNotGoBack(now, last int64) {
	if now < last {
		panic(fmt.Sprintf("coretest: model asked at %d, before the key's latest admission at %d", now, last))
	}
}

// fixedModel: windows [kW, (k+1)W) from the epoch, at most Limit admitted
// in each.
type fixedModel struct {
	limit, window int64
	admitted      []admission
	last          int64
}

func (m *fixedModel) lastAdmitted() int64 { return m.last }

// usedIn is the cost counted in window w.
func (m *fixedModel) usedIn(w int64) int64 {
	var sum int64
	for _, a := range m.admitted {
		if floorDiv(a.at, m.window) == w {
			sum += a.n
		}
	}
	return sum
}

func (m *fixedModel) decide(now, n int64, consume bool) verdict {
	mustNotGoBack(now, m.last)
	w := floorDiv(now, m.window)
	used := m.usedIn(w)
	untilNext := (w+1)*m.window - now // the next window starts with nothing used
	var v verdict
	if used+n > m.limit {
		v.retry = untilNext
	} else {
		v.allowed = true
		if consume {
			m.admitted = append(m.admitted, admission{now, n})
			m.last = now
			used += n
			// Windows before now's can never count again.
			m.admitted = slices.DeleteFunc(m.admitted, func(a admission) bool { return floorDiv(a.at, m.window) < w })
		}
	}
	v.remaining = max(0, m.limit-used) // a count carried from another policy may exceed Limit
	if used > 0 {
		v.reset = untilNext
	}
	return v
}

func (m *fixedModel) used(now int64) int64 { return m.usedIn(floorDiv(now, m.window)) }

// slidingModel: buckets [kI, (k+1)I); bucket k admits n while buckets
// k-B+1..k hold at most Limit-n and buckets k-B..k at most cap2-n.
type slidingModel struct {
	limit, width, buckets, cap2 int64
	admitted                    []admission
	last                        int64
}

func (m *slidingModel) lastAdmitted() int64 { return m.last }

// sum is the cost admitted in buckets from..to.
func (m *slidingModel) sum(from, to int64) int64 {
	var s int64
	for _, a := range m.admitted {
		if b := floorDiv(a.at, m.width); from <= b && b <= to {
			s += a.n
		}
	}
	return s
}

// room is how many unit requests bucket k admits (with no more traffic).
func (m *slidingModel) room(k int64) int64 {
	return max(0, min(m.limit-m.sum(k-m.buckets+1, k), m.cap2-m.sum(k-m.buckets, k)))
}

// used is what the trailing window counts: buckets k-B+1..k.
func (m *slidingModel) used(now int64) int64 {
	k := floorDiv(now, m.width)
	return m.sum(k-m.buckets+1, k)
}

func (m *slidingModel) fits(k, n int64) bool {
	return m.sum(k-m.buckets+1, k)+n <= m.limit && m.sum(k-m.buckets, k)+n <= m.cap2
}

// firstBucket returns the first bucket j >= from at which ok(j) holds, with
// no more traffic. The sums change only where an admitted bucket b leaves
// the trailing buckets (j = b+B) or the B+1 buckets (j = b+B+1), so only
// from and those buckets need looking at; by the last of them every bucket
// has left and anything up to Limit fits.
func (m *slidingModel) firstBucket(from int64, ok func(j int64) bool) int64 {
	candidates := []int64{from}
	for _, a := range m.admitted {
		b := floorDiv(a.at, m.width)
		for _, j := range []int64{b + m.buckets, b + m.buckets + 1} {
			if j > from {
				candidates = append(candidates, j)
			}
		}
	}
	slices.Sort(candidates)
	for _, j := range candidates {
		if ok(j) {
			return j
		}
	}
	panic("coretest: sliding-window model found no bucket that admits")
}

func (m *slidingModel) decide(now, n int64, consume bool) verdict {
	mustNotGoBack(now, m.last)
	k := floorDiv(now, m.width)
	var v verdict
	if !m.fits(k, n) {
		j := m.firstBucket(k+1, func(j int64) bool { return m.fits(j, n) })
		v.retry = j*m.width - now
	} else {
		v.allowed = true
		if consume {
			m.admitted = append(m.admitted, admission{now, n})
			m.last = now
			// Buckets before k-B can never count again.
			m.admitted = slices.DeleteFunc(m.admitted, func(a admission) bool { return floorDiv(a.at, m.width) < k-m.buckets })
		}
	}
	v.remaining = m.room(k)
	if j := m.firstBucket(k, func(j int64) bool { return m.room(j) == m.limit }); j > k {
		v.reset = j*m.width - now
	}
	return v
}

// tokenModel: tokens refilling continuously, one per q ns, up to Burst,
// measured in ns of refill: level is at most full = Burst*q, and below 0
// when the key was moved from a policy under which it had used more than
// this one's Burst (it is then denied until it is back under it).
type tokenModel struct {
	q, full int64
	level   int64 // at the instant last
	last    int64 // latest admission (or conversion, Set); MinInt64: never, the bucket is full
}

// used is the tokens taken and not yet refilled, rounded up.
func (m *tokenModel) used(now int64) int64 { return ceilDiv(m.full-m.levelAt(now), m.q) }

func (m *tokenModel) lastAdmitted() int64 { return m.last }

// levelAt is the level at now >= last.
func (m *tokenModel) levelAt(now int64) int64 {
	if m.last == math.MinInt64 || now-m.last >= m.full-m.level {
		return m.full
	}
	return m.level + (now - m.last)
}

func (m *tokenModel) decide(now, n int64, consume bool) verdict {
	mustNotGoBack(now, m.last)
	level := m.levelAt(now)
	var v verdict
	if level < n*m.q {
		v.retry = n*m.q - level // refill until n tokens are there
	} else {
		v.allowed = true
		if consume {
			level -= n * m.q
			m.level, m.last = level, now
		}
	}
	v.remaining = max(0, level/m.q)
	v.reset = m.full - level
	return v
}

// queueModel: a queue served one unit per q ns, in arrival order; units
// waiting or being served are in the bucket, at most Burst of them.
type queueModel struct {
	q, burst int64
	queued   []admission // admitted requests; at is when their first unit starts being served
	last     int64
}

func (m *queueModel) lastAdmitted() int64 { return m.last }

// left is how many units of r are still in the bucket at now: those not
// finished (a unit being served counts until it has finished).
func (m *queueModel) left(r admission, now int64) int64 {
	done := min(max(floorDiv(now-r.at, m.q), 0), r.n)
	return r.n - done
}

func (m *queueModel) used(now int64) int64 { return m.in(now) }

// in is how many units are in the bucket at now.
func (m *queueModel) in(now int64) int64 {
	var u int64
	for _, r := range m.queued {
		u += m.left(r, now)
	}
	return u
}

// finish is when the k-th (from 1) of the units in the bucket at now
// finishes: the units leave in order, one every q.
func (m *queueModel) finish(k, now int64) int64 {
	for _, r := range m.queued {
		left := m.left(r, now)
		if k <= left {
			return r.at + (r.n-left+k)*m.q
		}
		k -= left
	}
	panic("coretest: leaky-bucket model has fewer units than asked for")
}

// free is when the server has finished every unit admitted so far.
func (m *queueModel) free() int64 {
	if len(m.queued) == 0 {
		return math.MinInt64
	}
	r := m.queued[len(m.queued)-1]
	return r.at + r.n*m.q
}

func (m *queueModel) decide(now, n int64, consume bool) verdict {
	mustNotGoBack(now, m.last)
	in := m.in(now)
	var v verdict
	v.remaining = max(0, m.burst-in) // a key moved from a deeper bucket may hold more than Burst
	if in > 0 {
		v.reset = m.free() - now
	}
	if in+n > m.burst {
		// Wait until enough units have left: the (in+n-burst)-th to leave.
		v.retry = m.finish(in+n-m.burst, now) - now
		return v
	}
	v.allowed = true
	if !consume {
		return v
	}
	start := max(now, m.free())
	m.queued = append(m.queued, admission{start, n})
	m.last = now
	// Requests served completely by now are gone for good.
	m.queued = slices.DeleteFunc(m.queued, func(r admission) bool { return m.left(r, now) == 0 })
	v.delay = start - now
	v.remaining = m.burst - in - n
	v.reset = start + n*m.q - now
	return v
}
