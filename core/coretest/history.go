package coretest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// history is what one key has been admitted, written from "Policies per
// call" in the package docs of core and from nothing else: the requests it
// admitted since its last Reset (instant, cost, the policy each was
// admitted under), the policy in force, and for the token bucket its
// level. It knows no conversion rule: admit checks the promise of those
// docs on the history itself, at every admission.
//
// A policy takes effect at the first AllowPolicy (or AllowN) under it that
// is admitted, and at a Set under it (take, set); a denial, Peek and Get
// leave the key as it was and are not recorded. Reset empties the history; Set makes it one
// request of the given usage at that instant.
//
// A clock that steps back never adds capacity (package docs of core): a
// request admitted at an instant before the key's latest admission (or
// Set of a usage above 0) is recorded, and the promise checked, at that
// latest instant, as if the store had stood still there. (Not at the
// latest call: a denial, a change of policy with nothing used, or a Set
// to 0 leaves a store nothing to stand still at.)
// Only a leaky-bucket request's service instant stays the store's own
// reading plus its Delay, since that is when the client is told to send.
// A store with a monotonic clock (core.MemoryLimiter) never needs this.
type history struct {
	reqs []request
	pol  core.Policy // in force; the zero Policy while none is
	last int64       // the latest instant of its requests; MinInt64: none

	// Token bucket (and metering leaky bucket): the level at levelAt, the
	// cost of every admitted request less what has refilled since, in
	// units, exactly.
	level   *big.Rat
	levelAt int64
}

// request is one admitted request (or the one a Set stands for).
type request struct {
	at    int64       // the instant it is counted at
	serve int64       // leaky bucket: when it is served, its instant plus its Delay
	n     int64       // its cost
	pol   core.Policy // the policy it was admitted under
	// reach: for the window algorithms, the request counts while it is
	// within this span of an admission: MaxInt64 while no change of
	// policy has happened since it was admitted (its policy's own rule
	// counts it); after a change, the shortest Window of the policies in
	// force since, but a fixed window's no longer after a second change.
	reach int64
}

func newHistory() history { return history{last: math.MinInt64, level: new(big.Rat)} }

// instant is the instant a call at now is recorded at: now, or the
// latest instant of the key's requests when the clock stepped back.
func (h *history) instant(now int64) int64 { return max(now, h.last) }

// take records that p takes effect at now: an admitted AllowPolicy under
// p (admit calls it).
func (h *history) take(p core.Policy, now int64) {
	if h.pol == p {
		return
	}
	h.drain(h.instant(now))
	for i := range h.reqs {
		switch r := &h.reqs[i]; {
		case r.reach == math.MaxInt64, p.Algorithm == core.AlgSlidingWindow:
			r.reach = min(r.reach, int64(h.pol.Window), int64(p.Window))
		default:
			r.reach = math.MinInt64 // a fixed window's, two changes back
		}
	}
	h.pol = p
}

// set is Set(p, used) at now: the history becomes one request of cost
// used at now, served at now, even if now is before the key's latest
// admission: Set replaces its state.
func (h *history) set(p core.Policy, now, used int64) {
	*h = newHistory()
	h.pol, h.levelAt = p, now
	if used > 0 {
		h.last = now
		h.reqs = []request{{at: now, serve: now, n: used, pol: p, reach: math.MaxInt64}}
		if fluid(p) {
			h.level.SetInt64(used)
		}
	}
}

// reset is Reset: the key is new.
func (h *history) reset() { *h = newHistory() }

// drain lets the token level refill until t at the rate of the policy in
// force: one unit per Interval, never below zero.
func (h *history) drain(t int64) {
	if h.level.Sign() > 0 && t > h.levelAt {
		h.level.Sub(h.level, big.NewRat(t-h.levelAt, int64(h.pol.Interval())))
		if h.level.Sign() < 0 {
			h.level.SetInt64(0)
		}
	}
	if h.level.Sign() == 0 {
		h.levelAt = t // nothing to drain: t may be before levelAt after a step back
	} else {
		h.levelAt = max(h.levelAt, t)
	}
}

