package coretest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// Plans returns p and two other valid policies of p's algorithm (and
// Meter), named "plan1" and "plan2": the plans RunModel and RunProperties
// mix on one limiter whose own policy is p, when it is a
// core.PolicyLimiter. Their Limit, Window (interval, for the buckets),
// Burst and Buckets differ from p's by small factors (a third to three
// times), or are kept (a plan's limit changed mid-window); of the sliding
// windows, plan1 has p's Window and Buckets (its buckets carry over
// bucket by bucket) and plan2 another geometry.
func Plans(rng *rand.Rand, p core.Policy) []core.Policy {
	out := []core.Policy{p}
	for tries := 0; len(out) < 3 && tries < 10_000; tries++ {
		q := relatedPolicy(rng, p, len(out) == 1)
		q.Name = fmt.Sprintf("plan%d", len(out))
		if q.Validate() != nil || int64(q.Window) > maxTestSpan || int64(q.Recovery()) > maxTestSpan {
			continue
		}
		if q.Algorithm == core.AlgSlidingWindow && (q.Window == p.Window && q.Buckets == p.Buckets) != (len(out) == 1) {
			continue
		}
		if q.Algorithm == core.AlgFixedWindow && !countsFit(q, out) {
			continue
		}
		if (q.Algorithm == core.AlgTokenBucket || q.Algorithm == core.AlgLeakyBucket) && !debtsFit(q, out) {
			continue
		}
		out = append(out, q)
	}
	return out
}

func relatedPolicy(rng *rand.Rand, p core.Policy, sameGeometry bool) core.Policy {
	scale := func(x int64) int64 {
		f := [...][2]int64{{1, 1}, {2, 1}, {3, 1}, {1, 2}, {1, 3}, {3, 2}, {2, 3}}[rng.IntN(7)]
		return max(1, x/f[1]*f[0]+x%f[1]*f[0]/f[1])
	}
	q := p
	switch p.Algorithm {
	case core.AlgFixedWindow:
		q.Limit = min(scale(p.Limit), core.MaxWindowLimit)
		if rng.IntN(2) == 0 {
			q.Window = time.Duration(scale(int64(p.Window)))
		}
	case core.AlgSlidingWindow:
		q.Limit = min(scale(p.Limit), core.MaxWindowLimit)
		if !sameGeometry {
			width, b := int64(p.Interval()), p.Buckets
			switch rng.IntN(3) {
			case 0:
				b = min(scale(b), core.MaxBuckets)
			case 1:
				width = scale(width)
			default:
				b, width = min(scale(b), core.MaxBuckets), scale(width)
			}
			q.Buckets, q.Window = b, time.Duration(width*b)
		}
	default:
		interval, limit := int64(p.Interval()), scale(p.Limit)
		if rng.IntN(3) > 0 {
			interval = scale(interval)
		}
		q.Limit, q.Window = limit, time.Duration(interval*limit)
		switch rng.IntN(3) {
		case 0:
			q.Burst = limit
		case 1:
			q.Burst = scale(p.Burst)
		default:
			q.Burst = 1 + rng.Int64N(3*limit)
		}
	}
	return q
}

// recoveryBound is the longest any key's state takes to recover under
// any of plans: a bucket key moved from a plan with a larger Burst may owe
// that Burst at another plan's rate, and a delaying leaky bucket, whose
// queue never ends earlier when it moves to a faster plan, is counted in
// the faster plan's units when it moves back, up to core.MaxSpan.
func recoveryBound(plans []core.Policy) int64 {
	var most, maxCap, maxInterval int64
	for _, p := range plans {
		most, maxCap = max(most, int64(p.Recovery())), max(maxCap, p.Capacity())
		maxInterval = max(maxInterval, int64(p.Interval()))
	}
	for _, p := range plans {
		switch {
		case p.Algorithm == core.AlgLeakyBucket && !p.Meter && len(plans) > 1:
			most = max(most, int64(core.MaxSpan)+(maxCap+2)*maxInterval)
		case p.Algorithm == core.AlgTokenBucket || p.Algorithm == core.AlgLeakyBucket:
			most = max(most, (maxCap+2)*int64(p.Interval()))
		}
	}
	return most
}

