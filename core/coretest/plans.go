package coretest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// plansFor returns p and two other valid policies of p's algorithm (and
// Meter), named "plan1" and "plan2": the plans RunModel and RunProperties
// mix on one limiter whose own policy is p, when it is a
// core.PolicyLimiter. Their Limit, Window (interval, for the buckets),
// Burst and Buckets differ from p's by small factors (a third to three
// times), or are kept (a plan's limit changed mid-window); of the sliding
// windows, plan1 has p's Window and Buckets (its buckets carry over
// bucket by bucket) and plan2 another geometry.
func plansFor(rng *rand.Rand, p core.Policy) []core.Policy {
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