// admit records a request of cost n admitted under p at now, told delay
// (Decision.Delay), and returns what it breaks of the promise, or "".
// show formats an instant for the message.
func (h *history) admit(p core.Policy, now, delay, n int64, show func(int64) string) string {
	h.take(p, now)
	t := h.instant(now)
	h.drain(t)
	h.last = t
	h.reqs = append(h.reqs, request{at: t, serve: now + delay, n: n, pol: p, reach: math.MaxInt64})
	switch {
	case p.Algorithm == core.AlgFixedWindow:
		return h.fixed(p, t, show)
	case p.Algorithm == core.AlgSlidingWindow:
		return h.sliding(p, t, show)
	case fluid(p):
		h.level.Add(h.level, big.NewRat(n, 1))
		if h.level.Cmp(big.NewRat(p.Burst, 1)) > 0 {
			return fmt.Sprintf("token bucket: after the admission at %s the level, the cost admitted less what refilled since at the rate of the policy then in force, is %s units, above Burst %d of %v",
				show(t), h.level.RatString(), p.Burst, p)
		}
		return ""
	}
	return h.leaky(p, t, show)
}

// fluid reports whether p's promise is on the token level: a token
// bucket, or a metering leaky bucket, which admits what a token bucket
// with the same Limit, Window and Burst admits (core.Policy.Meter).
func fluid(p core.Policy) bool { return p.Algorithm == core.AlgTokenBucket || p.Meter }

// counts is whether r counts at t for a window algorithm (see reach).
func counts(r request, t int64) bool { return t-r.at < r.reach }

// fixed: the requests in p's epoch-aligned window that holds t total at
// most p.Limit.
func (h *history) fixed(p core.Policy, t int64, show func(int64) string) string {
	w := int64(p.Window)
	var in []request
	for _, r := range h.reqs {
		if floorDiv(r.at, w) == floorDiv(t, w) && counts(r, t) {
			in = append(in, r)
		}
	}
	if sum := total(in); sum > p.Limit {
		return fmt.Sprintf("fixed window: the window [%s, %s) of %v that holds %s admitted %d, above Limit %d: %s",
			show(floorDiv(t, w)*w), show((floorDiv(t, w)+1)*w), p, show(t), sum, p.Limit, list(in, show))
	}
	return ""
}

// sliding: p.Buckets buckets of p ending with t's bucket total at most
// p.Limit, and p.Buckets+1 of them at most p.MaxInWindow.
func (h *history) sliding(p core.Policy, t int64, show func(int64) string) string {
	width := int64(p.Interval())
	k := floorDiv(t, width)
	for _, b := range []struct {
		from, most int64
	}{{k - p.Buckets + 1, p.Limit}, {k - p.Buckets, p.MaxInWindow()}} {
		var in []request
		for _, r := range h.reqs {
			if j := floorDiv(r.at, width); b.from <= j && j <= k && counts(r, t) {
				in = append(in, r)
			}
		}
		if sum := total(in); sum > b.most {
			return fmt.Sprintf("sliding window: the %d buckets [%s, %s) of %v that end with %s's admitted %d, above %d: %s",
				k-b.from+1, show(b.from*width), show((k+1)*width), p, show(t), sum, b.most, list(in, show))
		}
	}
	return ""
}

// leaky: each request is served no sooner than n intervals of its own
// policy after any request of cost n served before it (checked for the
// request just admitted against every other, which is the doc's rule for
// consecutive ones, since every earlier pair was checked when it was
// made); the requests not yet served at t (served at t or later) cost at
// most p.Burst, this one included.
func (h *history) leaky(p core.Policy, t int64, show func(int64) string) string {
	r, others := h.reqs[len(h.reqs)-1], h.reqs[:len(h.reqs)-1]
	for _, o := range others {
		a, b := o, r // a is served first (o, when both are served at once)
		if r.serve < o.serve {
			a, b = r, o
		}
		if gap := a.n * int64(a.pol.Interval()); b.serve-a.serve < gap {
			return fmt.Sprintf("leaky bucket: a request of cost %d admitted at %s under %v is served at %s, and another, of cost %d admitted at %s under %v, at %s: less than %d intervals (%v) later",
				a.n, show(a.at), a.pol, show(a.serve), b.n, show(b.at), b.pol, show(b.serve), a.n, time.Duration(gap))
		}
	}
	queued := []request{r}
	for _, o := range others {
		if o.serve >= t {
			queued = append(queued, o)
		}
	}
	if sum := total(queued); sum > p.Burst {
		return fmt.Sprintf("leaky bucket: at %s the requests not yet served cost %d, above Burst %d of %v: %s",
			show(t), sum, p.Burst, p, list(queued, show))
	}
	return ""
}