func showPolicy(p core.Policy) string {
	if p.Name != "" {
		return p.Name
	}
	return "own"
}

func showUsage(u core.Usage) string {
	return fmt.Sprintf("{Used:%d Remaining:%d ResetAfter:%v}", u.Used, u.Remaining, u.ResetAfter)
}

func (c *modelCase) showPlans() string {
	if len(c.plans) < 2 {
		return ""
	}
	s := ", mixed with"
	for _, p := range c.plans[1:] {
		s += fmt.Sprintf(" %v;", p)
	}
	return s
}

// showState says which policy the model holds the key under.
func (c *modelCase) showState(k *tracked, pol core.Policy, at int64) string {
	if c.pl == nil || k.st.m == nil {
		return ""
	}
	return fmt.Sprintf("\n  (the model held the key under %s; usage under %s now %s)", showPolicy(k.st.p), showPolicy(pol), showUsage(usageOf(k.st.view(pol, at), pol, at)))
}

// pickPlan returns a plan for a Get or Set on k.
func (c *modelCase) pickPlan(k *tracked) core.Policy {
	if c.rng.IntN(2) == 0 {
		return c.plans[k.plan]
	}
	return c.plans[c.rng.IntN(len(c.plans))]
}

// get makes a Get on key and checks its answer.
func (c *modelCase) get(key string) error {
	c.step++
	k := c.track(key)
	pol := c.pickPlan(k)
	at := c.frame()
	u, err := c.pl.Get(context.Background(), pol, key)
	e := event{op: "Get", key: key, pol: showPolicy(pol), now: c.now, at: at, u: u, err: err}
	c.note(e)
	k.note(e)
	op := fmt.Sprintf("Get(%s, %s)", showPolicy(pol), key)
	if err != nil {
		return c.failure(key, "%s returned error %v", op, err)
	}
	capacity := pol.Capacity()
	// A sliding window's Used counts the trailing Buckets buckets; until
	// the full quota is back one more may count.
	sliding := pol.Algorithm == core.AlgSlidingWindow
	if u.Policy != pol || u.Used < 0 || u.Remaining < 0 || u.Remaining > capacity || u.ResetAfter < 0 ||
		(u.Remaining == capacity) != (u.ResetAfter == 0) || (u.ResetAfter == 0 && u.Used != 0) || (!sliding && u.Used == 0 && u.ResetAfter != 0) {
		return c.failure(key, "%s: %s with Policy %v: Policy must be the call's, Used >= 0, Remaining in [0, %d]; Remaining %d goes with ResetAfter 0, and with Used 0 (for the buckets and the fixed window, only then)",
			op, showUsage(u), u.Policy, capacity, capacity)
	}
	last := max(k.st.last(), k.since)
	if k.tainted || at < last {
		c.stats.loose++
		return nil
	}
	want := usageOf(k.st.view(pol, at), pol, at)
	if c.s.Inexact {
		if u.Remaining > want.Remaining {
			return c.failure(key, "%s at +%v: %s, the model (fed the requests the store admitted) %s: a store may limit early, never late", op, c.rel(at), showUsage(u), showUsage(want))
		}
		return nil
	}
	if u != want {
		return c.failure(key, "%s at +%v:\n   got %s\n  want %s (the model)%s", op, c.rel(at), showUsage(u), showUsage(want), c.showState(k, pol, at))
	}
	c.stats.gets++
	return nil
}

