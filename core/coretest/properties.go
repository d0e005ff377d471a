package coretest

import (
	"context"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// RunProperties checks each promise of "What is promised" in the package
// docs of core, and on a core.PolicyLimiter those of "Policies per call"
// and that a key is unaffected by other keys' policies, as a property of
// limiters of random policies at random phases.
func (s Suite) RunProperties(t *testing.T) {
	// In detail:
	//
	//	(a) a client sending at exactly Limit per Window (request i at
	//	    t0 + floor(i*Window/Limit)) is never denied;
	//	(b) no interval of one Window, ends included, admits more than
	//	    Policy.MaxInWindow, whatever the traffic;
	//	(c) a denied client that waits exactly RetryAfter and retries the same
	//	    cost is admitted (and, for a unit cost, one nanosecond earlier is
	//	    still denied);
	//	(d) floods of keys, forced sweeps, Reset and a full store never let a
	//	    key admit more than (b) allows between its Resets;
	//	(e) at one instant, Peek(key).Allowed is what the next unit AllowN(key)
	//	    gets; when denied, the two Decisions are equal, and when admitted,
	//	    the AllowN's Remaining is one less.
	//
	// When the limiter is a core.PolicyLimiter, two more, on the policies of
	// plansFor:
	//
	//	(f) a key that stays on one policy is unaffected by other keys'
	//	    policies: its every Decision and Usage equal those of a limiter of
	//	    its own (built by the same Suite.New) that sees only that key,
	//	    while other keys move between policies, are Set, Get and Reset;
	//	(g) every admission keeps the promise of "Policies per call" in the
	//	    package docs of core, checked on the key's history of admitted
	//	    requests across its changes of policy, Sets and Resets (see
	//	    history), while keys move between policies, make one-off calls
	//	    under others, and floods of keys under every policy come and go
	//	    (so that a store with a bound on its keys evicts);
	//	(h) every denial says exactly when to retry, whichever policy the
	//	    key is under: while one key moves between policies and makes
	//	    one-off calls under others (with Set, Get, Reset and clock
	//	    steps), after each denial the same call exactly RetryAfter later
	//	    is admitted and 1ns earlier is denied (no slack), and, one time
	//	    in three, a Get under that policy reports the full quota exactly
	//	    ResetAfter later and not 1ns earlier (and RetryAfter <=
	//	    ResetAfter); every admission is checked as in (g).
	//
	// The clock only moves forward here (RunModel steps it back). The
	// properties share half of RATELIMIT_MODEL_DURATION (default 5s) equally;
	// a failure prints the seed that replays it (RATELIMIT_MODEL_SEED).
	props := []property{
		{"a: a client at exactly Limit per Window is never denied", propSteady},
		{"b: no Window admits more than MaxInWindow", propBound},
		{"c: waiting RetryAfter admits", propRetry},
		{"d: floods, sweeps, Reset and a full store never over-admit", propNoOverAdmission},
		{"e: Peek agrees with the next unit AllowN", propPeek},
	}
	probe := s.New(t, core.TokenBucket(1, time.Second), time.Now)
	if _, ok := probe.(core.PolicyLimiter); ok {
		props = append(props, policyProperties...)
	}
	closeLimiter(probe)
	s.runProperties(t, props)
}

// property is one of RunProperties' properties.
type property struct {
	name string
	f    func(*propCase) bool
}

// policyProperties are the properties of PolicyLimiters.
var policyProperties = []property{
	{"f: a key on one policy is unaffected by other keys' policies", propIsolation},
	{"g: every admission keeps the promise on its key's history across policies", propHistory},
	{"h: a denial under any policy says exactly when to retry", propRetryAcrossPolicies},
}

// runProperties runs props, sharing half of RATELIMIT_MODEL_DURATION.
func (s Suite) runProperties(t *testing.T, props []property) {
	budget := modelDuration(t) / 2 / time.Duration(len(props))
	for _, prop := range props {
		t.Run(prop.name, func(t *testing.T) {
			forEachSeed(t, budget, func(t *testing.T, seed uint64, deadline time.Time) (int, bool) {
				c := s.newPropCase(t, seed)
				c.deadline = deadline
				defer closeLimiter(c.lim)
				ok := prop.f(c)
				if !ok {
					t.Logf("policy %v, seed %d\nreplay: %s", c.p, seed, replayCommand(t, seed))
				}
				return c.calls, ok
			}, func(string) string { return "" })
		})
	}
}

// propCase is one case of a property: a limiter of a random policy.
type propCase struct {
	t     *testing.T
	s     Suite
	rng   *rand.Rand
	p     core.Policy
	clock *Clock
	lim   core.Limiter
	now   int64
	calls int
	fresh int
	// deadline, when not zero, cuts long cases short once they have made
	// a few hundred calls (a replay runs the whole case).
	deadline time.Time
}

// fail reports that the case's property does not hold, and returns false.
func (c *propCase) fail(format string, args ...any) bool {
	c.t.Helper()
	c.t.Errorf(format, args...)
	return false
}

func (c *propCase) late() bool {
	return c.calls >= 300 && !c.deadline.IsZero() && time.Now().After(c.deadline)
}

func (s Suite) newPropCase(t *testing.T, seed uint64) *propCase {
	rng := rand.New(rand.NewPCG(seed, 0xa11))
	p := randomPolicy(rng, seed)
	now := Epoch.UnixNano() + rng.Int64N(int64(24*time.Hour)) // any phase
	c := &propCase{t: t, s: s, rng: rng, p: p, clock: NewClock(time.Unix(0, now)), now: now}
	c.lim = s.New(t, p, c.clock.Now)
	return c
}

func (c *propCase) set(ns int64) {
	c.now = ns
	c.clock.Set(time.Unix(0, ns))
}

func (c *propCase) allow(key string, n int64) core.Decision {
	c.calls++
	d, err := c.lim.AllowN(context.Background(), key, n)
	if err != nil {
		c.t.Errorf("AllowN(%s, %d): %v", key, n, err)
	}
	return d
}

func (c *propCase) peek(key string) core.Decision {
	c.calls++
	d, err := c.lim.Peek(context.Background(), key)
	if err != nil {
		c.t.Errorf("Peek(%s): %v", key, err)
	}
	return d
}

func (c *propCase) cost() int64 {
	if c.rng.IntN(2) == 0 {
		return 1
	}
	return 1 + c.rng.Int64N(c.p.Capacity())
}

// gap is a random forward step: mostly short, sometimes to the next
// window or bucket boundary (or a nanosecond either side), sometimes long.
func (c *propCase) gap() int64 {
	g := grain(c.p)
	switch r := c.rng.IntN(20); {
	case r < 10:
		return c.rng.Int64N(g + 1)
	case r < 15:
		return c.rng.Int64N(4*g + 1)
	case r < 18:
		span := int64(c.p.Window)
		if c.p.Algorithm == core.AlgSlidingWindow {
			span = int64(c.p.Interval())
		}
		return max(0, (floorDiv(c.now, span)+1)*span-c.now+c.rng.Int64N(3)-1)
	}
	return c.rng.Int64N(int64(c.p.Window) + 1)
}

// propSteady is (a).
func propSteady(c *propCase) bool {
	w, l := int64(c.p.Window), c.p.Limit
	t0 := c.now
	n := min(3*l, 3000) // three windows (at most 3000 calls)
	for i := range n {
		// floor(i*w/l) without overflow: i < 3l, so the quotient is below 3w.
		hi, lo := bits.Mul64(uint64(i), uint64(w))
		at, _ := bits.Div64(hi, lo, uint64(l))
		c.set(t0 + int64(at))
		d := c.allow("steady", 1)
		if !d.Allowed {
			return c.fail("request %d at t0+%v (t0 = Unix %d ns) of a client sending at exactly %d per %v was denied: %s",
				i, time.Duration(at), t0, l, c.p.Window, showDecision(d))
		}
	}
	return true
}

// maxClosed returns the largest total cost admitted in any closed interval
// [a, a+w] of the admissions (sorted by instant), and where it starts.
func maxClosed(adm []admission, w int64) (most, at int64) {
	hi := 0
	var sum int64
	for lo := range adm {
		for hi < len(adm) && adm[hi].at <= adm[lo].at+w {
			sum += adm[hi].n
			hi++
		}
		if sum > most {
			most, at = sum, adm[lo].at
		}
		sum -= adm[lo].n
	}
	return most, at
}

// propBound is (b): unit requests in bursts, far more than the policy
// admits, then the admitted instants are checked.
func propBound(c *propCase) bool {
	var adm []admission
	end := c.now + 4*int64(c.p.Window)
	for c.calls < 3000 && c.now < end && !c.late() {
		for range 1 + c.rng.IntN(int(min(2*c.p.Capacity(), 200))) {
			if d := c.allow("k", 1); d.Allowed {
				adm = append(adm, admission{c.now, 1})
			}
		}
		c.set(c.now + c.gap())
	}
	most, at := maxClosed(adm, int64(c.p.Window))
	if bound := c.p.MaxInWindow(); most > bound {
		return c.fail("%d admitted in [Unix %d, +%v] ns, more than MaxInWindow (%d)", most, at, c.p.Window, bound)
	}
	return true
}

// propRetry is (c).
func propRetry(c *propCase) bool {
	denials := 0
	for c.calls < 2000 && denials < 10 && !c.late() {
		n := c.cost()
		d := c.allow("k", n)
		if d.Allowed {
			if c.rng.IntN(3) == 0 {
				c.set(c.now + c.rng.Int64N(2*grain(c.p)+1))
			}
			continue
		}
		denials++
		if d.RetryAfter <= 0 {
			return c.fail("a denial of cost %d must say when to retry: %s", n, showDecision(d))
		}
		at := c.now + int64(d.RetryAfter)
		if n == 1 && d.RetryAfter > 1 {
			c.set(at - 1)
			early := c.peek("k")
			if early.Allowed {
				return c.fail("denied with RetryAfter %v, yet a unit request passes 1ns earlier: %s", d.RetryAfter, showDecision(early))
			}
		}
		c.set(at)
		again := c.allow("k", n)
		if !again.Allowed {
			return c.fail("denied cost %d with RetryAfter %v (%s); after waiting exactly that, denied again: %s", n, d.RetryAfter, showDecision(d), showDecision(again))
		}
	}
	return true
}

// traffic is the mixed load of (d) and (e): two hot keys, floods of keys
// from a pool and never seen, Reset, Sweep, forward clock steps.
type traffic struct {
	c        *propCase
	bound    bool                   // check (b) on every admission
	admitted map[string][]admission // per key, since its last Reset
}

func (tr *traffic) key() string {
	if tr.c.rng.IntN(3) > 0 {
		return fmt.Sprintf("h%d", tr.c.rng.IntN(2))
	}
	return fmt.Sprintf("f%d", tr.c.rng.IntN(300))
}

// request makes one AllowN and checks the key's admissions against (b).
func (tr *traffic) request(key string, n int64) bool {
	c := tr.c
	d := c.allow(key, n)
	if !d.Allowed || !tr.bound {
		return true
	}
	adm := append(tr.admitted[key], admission{c.now, n})
	w := int64(c.p.Window)
	adm = slices.DeleteFunc(adm, func(a admission) bool { return a.at < c.now-w })
	tr.admitted[key] = adm
	var sum int64
	for _, a := range adm {
		sum += a.n
	}
	if bound := c.p.MaxInWindow(); sum > bound {
		return c.fail("key %s admitted %d in [Unix %d, +%v] ns since its last Reset, more than MaxInWindow (%d)", key, sum, c.now-w, c.p.Window, bound)
	}
	return true
}

// move makes one random move other than the property's own check.
func (tr *traffic) move() bool {
	c := tr.c
	switch r := c.rng.IntN(100); {
	case r < 50:
		return tr.request(tr.key(), c.cost())
	case r < 55:
		k := tr.key()
		c.calls++
		if err := c.lim.Reset(context.Background(), k); err != nil {
			return c.fail("Reset(%s): %v", k, err)
		}
		delete(tr.admitted, k)
	case r < 65:
		for range 20 + c.rng.IntN(130) {
			k := fmt.Sprintf("f%d", c.rng.IntN(300))
			if c.rng.IntN(2) == 0 {
				c.fresh++
				k = fmt.Sprintf("n%d", c.fresh)
			}
			for range 1 + c.rng.IntN(3) {
				n := c.cost()
				if c.rng.IntN(2) == 0 {
					n = c.p.Capacity() // limited at once
				}
				if !tr.request(k, n) {
					return false
				}
			}
			if k[0] == 'n' {
				delete(tr.admitted, k)
			}
		}
	case r < 70:
		if c.s.Sweep != nil {
			c.s.Sweep(c.lim)
		}
	default:
		c.set(c.now + c.gap())
	}
	return true
}

// propNoOverAdmission is (d).
func propNoOverAdmission(c *propCase) bool {
	tr := &traffic{c: c, bound: true, admitted: map[string][]admission{}}
	for c.calls < 3000 && !c.late() {
		if !tr.move() {
			return false
		}
	}
	return true
}

// propPeek is (e).
func propPeek(c *propCase) bool {
	tr := &traffic{c: c, admitted: map[string][]admission{}}
	checked := 0
	for c.calls < 3000 && (checked == 0 || !c.late()) {
		if c.rng.IntN(3) > 0 {
			if !tr.move() {
				return false
			}
			continue
		}
		checked++
		k := tr.key()
		if c.rng.IntN(3) == 0 {
			if c.rng.IntN(2) == 0 {
				// Keys that use everything at once: a store short of
				// room then holds only limited keys.
				for range 20 + c.rng.IntN(130) {
					c.fresh++
					c.allow(fmt.Sprintf("n%d", c.fresh), c.p.Capacity())
				}
			}
			c.fresh++
			k = fmt.Sprintf("n%d", c.fresh) // a key never seen
		}
		p := c.peek(k)
		d := c.allow(k, 1)
		if d.Allowed != p.Allowed {
			return c.fail("%s: Peek says %s, the next unit AllowN at the same instant gets %s", k, showDecision(p), showDecision(d))
		}
		p.Source = d.Source // a cache of denials may answer the AllowN
		if !d.Allowed && d != p {
			return c.fail("%s: a denied Peek and the denied unit AllowN after it differ: Peek %+v, AllowN %+v", k, p, d)
		}
		if d.Allowed && d.Remaining != p.Remaining-1 {
			return c.fail("%s: Peek says %s, the unit AllowN after it %s: Remaining must drop by one", k, showDecision(p), showDecision(d))
		}
	}
	if checked == 0 {
		return c.fail("no check made")
	}
	return true
}

// costFor is a cost for p: 1 or up to its capacity.
func (c *propCase) costFor(p core.Policy) int64 {
	if c.rng.IntN(2) == 0 {
		return 1
	}
	return 1 + c.rng.Int64N(p.Capacity())
}

// decide is AllowPolicy(p), or AllowN when p is the limiter's own (half
// the time).
func (c *propCase) decide(lim core.PolicyLimiter, p core.Policy, key string, n int64) (core.Decision, error) {
	c.calls++
	if p == c.p && c.rng.IntN(2) == 0 {
		return lim.AllowN(context.Background(), key, n)
	}
	return lim.AllowPolicy(context.Background(), p, key, n)
}

// propIsolation is (f).
func propIsolation(c *propCase) bool {
	pl := c.lim.(core.PolicyLimiter)
	solo := c.s.New(c.t, c.p, c.clock.Now).(core.PolicyLimiter)
	defer closeLimiter(solo)
	plans := plansFor(c.rng, c.p)
	pol := plans[c.rng.IntN(len(plans))]
	ctx := context.Background()
	const k = "k"
	others := []string{"o0", "o1", "o2", "o3"}
	same := func(what string, got, want core.Decision, gotErr, wantErr error) bool {
		got.Source, want.Source = core.SourceStore, core.SourceStore
		switch {
		case gotErr != nil || wantErr != nil:
			return c.fail("%s: errors %v and, on a limiter that has only this key, %v", what, gotErr, wantErr)
		case got != want:
			return c.fail("%s under %v at Unix %d ns: the key's Decision differs from that of a limiter that has only this key: got %+v, want %+v", what, pol, c.now, got, want)
		}
		return true
	}
	checked := 0
	for c.calls < 2000 && (checked == 0 || !c.late()) {
		switch r := c.rng.IntN(100); {
		case r < 30:
			checked++
			n := c.costFor(pol)
			own := pol == c.p && c.rng.IntN(2) == 0
			var got, want core.Decision
			var gotErr, wantErr error
			if own {
				got, gotErr = pl.AllowN(ctx, k, n)
				want, wantErr = solo.AllowN(ctx, k, n)
			} else {
				got, gotErr = pl.AllowPolicy(ctx, pol, k, n)
				want, wantErr = solo.AllowPolicy(ctx, pol, k, n)
			}
			c.calls += 2
			if !same(fmt.Sprintf("AllowPolicy(%s, %d)", showPolicy(pol), n), got, want, gotErr, wantErr) {
				return false
			}
		case r < 35:
			c.calls += 2
			got, gotErr := pl.Peek(ctx, k)
			want, wantErr := solo.Peek(ctx, k)
			if !same("Peek", got, want, gotErr, wantErr) {
				return false
			}
		case r < 40:
			c.calls += 2
			p := plans[c.rng.IntN(len(plans))]
			got, gotErr := pl.Get(ctx, p, k)
			want, wantErr := solo.Get(ctx, p, k)
			if gotErr != nil || wantErr != nil {
				return c.fail("Get(%s): errors %v and, on a limiter that has only this key, %v", showPolicy(p), gotErr, wantErr)
			}
			if got != want {
				return c.fail("Get(%s) of a key under %v at Unix %d ns differs from that of a limiter that has only this key: got %+v, want %+v", showPolicy(p), pol, c.now, got, want)
			}
		case r < 80:
			o := others[c.rng.IntN(len(others))]
			p := plans[c.rng.IntN(len(plans))]
			var err error
			switch r := c.rng.IntN(20); {
			case r < 15:
				_, err = c.decide(pl, p, o, c.costFor(p))
			case r < 17:
				c.calls++
				_, err = pl.Get(ctx, p, o)
			case r < 19:
				c.calls++
				err = pl.Set(ctx, p, o, c.rng.Int64N(p.Capacity()+1))
			default:
				c.calls++
				err = pl.Reset(ctx, o)
			}
			if err != nil {
				return c.fail("a call on another key: %v", err)
			}
		default:
			c.set(c.now + c.gap())
		}
	}
	if checked == 0 {
		return c.fail("no check made")
	}
	return true
}

// propHistory is (g).
func propHistory(c *propCase) bool {
	pl := c.lim.(core.PolicyLimiter)
	plans := plansFor(c.rng, c.p)
	ctx := context.Background()
	type key struct {
		h    history
		plan core.Policy // what its traffic mostly uses
		log  []string    // its latest calls, for a failure
	}
	keys := map[string]*key{}
	of := func(name string) *key {
		k := keys[name]
		if k == nil {
			k = &key{h: newHistory(), plan: plans[c.rng.IntN(len(plans))]}
			keys[name] = k
		}
		return k
	}
	show := func(ns int64) string { return fmt.Sprintf("Unix %d ns", ns) }
	note := func(k *key, format string, args ...any) {
		if len(k.log) == 40 {
			k.log = k.log[1:]
		}
		k.log = append(k.log, fmt.Sprintf("Unix %d ns: ", c.now)+fmt.Sprintf(format, args...))
	}
	admitted := 0
	decide := func(name string, p core.Policy, n int64) bool {
		k := of(name)
		d, err := c.decide(pl, p, name, n)
		note(k, "AllowPolicy(%s, %d) -> %s", showPolicy(p), n, showDecision(d))
		if err != nil {
			return c.fail("key %s: %v", name, err)
		}
		if !d.Allowed {
			return true
		}
		admitted++
		msg := k.h.admit(p, c.now, int64(d.Delay), n, show)
		if msg != "" {
			return c.fail("key %s: %s\nlatest calls on it:\n  %s", name, msg, strings.Join(k.log, "\n  "))
		}
		return true
	}
	names := []string{"k0", "k1", "k2"}
	for c.calls < 3000 && (admitted == 0 || !c.late()) {
		name := names[c.rng.IntN(len(names))]
		k := of(name)
		switch r := c.rng.IntN(100); {
		case r < 60:
			if c.rng.IntN(8) == 0 {
				k.plan = plans[c.rng.IntN(len(plans))]
			}
			for range 1 + c.rng.IntN(int(min(2*k.plan.Capacity(), 100))) {
				p := k.plan
				if c.rng.IntN(10) == 0 {
					p = plans[c.rng.IntN(len(plans))] // a one-off call under another plan
				}
				if !decide(name, p, c.costFor(p)) {
					return false
				}
			}
		case r < 65:
			c.calls++
			p := plans[c.rng.IntN(len(plans))]
			used := c.rng.Int64N(p.Capacity() + 1)
			note(k, "Set(%s, %d)", showPolicy(p), used)
			if err := pl.Set(ctx, p, name, used); err != nil {
				return c.fail("Set(%s, %s, %d): %v", showPolicy(p), name, used, err)
			}
			k.h.set(p, c.now, used)
			k.plan = p
		case r < 67:
			c.calls++
			note(k, "Reset")
			if err := pl.Reset(ctx, name); err != nil {
				return c.fail("Reset(%s): %v", name, err)
			}
			k.h.reset()
		case r < 72:
			// A flood of keys, from a pool or never seen, under any plan.
			for range 20 + c.rng.IntN(80) {
				f := fmt.Sprintf("f%d", c.rng.IntN(300))
				if c.rng.IntN(2) == 0 {
					c.fresh++
					f = fmt.Sprintf("n%d", c.fresh)
				}
				p := plans[c.rng.IntN(len(plans))]
				n := c.costFor(p)
				if c.rng.IntN(2) == 0 {
					n = p.Capacity()
				}
				if !decide(f, p, n) {
					return false
				}
				if f[0] == 'n' {
					delete(keys, f)
				}
			}
		default:
			c.set(c.now + c.gap())
		}
	}
	if c.s.Inexact {
		// A store that limits early (WithMaxKeys under these floods, its
		// newcomers limited together) may admit nothing to the three keys
		// within the case: the promise held, there was nothing to check.
		return true
	}
	if admitted == 0 {
		return c.fail("nothing admitted")
	}
	return true
}

// propRetryAcrossPolicies is (h).
func propRetryAcrossPolicies(c *propCase) bool {
	r := &retryCase{c: c, pl: c.lim.(core.PolicyLimiter), plans: plansFor(c.rng, c.p), h: newHistory()}
	plan := r.plans[c.rng.IntN(len(r.plans))]
	denials := 0
	for c.calls < 2000 && (denials == 0 || !c.late()) {
		switch x := c.rng.IntN(100); {
		case x < 5:
			plan = r.plans[c.rng.IntN(len(r.plans))]
		case x < 9:
			if !r.setOrReset() {
				return false
			}
		case x < 30:
			c.set(c.now + c.gap())
		default:
			p := plan
			if c.rng.IntN(4) == 0 {
				p = r.plans[c.rng.IntN(len(r.plans))] // a one-off call under another plan
			}
			n := c.costFor(p)
			d, ok := r.call(p, n)
			if !ok {
				return false
			}
			if !d.Allowed {
				denials++
				if !r.obey(p, n, d) {
					return false
				}
			}
		}
	}
	if denials == 0 && !c.s.Inexact {
		return c.fail("no denial checked")
	}
	return true
}

// retryCase is one key of (h) and its history.
type retryCase struct {
	c     *propCase
	pl    core.PolicyLimiter
	plans []core.Policy
	h     history
	log   []string // the key's latest calls, for a failure
}

const retryKey = "k"

func (r *retryCase) note(format string, args ...any) {
	if len(r.log) == 40 {
		r.log = r.log[1:]
	}
	r.log = append(r.log, fmt.Sprintf("Unix %d ns: ", r.c.now)+fmt.Sprintf(format, args...))
}

func (r *retryCase) fail(format string, args ...any) bool {
	return r.c.fail("%s\nlatest calls on the key:\n  %s", fmt.Sprintf(format, args...), strings.Join(r.log, "\n  "))
}

// call decides a call of cost n under p, checking an admission on the
// key's history.
func (r *retryCase) call(p core.Policy, n int64) (core.Decision, bool) {
	d, err := r.c.decide(r.pl, p, retryKey, n)
	r.note("AllowPolicy(%s, %d) -> %s (the key under %s)", showPolicy(p), n, showDecision(d), showPolicy(r.h.pol))
	if err != nil {
		return d, r.fail("AllowPolicy(%s, %d): %v", showPolicy(p), n, err)
	}
	if d.Allowed {
		if msg := r.h.admit(p, r.c.now, int64(d.Delay), n, func(ns int64) string { return fmt.Sprintf("Unix %d ns", ns) }); msg != "" {
			return d, r.fail("%s", msg)
		}
	}
	return d, true
}

// setOrReset Sets the key to a random usage under a random plan, or, one
// time in four, Resets it.
func (r *retryCase) setOrReset() bool {
	ctx := context.Background()
	r.c.calls++
	if r.c.rng.IntN(4) == 0 {
		r.note("Reset")
		r.h.reset()
		if err := r.pl.Reset(ctx, retryKey); err != nil {
			return r.fail("Reset: %v", err)
		}
		return true
	}
	p := r.plans[r.c.rng.IntN(len(r.plans))]
	used := r.c.rng.Int64N(p.Capacity() + 1)
	r.note("Set(%s, %d)", showPolicy(p), used)
	r.h.set(p, r.c.now, used)
	if err := r.pl.Set(ctx, p, retryKey, used); err != nil {
		return r.fail("Set(%s, %d): %v", showPolicy(p), used, err)
	}
	return true
}

// full reports whether Get under p says the key is at p's full quota.
func (r *retryCase) full(p core.Policy) (full, ok bool) {
	r.c.calls++
	u, err := r.pl.Get(context.Background(), p, retryKey)
	r.note("Get(%s) -> %s", showPolicy(p), showUsage(u))
	if err != nil {
		return false, r.fail("Get(%s): %v", showPolicy(p), err)
	}
	return u.Remaining == p.Capacity(), true
}

// obey checks the denial d of cost n under p: RetryAfter no later than
// ResetAfter; then either the same call 1ns before RetryAfter is denied
// and at RetryAfter admitted, or, one time in three, Get under p reports
// the full quota at ResetAfter and not 1ns before (and the call is then
// admitted).
func (r *retryCase) obey(p core.Policy, n int64, d core.Decision) bool {
	c := r.c
	if d.RetryAfter <= 0 || d.RetryAfter > d.ResetAfter {
		return r.fail("a denial must say when to retry, no later than its full quota is back: %s", showDecision(d))
	}
	at, wait := c.now, d.RetryAfter
	if c.rng.IntN(3) == 0 {
		c.set(at + int64(d.ResetAfter) - 1)
		if full, ok := r.full(p); !ok || full {
			return ok && r.fail("denied with ResetAfter %v, yet Get(%s) 1ns before reports the full quota", d.ResetAfter, showPolicy(p))
		}
		c.set(at + int64(d.ResetAfter))
		if full, ok := r.full(p); !ok || !full {
			return ok && r.fail("denied with ResetAfter %v; Get(%s) then does not report the full quota", d.ResetAfter, showPolicy(p))
		}
	} else {
		if wait > 1 {
			c.set(at + int64(wait) - 1)
			if early, ok := r.call(p, n); !ok || early.Allowed {
				return ok && r.fail("denied cost %d under %s with RetryAfter %v, yet admitted 1ns earlier", n, showPolicy(p), wait)
			}
		}
		c.set(at + int64(wait))
	}
	if again, ok := r.call(p, n); !ok || !again.Allowed {
		return ok && r.fail("denied cost %d under %s with RetryAfter %v; waited %v, denied again: %s", n, showPolicy(p), wait, time.Duration(c.now-at), showDecision(again))
	}
	return true
}