func total(rs []request) int64 {
	var sum int64
	for _, r := range rs {
		sum += r.n
	}
	return sum
}

// list shows requests for a failure: cost@instant (policy), at most 12.
func list(rs []request, show func(int64) string) string {
	var b strings.Builder
	for i, r := range rs {
		if i == 12 {
			fmt.Fprintf(&b, " ... (%d more)", len(rs)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d@%s (%s)", r.n, show(r.at), showPolicy(r.pol))
	}
	return b.String()
}

// RunPlanScenarios moves one key as [Suite.RunMoves] does and checks every
// admission against the promise of "Policies per call" in the package docs
// of core, on the key's history. It is skipped unless New builds a
// core.PolicyLimiter.
func (s Suite) RunPlanScenarios(t *testing.T) {
	for _, sc := range planScenarios() {
		t.Run(sc.name, func(t *testing.T) { s.planScenario(t, sc) })
	}
}

// planScenario is one scenario of RunPlanScenarios: calls on one key.
type planScenario struct {
	name  string
	steps []planStep
}

// planStep is times calls of cost n under pol at Epoch+at.
type planStep struct {
	at    time.Duration
	pol   core.Policy
	n     int64
	times int
}

// planScenarios are RunPlanScenarios' scenarios, each named after its way:
//
//   - SlidingWindowFewerBuckets: SlidingWindow(10, 10s), then the same with
//     5 buckets; 10 under the first at 0.5s, 10 under the second at 10s
//     (and the same on a 1s Window, at 50ms and 1s).
//   - FixedWindowShorterWindow: FixedWindow(10, 3s), then FixedWindow(10,
//     2s); 10 under the first at 2.99s, 10 under the second at 3s and 10
//     at 4s.
//   - TokenBucketToSlowPlan: TokenBucket(100000, 1s), then TokenBucket(1,
//     24h) with Burst 25000; 100000 under the first, then three calls of
//     21000 under the second (a store may reject that policy, whose
//     Recovery exceeds 2^52 ns), and the same to TokenBucket(1, 48h) with
//     Burst 25 (Recovery 50 days, which every store holds), three calls of
//     21.
//   - LeakyBucketFasterPlan: LeakyBucket(1, 1s) with Burst 5, five
//     requests at 0, then LeakyBucket(10, 1s), one request every 100ms
//     for 2s.
func planScenarios() []planScenario {
	slide := func(w, first time.Duration) []planStep {
		a := core.SlidingWindow(10, w).WithName("A")
		return []planStep{{first, a, 1, 10}, {w, a.WithBuckets(5).WithName("B"), 1, 10}}
	}
	fa, fb := core.FixedWindow(10, 3*time.Second).WithName("A"), core.FixedWindow(10, 2*time.Second).WithName("B")
	bulk := core.TokenBucket(100_000, time.Second).WithName("bulk")
	daily := core.TokenBucket(1, 24*time.Hour).WithBurst(25_000).WithName("daily")
	slow := core.TokenBucket(1, 48*time.Hour).WithBurst(25).WithName("slow")
	la, lb := core.LeakyBucket(1, time.Second).WithBurst(5).WithName("A"), core.LeakyBucket(10, time.Second).WithName("B")
	leaky := []planStep{{0, la, 1, 5}}
	for i := 1; i <= 20; i++ {
		leaky = append(leaky, planStep{time.Duration(i) * 100 * time.Millisecond, lb, 1, 1})
	}
	return []planScenario{
		{"SlidingWindowFewerBuckets/10s", slide(10*time.Second, 500*time.Millisecond)},
		{"SlidingWindowFewerBuckets/1s", slide(time.Second, 50*time.Millisecond)},
		{"FixedWindowShorterWindow", []planStep{{2990 * time.Millisecond, fa, 1, 10}, {3 * time.Second, fb, 1, 10}, {4 * time.Second, fb, 1, 10}}},
		{"TokenBucketToSlowPlan/daily", []planStep{{0, bulk, 100_000, 1}, {time.Millisecond, daily, 21_000, 3}}},
		{"TokenBucketToSlowPlan/48h", []planStep{{0, bulk, 100_000, 1}, {time.Millisecond, slow, 21, 3}}},
		{"LeakyBucketFasterPlan", leaky},
	}
}

func (s Suite) planScenario(t *testing.T, sc planScenario) {
	clock := NewClock(Epoch)
	lim := s.New(t, sc.steps[0].pol, clock.Now)
	defer closeLimiter(lim)
	pl, ok := lim.(core.PolicyLimiter)
	if !ok {
		t.Skip("not a core.PolicyLimiter")
	}
	show := func(ns int64) string { return "+" + time.Duration(ns-Epoch.UnixNano()).String() }
	h := newHistory()
	var calls strings.Builder
	for _, st := range sc.steps {
		now := Epoch.Add(st.at)
		clock.Set(now)
		for range st.times {
			d, err := pl.AllowPolicy(context.Background(), st.pol, "k", st.n)
			fmt.Fprintf(&calls, "  %s: AllowPolicy(%v, k, %d) -> %s", show(now.UnixNano()), st.pol, st.n, showDecision(d))
			if err != nil {
				fmt.Fprintf(&calls, " err %v", err)
			}
			calls.WriteString("\n")
			if err != nil {
				if int64(st.pol.Recovery()) > maxTestSpan {
					t.Logf("the store rejects %v, whose Recovery %v exceeds 2^52 ns: %v", st.pol, st.pol.Recovery(), err)
					return
				}
				t.Fatalf("%v\n%s", err, calls.String())
			}
			if !d.Allowed {
				continue
			}
			if msg := h.admit(st.pol, now.UnixNano(), int64(d.Delay), st.n, show); msg != "" {
				t.Errorf("%s\n\ncalls:\n%s", msg, calls.String())
				return
			}
		}
	}
}

// RunModel's calls of a core.PolicyLimiter other than decisions.

// getUsage makes one Get on key under a random plan and checks it: with
// the single-policy model while the key has stayed on that plan, for its
// shape otherwise; the next unit request under that plan at the same
// instant must agree with it.
func (c *modelCase) getUsage(key string) error {
	c.step++
	c.stats.gets++
	k := c.track(key)
	pol := c.plans[c.rng.IntN(len(c.plans))]
	at := c.frame()
	u, err := c.pl.Get(context.Background(), pol, key)
	e := event{op: "Get", key: key, pol: showPolicy(pol), u: u, now: c.now, at: at, err: err}
	c.note(e)
	k.note(e)
	k.look = nil
	op := fmt.Sprintf("Get(%s, %s)", showPolicy(pol), key)
	if err != nil {
		return c.failure(key, "%s: %v", op, err)
	}
	capacity := pol.Capacity()
	loose := at < max(k.h.last, k.since) || k.tainted
	switch {
	case u.Policy != pol:
		return c.failure(key, "%s -> %s: Policy %v, want %v", op, showUsage(u), u.Policy, pol)
	case u.Used < 0 || u.Remaining < 0 || u.Remaining > capacity || u.ResetAfter < 0:
		return c.failure(key, "%s -> %s: Used below 0, Remaining outside [0, %d] or a negative ResetAfter", op, showUsage(u), capacity)
	case !loose && (u.Remaining == capacity) != (u.ResetAfter == 0):
		return c.failure(key, "%s -> %s: Remaining at capacity must go with ResetAfter 0 (full quota), and only then", op, showUsage(u))
	}
	if loose {
		return nil
	}
	k.look = &look{pol: pol, at: at, allowed: u.Remaining >= 1, remaining: u.Remaining, reset: u.ResetAfter, op: op, answer: showUsage(u)}
	if !k.exact(pol) {
		c.stats.historyOnly++
		return nil
	}
	m := k.model(pol)
	v := m.decide(at, 1, false)
	want := core.Usage{Used: m.used(at), Remaining: v.remaining, ResetAfter: time.Duration(v.reset), Policy: pol}
	if c.s.Inexact {
		if u.Remaining > want.Remaining {
			return c.failure(key, "%s -> %s: the model, fed the requests the store admitted, leaves Remaining %d: a store may limit early, never late", op, showUsage(u), want.Remaining)
		}
		return nil
	}
	if u != want {
		return c.failure(key, "%s at +%v:\n   got %s\n  want %s (the model)%s", op, c.rel(at), showUsage(u), showUsage(want), c.showKey(k))
	}
	return nil
}

// setKey makes one Set on key under a random plan, of a usage within
// [0, capacity] or, one time in ten, outside it (ErrInvalidUsage, which
// changes nothing). A Set makes the key's history one request of that
// usage, under that plan: it is on one policy again.
func (c *modelCase) setKey(key string) error {
	c.step++
	k := c.track(key)
	pol := c.plans[c.rng.IntN(len(c.plans))]
	used := c.rng.Int64N(pol.Capacity() + 1)
	bad := c.rng.IntN(10) == 0
	if bad {
		used = pol.Capacity() + 1 + c.rng.Int64N(3)
		if c.rng.IntN(2) == 0 {
			used = -1 - c.rng.Int64N(3)
		}
	}
	at := c.frame()
	err := c.pl.Set(context.Background(), pol, key, used)
	e := event{op: "Set", key: key, pol: showPolicy(pol), n: used, now: c.now, at: at, err: err}
	c.note(e)
	k.note(e)
	k.look = nil
	if bad {
		c.stats.policyErrors++
		if !errors.Is(err, core.ErrInvalidUsage) {
			return c.failure(key, "Set(%s, %s, %d) returned %v, want core.ErrInvalidUsage", showPolicy(pol), key, used, err)
		}
		return nil
	}
	c.stats.sets++
	if err != nil {
		return c.failure(key, "Set(%s, %s, %d): %v", showPolicy(pol), key, used, err)
	}
	last := max(k.h.last, k.since)
	k.h.set(pol, at, used)
	k.km, k.kp, k.mixed = newKeyModel(pol), pol, false
	k.recent, k.recentP = nil, pol
	if used > 0 {
		k.km.decide(at, used, true)
		k.recent = []admission{{at, used}}
	}
	if at < last {
		// Set at an instant before the key's latest admission: what a
		// store keeps of it is not said; its history is still checked.
		k.tainted, k.maxAdmit = true, max(k.maxAdmit, last)
		k.note(event{op: "Set at an instant before its latest admission: its state leaves the model"})
	} else {
		k.tainted = false
	}
	return nil
}

// wrongPolicy makes one AllowPolicy, Get or Set on key under a policy of
// another algorithm (core.ErrAlgorithmMismatch) or an invalid one (its
// Validate error); neither changes anything, which the calls after it
// check.
func (c *modelCase) wrongPolicy(key string) error {
	c.step++
	c.stats.policyErrors++
	k := c.track(key)
	k.look = nil
	var others []core.Policy
	for _, p := range Policies() {
		if p.Algorithm != c.p.Algorithm {
			others = append(others, p)
		}
	}
	bad, mismatch := others[c.rng.IntN(len(others))], true
	if c.rng.IntN(2) == 0 {
		bad, mismatch = c.p, false
		bad.Limit = 0
	}
	e := event{key: key, pol: bad.String(), n: 1, now: c.now, at: c.frame()}
	switch c.rng.IntN(3) {
	case 0:
		e.op = "AllowPolicy"
		e.d, e.err = c.pl.AllowPolicy(context.Background(), bad, key, 1)
	case 1:
		e.op = "Get"
		e.u, e.err = c.pl.Get(context.Background(), bad, key)
	default:
		e.op, e.n = "Set", 0
		e.err = c.pl.Set(context.Background(), bad, key, 0)
	}
	c.note(e)
	k.note(e)
	switch {
	case mismatch && !errors.Is(e.err, core.ErrAlgorithmMismatch):
		return c.failure(key, "%s under %v returned %v, want core.ErrAlgorithmMismatch", e.op, bad, e.err)
	case !mismatch && (e.err == nil || !strings.Contains(e.err.Error(), bad.Validate().Error())):
		return c.failure(key, "%s under an invalid policy returned %v, want %v", e.op, e.err, bad.Validate())
	}
	return nil
}

// showKey says what the model knows of k, for a failure.
func (c *modelCase) showKey(k *tracked) string {
	if k.km == nil {
		return "\n(the key is new)"
	}
	return fmt.Sprintf("\n(the key has stayed on %s since it was new, Reset or Set)", showPolicy(k.kp))
}