// setUsage makes a Set on key, sometimes out of range.
func (c *modelCase) setUsage(key string) error {
	c.step++
	k := c.track(key)
	i := k.plan
	if c.rng.IntN(2) == 0 {
		i = c.rng.IntN(len(c.plans))
	}
	pol := c.plans[i]
	capacity := pol.Capacity()
	var used int64
	switch r := c.rng.IntN(20); {
	case r < 2:
		used = 0
	case r < 3:
		used = capacity
	case r < 4:
		used = -1 - c.rng.Int64N(3)
	case r < 5:
		used = capacity + 1 + c.rng.Int64N(3)
	default:
		used = c.rng.Int64N(capacity + 1)
	}
	at := c.frame()
	err := c.pl.Set(context.Background(), pol, key, used)
	e := event{op: "Set", key: key, pol: showPolicy(pol), n: used, now: c.now, at: at, err: err}
	c.note(e)
	k.note(e)
	op := fmt.Sprintf("Set(%s, %s, %d)", showPolicy(pol), key, used)
	if used < 0 || used > capacity {
		if !errors.Is(err, core.ErrInvalidUsage) {
			return c.failure(key, "%s (capacity %d) returned error %v, want core.ErrInvalidUsage", op, capacity, err)
		}
		c.stats.policyErrors++
		return nil
	}
	if err != nil {
		return c.failure(key, "%s returned error %v", op, err)
	}
	c.stats.sets++
	// Whatever the key held, it now holds exactly this, under pol.
	k.plan = i
	*k = tracked{history: k.history, plan: i, st: keyState{p: pol, m: setModel(pol, at, used)}, recentP: pol}
	return nil
}

// policyError makes a call with a policy of another algorithm or an
// invalid one: an error, and the key unchanged (which the next calls on it
// check).
func (c *modelCase) policyError(key string) error {
	c.step++
	c.stats.policyErrors++
	k := c.track(key)
	bad := otherAlgorithm(c.p)
	want := "core.ErrAlgorithmMismatch"
	if c.rng.IntN(2) == 0 {
		bad = c.plans[c.rng.IntN(len(c.plans))]
		switch c.rng.IntN(3) {
		case 0:
			bad.Limit = -c.rng.Int64N(2)
		case 1:
			bad.Window = -time.Duration(c.rng.Int64N(2))
		default:
			bad.Name = "bad\nname"
		}
		want = "the policy's validation error"
	}
	var err error
	var op string
	switch c.rng.IntN(3) {
	case 0:
		op = "AllowPolicy"
		_, err = c.pl.AllowPolicy(context.Background(), bad, key, 1)
	case 1:
		op = "Get"
		_, err = c.pl.Get(context.Background(), bad, key)
	default:
		op = "Set"
		err = c.pl.Set(context.Background(), bad, key, 0)
	}
	k.note(event{op: fmt.Sprintf("%s under %v: error %v", op, bad, err)})
	mismatch := bad.Algorithm != c.p.Algorithm
	if err == nil || mismatch != errors.Is(err, core.ErrAlgorithmMismatch) {
		return c.failure(key, "%s under %v returned error %v, want %s", op, bad, err, want)
	}
	return nil
}

// countsFit reports whether a fixed-window key can move between q and each
// of others keeping its count: each window holds the other's Limit (a
// count above what a window can hold is kept at that most; see "Policies
// per call" in core's documentation).
func countsFit(q core.Policy, others []core.Policy) bool {
	for _, o := range others {
		a, b := q, o
		a.Limit, b.Limit = o.Limit, q.Limit
		if a.Validate() != nil || b.Validate() != nil {
			return false
		}
	}
	return true
}

// debtsFit reports whether a bucket key can move between q and the others
// with its debt within maxTestSpan: the largest Burst at the slowest rate.
// (Every store keeps a debt of at most core.MaxSpan, 52 days: a key that
// has used more units than that at its new rate is capped there.)
func debtsFit(q core.Policy, others []core.Policy) bool {
	burst, interval := q.Burst, int64(q.Interval())
	for _, o := range others {
		burst, interval = max(burst, o.Burst), max(interval, int64(o.Interval()))
	}
	return burst <= maxTestSpan/interval
}
