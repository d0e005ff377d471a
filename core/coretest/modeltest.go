package coretest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// Environment variables read by RunModel and RunProperties.
const (
	// envModelDuration is how long RunModel runs per store, as a
	// time.ParseDuration string; RunProperties spends half of it.
	envModelDuration = "RATELIMIT_MODEL_DURATION"
	// envModelSeed replays the one case with that seed, as printed by a
	// failure.
	envModelSeed = "RATELIMIT_MODEL_SEED"
)

// defaultModelDuration is RunModel's budget per store when
// RATELIMIT_MODEL_DURATION is not set.
const defaultModelDuration = 5 * time.Second

// variant is a policy family the random tests draw from: the four
// algorithms, and the leaky bucket as a meter.
type variant struct {
	name  string
	alg   core.Algorithm
	meter bool
}

var variants = []variant{
	{"FixedWindow", core.AlgFixedWindow, false},
	{"SlidingWindow", core.AlgSlidingWindow, false},
	{"TokenBucket", core.AlgTokenBucket, false},
	{"LeakyBucket", core.AlgLeakyBucket, false},
	{"LeakyBucketMeter", core.AlgLeakyBucket, true},
}

// A seed names its variant: seed % len(variants).
func seedOf(rng *rand.Rand, v int) uint64 {
	return (rng.Uint64()>>8)*uint64(len(variants)) + uint64(v)
}

func modelDuration(t *testing.T) time.Duration {
	s := os.Getenv(envModelDuration)
	if s == "" {
		return defaultModelDuration
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("coretest: %s=%q is not a positive duration", envModelDuration, s)
	}
	return d
}

// replaySeed returns the seed of RATELIMIT_MODEL_SEED, if set.
func replaySeed(t *testing.T) (uint64, bool) {
	s := os.Getenv(envModelSeed)
	if s == "" {
		return 0, false
	}
	seed, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("coretest: %s=%q is not a seed", envModelSeed, s)
	}
	return seed, true
}

// replayCommand is how to rerun the failing case of t.
func replayCommand(t *testing.T, seed uint64) string {
	return fmt.Sprintf("%s=%d go test -run '^%s$'", envModelSeed, seed, strings.ReplaceAll(t.Name(), "/", "$/^"))
}

// forEachSeed runs, for each variant in a subtest, f on fresh seeds until
// budget (split evenly between the variants) is spent or f fails, or on the
// replayed seed only. f returns how many store calls it made and whether it
// passed. It returns the calls made per variant.
func forEachSeed(t *testing.T, budget time.Duration, f func(t *testing.T, seed uint64, deadline time.Time) (int, bool), summary func(variant string) string) map[string]int {
	replay, isReplay := replaySeed(t)
	calls := map[string]int{}
	for vi, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			if isReplay {
				if replay%uint64(len(variants)) != uint64(vi) {
					t.Skipf("replaying seed %d, which is a %s case", replay, variants[replay%uint64(len(variants))].name)
				}
				n, _ := f(t, replay, time.Time{})
				calls[v.name] += n
				return
			}
			deadline := time.Now().Add(budget / time.Duration(len(variants)))
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(vi)))
			cases := 0
			for cases == 0 || time.Now().Before(deadline) {
				n, ok := f(t, seedOf(rng, vi), deadline)
				calls[v.name] += n
				cases++
				if !ok {
					break
				}
			}
			t.Logf("%d store calls in %d cases%s", calls[v.name], cases, summary(v.name))
		})
	}
	return calls
}

// randomPolicy returns a valid policy of the family that seed names (see
// RATELIMIT_MODEL_SEED), with a random Limit, Window, Burst or Buckets:
// mostly Windows from 1ms to a few hours at nanosecond resolution, token
// and leaky intervals from 100ns to 10s, Limit and Burst up to a few
// thousand, Buckets up to core.MaxBuckets; one in ten is extreme (Limit up
// to core.MaxWindowLimit, intervals down to 1ns, Bursts up to 2^52
// intervals). Window and Recovery stay within 2^52 ns (52 days), which
// every store of this module accepts.
func randomPolicy(rng *rand.Rand, seed uint64) core.Policy {
	if rng.IntN(10) == 0 {
		return extremePolicy(rng, variants[seed%uint64(len(variants))])
	}
	v := variants[seed%uint64(len(variants))]
	logUniform := func(lo, hi int64) int64 {
		x := math.Exp(math.Log(float64(lo)) + rng.Float64()*(math.Log(float64(hi))-math.Log(float64(lo))))
		return min(max(int64(x), lo), hi)
	}
	limit := func() int64 {
		switch r := rng.IntN(10); {
		case r < 4:
			return 1 + rng.Int64N(10)
		case r < 8:
			return 11 + rng.Int64N(90)
		}
		return 101 + rng.Int64N(900)
	}
	roundMs := func(d int64) int64 {
		if rng.IntN(2) == 0 {
			return max(d/int64(time.Millisecond), 1) * int64(time.Millisecond)
		}
		return d
	}
	for {
		var p core.Policy
		switch v.alg {
		case core.AlgFixedWindow:
			p = core.FixedWindow(limit(), time.Duration(roundMs(logUniform(int64(time.Millisecond), int64(time.Hour)))))
		case core.AlgSlidingWindow:
			var b int64
			switch r := rng.IntN(20); {
			case r < 10:
				b = 1 + rng.Int64N(12)
			case r < 19:
				b = 13 + rng.Int64N(88)
			default:
				b = 101 + rng.Int64N(core.MaxBuckets-100)
			}
			width := roundMs(logUniform(int64(time.Millisecond), max(int64(time.Hour)/b, int64(time.Millisecond))))
			p = core.SlidingWindow(limit(), time.Duration(width*b)).WithBuckets(b)
		default:
			l := limit()
			q := logUniform(100, int64(10*time.Second))
			w := q * l
			if rng.IntN(2) == 0 {
				w += rng.Int64N(w/1000 + 1) // a rate Window/Limit does not divide
			}
			p = core.TokenBucket(l, time.Duration(w))
			if v.alg == core.AlgLeakyBucket {
				p = core.LeakyBucket(l, time.Duration(w))
			}
			switch r := rng.IntN(10); {
			case r < 3:
			case r < 6:
				p = p.WithBurst(1 + rng.Int64N(l))
			default:
				p = p.WithBurst(1 + rng.Int64N(3*l))
			}
			if v.meter {
				p = p.AsMeter()
			}
		}
		if p.Validate() == nil {
			return p
		}
	}
}

// maxTestSpan bounds the Window and Recovery of randomPolicy.
const maxTestSpan = int64(1) << 52

func extremePolicy(rng *rand.Rand, v variant) core.Policy {
	logUniform := func(lo, hi int64) int64 {
		x := math.Exp(math.Log(float64(lo)) + rng.Float64()*(math.Log(float64(hi))-math.Log(float64(lo))))
		return min(max(int64(x), lo), hi)
	}
	for {
		var p core.Policy
		limit := logUniform(1, core.MaxWindowLimit)
		if rng.IntN(4) == 0 {
			limit = core.MaxWindowLimit
		}
		switch v.alg {
		case core.AlgFixedWindow:
			p = core.FixedWindow(limit, time.Duration(logUniform(int64(time.Millisecond), maxTestSpan)))
		case core.AlgSlidingWindow:
			b := logUniform(1, core.MaxBuckets)
			width := logUniform(int64(time.Millisecond), maxTestSpan/(b+1))
			p = core.SlidingWindow(limit, time.Duration(width*b)).WithBuckets(b)
		default:
			q := logUniform(1, int64(time.Millisecond))
			l := logUniform(1, maxTestSpan/q)
			p = core.TokenBucket(l, time.Duration(q*l)).WithBurst(logUniform(1, maxTestSpan/q))
			if v.alg == core.AlgLeakyBucket {
				p.Algorithm = core.AlgLeakyBucket
				p.Meter = v.meter
			}
		}
		if p.Validate() == nil && int64(p.Recovery()) <= maxTestSpan {
			return p
		}
	}
}

// maxLeapFrom is the latest instant the model test leaps forward from, so
// that its instants stay well before the year 2200.
var maxLeapFrom = Epoch.AddDate(60, 0, 0).UnixNano()

// grain is the time the policy takes to give back about one unit.
func grain(p core.Policy) int64 {
	switch p.Algorithm {
	case core.AlgFixedWindow:
		return max(1, int64(p.Window)/p.Limit)
	case core.AlgSlidingWindow:
		return max(1, min(int64(p.Interval()), int64(p.Window)/p.Limit))
	}
	return int64(p.Interval())
}

// closeLimiter closes lim when it can be, so that a run of many cases does
// not keep every limiter until the test ends.
func closeLimiter(lim core.Limiter) {
	if c, ok := lim.(io.Closer); ok {
		_ = c.Close()
	}
}

// RunModel drives limiters of random policies with seeded random traffic
// (every call of core.Limiter and core.PolicyLimiter, Sweep, clock steps
// forward and back) and compares every Decision and error, at nanosecond
// resolution, with a reference model of each algorithm built from the
// package docs of core. A limiter that implements io.Closer is closed when
// its case ends.
func (s Suite) RunModel(t *testing.T) {
	// Each case (one seed) builds a limiter for a randomPolicy, compares
	// every Decision and error with refModel, and makes modelSteps calls:
	// AllowN on three hot keys, a pool of cold keys and floods of new keys, with costs
	// that are mostly 1, up to the capacity, above it (a denial and
	// core.ErrCostExceedsCapacity) and <= 0 (core.ErrInvalidCost); Peek; Reset;
	// Sweep, when the suite has it; and clock moves: small and larger steps,
	// steps to the exact instant a previous answer named (ResetAfter,
	// RetryAfter, Delay, a window or bucket boundary, one nanosecond either
	// side), jumps beyond the policy's Recovery and, rarely, leaps of 2^31 to
	// 2^33 windows (up to 40 years), nanosecond jitter, and steps back.
	//
	// What a decision is compared with:
	//
	//   - By default every field of the Decision must equal the model's at the
	//     instant it is made: for a store with MonotonicClock the latest instant
	//     the clock has shown, otherwise the clock's instant.
	//   - Without MonotonicClock, a call at an instant earlier than its key's
	//     latest admission is not modelled (the model's time does not go back).
	//     Such a decision must be no more generous than standing still: what
	//     it admits, the model admits at that latest admission, and its
	//     Remaining is no larger. If it admits, the key's state leaves the
	//     model; until the key is Reset, or the clock reaches the policy's
	//     Recovery time after the latest instant it admitted at (by when any
	//     store's state is new again, and from which on the key is modelled
	//     afresh, calls before that instant counting as calls before its latest
	//     admission), its decisions are checked only for their shape.
	//   - With Inexact, the model is fed the requests the store admitted, and
	//     nothing the store admits (nor a Peek it allows) may be denied by the
	//     model: a store may limit early, never late.
	//
	// In every case the Decision has the shape every Decision has (Limit and
	// Policy set, Remaining within [0, capacity], RetryAfter > 0 exactly on a
	// denial that waiting can cure, Delay only for an admitted leaky-bucket
	// request, durations within Recovery, Remaining at capacity exactly when
	// ResetAfter is 0), and for each key between its Resets no interval of one
	// Window admits more than Policy.MaxInWindow.
	//
	// When the limiter is a core.PolicyLimiter, the traffic also mixes the
	// plans of plansFor (p and two other policies of its algorithm): each key
	// mostly uses one plan, moves to another now and then, and makes one-off
	// calls under others (AllowPolicy, or AllowN for p), with Get and Set
	// (valid and out of range) and calls under a policy of another algorithm
	// or an invalid one. Every admission is checked on the key's history of
	// admitted requests, across its changes of policy, as "Policies per call"
	// in the package docs of core states the promise (see history). A key that
	// has stayed on one policy since it was new, Reset or Set is compared
	// field by field as above, and MaxInWindow is checked per key since its
	// policy last changed. Once a key changed policy, its state depends on a
	// conversion the docs leave to the store (any that keeps the promise), so
	// until it is Reset or Set its decisions and usages are checked only for
	// what the docs promise whatever the conversion: the history, the shape
	// above (but no bound on durations), and at one instant a Peek or Get
	// agreeing with the next unit request under its policy (admitted exactly
	// when Remaining >= 1, then one less; denied with the same Remaining,
	// ResetAfter and, for a Peek, RetryAfter). So are a Peek, or a Get under
	// another policy, of a key on one policy, since they convert. Calls that
	// return an error (invalid cost, cost above capacity) are made only under
	// the policy in force for the key: whether they move a key is not said.
	//
	// The first failing case of each algorithm stops it and prints its seed,
	// the step and the history of the failing key. The run takes
	// RATELIMIT_MODEL_DURATION (default 5s) and logs the number of store
	// calls made. A limiter that implements io.Closer is closed when its case
	// ends.
	stats := map[string]*modelStats{}
	for _, v := range variants {
		stats[v.name] = &modelStats{}
	}
	calls := forEachSeed(t, modelDuration(t), func(t *testing.T, seed uint64, deadline time.Time) (int, bool) {
		return s.modelCase(t, seed, deadline, stats[variants[seed%uint64(len(variants))].name])
	}, func(v string) string { return stats[v].String() })
	total := 0
	for _, n := range calls {
		total += n
	}
	t.Logf("model: %d store calls %v", total, calls)
}

// modelSteps is the number of store calls in one case of RunModel.
const modelSteps = 2000

// modelStats counts what RunModel checked, so that its log shows the
// traffic reached what it is meant to reach.
type modelStats struct {
	exact, denied, refused, invalid, back, loose, early, resets, sweeps int
	// policies per call (PolicyLimiter only)
	perCall, moves, gets, sets, policyErrors int
	historyOnly, looks, admissions           int
}

func (s *modelStats) String() string {
	out := fmt.Sprintf(": %d decisions compared field by field (%d of them denials, %d costs above capacity), %d invalid costs, "+
		"%d decisions before their key's latest admission, %d checked for shape only, %d limited earlier than the model, %d Resets, %d Sweeps",
		s.exact, s.denied, s.refused, s.invalid, s.back, s.loose, s.early, s.resets, s.sweeps)
	if s.perCall+s.gets+s.sets > 0 {
		out += fmt.Sprintf("; policies per call: %d AllowPolicy, %d calls moving a key to another policy, %d Gets, %d Sets, %d calls with a wrong policy or usage, "+
			"%d calls of keys that changed policy (or views under another policy) checked without the model, %d Peeks or Gets compared with the next call; %d admissions checked on their key's history",
			s.perCall, s.moves, s.gets, s.sets, s.policyErrors, s.historyOnly, s.looks, s.admissions)
	}
	return out
}

// tracked is what a case knows of one key.
type tracked struct {
	h history // what it admitted, and the policy in force (see history)
	// km models the key while it stays on one policy, kp, since it was new
	// (km and kp zero), Reset or Set: the single-policy refModel. Once it
	// changes policy it is mixed, km nil, until Reset or Set.
	km       keyModel
	kp       core.Policy
	mixed    bool
	look     *look // its latest Peek or Get, when nothing has been called on it since
	plan     int   // the plan (index into modelCase.plans) traffic mostly uses for it
	tainted  bool  // its state left the model (see RunModel)
	maxAdmit int64 // the latest instant it admitted at, once tainted
	// since: after a tainted stretch, the store's state is new only from
	// this instant on; a call before it is a call before the key's latest
	// admission.
	since   int64
	recent  []admission // admissions since recentP became the key's policy
	recentP core.Policy
	history []event // the latest calls on the key
}

// look is a Peek (under the limiter's own policy) or a Get (under pol):
// at one instant, the next unit request under pol gets what it says.
type look struct {
	pol        core.Policy
	at         int64
	allowed    bool // Peek's Allowed; a Get's Remaining >= 1
	remaining  int64
	reset      time.Duration
	retry      time.Duration // Peek only
	peek       bool
	op, answer string
}

// exact reports whether a call under pol on k can be compared with the
// single-policy model: the key is new, or has stayed on pol.
func (k *tracked) exact(pol core.Policy) bool {
	return !k.mixed && (k.km == nil || k.kp == pol)
}

// model is the single-policy model of k under pol (exact(pol) holds).
func (k *tracked) model(pol core.Policy) keyModel {
	if k.km == nil {
		return newKeyModel(pol)
	}
	return k.km
}

// take records that pol takes effect for k at at (an admitted
// AllowPolicy): a change of policy makes the key mixed.
func (c *modelCase) take(k *tracked, pol core.Policy, at int64) {
	if k.h.pol != (core.Policy{}) && k.h.pol != pol {
		c.stats.moves++
	}
	k.h.take(pol, at)
	switch {
	case k.mixed:
	case k.km == nil:
		k.km, k.kp = newKeyModel(pol), pol
	case k.kp != pol:
		k.km, k.kp, k.mixed = nil, core.Policy{}, true
	}
}

// event is one thing a case did, formatted only when a failure shows it.
type event struct {
	op      string // "AllowN", "AllowPolicy", "Peek", "Get", "Set", "Reset", "Sweep", or a note to print as is
	key     string
	pol     string // AllowPolicy, Get, Set: the policy's name
	n       int64
	u       core.Usage
	now, at int64 // the clock's instant, and the instant the model decided at
	d       core.Decision
	err     error
}

type modelCase struct {
	t        *testing.T
	s        Suite
	p        core.Policy
	seed     uint64
	rng      *rand.Rand
	clock    *Clock
	lim      core.Limiter
	pl       core.PolicyLimiter // lim, when it is one: traffic then mixes plans
	plans    []core.Policy      // p and other policies of its algorithm (plansFor)
	rec      int64              // the longest a key's state can take to recover under any plan
	start    int64              // the clock's first instant
	now      int64              // the clock's instant
	high     int64              // the latest instant the clock has shown
	keys     map[string]*tracked
	step     int
	log      [30]event // the latest calls, any key, a ring from logged%30
	logged   int
	lastAt   int64   // when the latest decision was made
	lastDurs []int64 // its durations, for steps to exactly then
	fresh    int     // flood keys used
	stats    *modelStats
}

func (s Suite) modelCase(t *testing.T, seed uint64, deadline time.Time, stats *modelStats) (int, bool) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	p := randomPolicy(rng, seed)
	start := Epoch.UnixNano() + rng.Int64N(int64(24*time.Hour))
	c := &modelCase{
		t: t, s: s, p: p, seed: seed, rng: rng, clock: NewClock(time.Unix(0, start)),
		start: start, now: start, high: start, keys: map[string]*tracked{},
		lastAt: start, stats: stats,
	}
	c.lim = s.New(t, p, c.clock.Now)
	defer closeLimiter(c.lim)
	c.plans, c.rec = []core.Policy{p}, int64(p.Recovery())
	if pl, ok := c.lim.(core.PolicyLimiter); ok {
		c.pl, c.plans = pl, plansFor(rng, p)
		c.rec = recoveryBound(c.plans)
	}
	// The first instant is read by a valid call too (see next).
	first := func() error { return c.request(c.pickKey(), c.validCost) }
	for c.step < modelSteps {
		if !deadline.IsZero() && time.Now().After(deadline) {
			break
		}
		next := c.next
		if c.step == 0 {
			next = first
		}
		if err := next(); err != nil {
			t.Errorf("%v\n\npolicy %v%s, seed %d, store call %d\nreplay: %s", err, p, c.showPlans(), seed, c.step, replayCommand(t, seed))
			return c.step, false
		}
	}
	return c.step, true
}

// frame is the instant the model decides at.
func (c *modelCase) frame() int64 {
	if c.s.MonotonicClock {
		return c.high
	}
	return c.now
}

func (c *modelCase) setClock(ns int64) {
	c.now = ns
	c.high = max(c.high, ns)
	c.clock.Set(time.Unix(0, ns))
}

func (c *modelCase) rel(ns int64) string { return time.Duration(ns - c.start).String() }

// next makes one random move.
func (c *modelCase) next() error {
	if c.pl != nil {
		switch r := c.rng.IntN(100); {
		case r < 4:
			return c.getUsage(c.pickKey())
		case r < 7:
			return c.setKey(c.pickKey())
		case r < 8:
			return c.wrongPolicy(c.pickKey())
		}
	}
	r := c.rng.IntN(1000)
	switch {
	case r < 560:
		return c.request(c.pickKey(), c.cost)
	case r < 660:
		return c.call(c.pickKey(), 0, true)
	case r < 675:
		return c.reset(c.pickKey())
	case r < 685:
		// A flood of keys, half of them from a pool, half never seen.
		for range 20 + c.rng.IntN(80) {
			k := floodKeys[c.rng.IntN(len(floodKeys))]
			if c.rng.IntN(2) == 0 {
				c.fresh++
				k = "n" + strconv.Itoa(c.fresh)
			}
			if err := c.request(k, c.cost); err != nil {
				return err
			}
			if strings.HasPrefix(k, "n") {
				delete(c.keys, k) // never used again
			}
		}
		return nil
	case r < 695:
		if c.s.Sweep != nil {
			c.stats.sweeps++
			c.s.Sweep(c.lim)
			c.note(event{op: "Sweep", now: c.now, at: c.frame()})
		}
		return nil
	}
	// Every instant the clock shows is read by a valid AllowN before the
	// clock moves again (a call with an invalid cost need not read it), so
	// that a store with MonotonicClock has seen exactly the instants c.high
	// covers, whatever else reads its clock in the background.
	c.move()
	return c.request(c.pickKey(), c.validCost)
}

// Key names: hot, cold and flood-pool keys.
var (
	hotKeys   = names("h", 3)
	coldKeys  = names("c", 40)
	floodKeys = names("f", 200)
)

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

func (c *modelCase) pickKey() string {
	if c.rng.IntN(10) < 7 {
		return hotKeys[c.rng.IntN(len(hotKeys))]
	}
	return coldKeys[c.rng.IntN(len(coldKeys))]
}

// validCost is a cost from 1 to capacity.
func (c *modelCase) validCost(capacity int64) int64 { return 1 + c.rng.Int64N(capacity) }

// cost is a random cost for a policy of that capacity, sometimes invalid.
func (c *modelCase) cost(capacity int64) int64 {
	switch r := c.rng.IntN(100); {
	case r < 55:
		return 1
	case r < 85:
		return 1 + c.rng.Int64N(capacity)
	case r < 90:
		return capacity
	case r < 95:
		return capacity + 1 + c.rng.Int64N(3)
	case r < 97:
		return 0
	case r < 99:
		return -1 - c.rng.Int64N(10)
	}
	return math.MinInt64 + c.rng.Int64N(10)
}

// move moves the clock.
func (c *modelCase) move() {
	g, w, rec := grain(c.p), int64(c.p.Window), int64(c.p.Recovery())
	to := c.now
	switch r := c.rng.IntN(100); {
	case r < 35:
		to += c.rng.Int64N(g + 1)
	case r < 50:
		to += c.rng.Int64N(4*g + 1)
	case r < 58:
		to += c.rng.Int64N(w + 1)
	case r < 74:
		// Exactly when an answer said something changes, or a window or
		// bucket boundary, or one nanosecond either side.
		var at int64
		if len(c.lastDurs) > 0 && c.rng.IntN(3) > 0 {
			at = c.lastAt + c.lastDurs[c.rng.IntN(len(c.lastDurs))]
		} else {
			span := int64(c.p.Window)
			if c.p.Algorithm == core.AlgSlidingWindow {
				span = int64(c.p.Interval())
			}
			at = (floorDiv(c.frame(), span) + 1 + c.rng.Int64N(2)) * span
		}
		to = at + c.rng.Int64N(3) - 1
	case r < 78:
		to += rec + c.rng.Int64N(rec+1)
		if c.rng.IntN(20) == 0 && c.now < maxLeapFrom {
			// A leap of 2^31 to 2^33 windows (at most 40 years): what a
			// store that keeps window numbers in few bits gets wrong.
			// (w*k overflows int64 for a Window above about a second: the
			// leap is then 40 years, not a wrapped, negative one.)
			k, leap := 1<<31+c.rng.Int64N(3<<31), 40*365*24*int64(time.Hour)
			if w < leap/k {
				leap = w * k
			}
			to = c.now + leap
		}
	case r < 88:
		to += c.rng.Int64N(7) - 3
	case r < 93:
		to = c.high + c.rng.Int64N(g+1) // back to the latest instant, and on
	case r < 97:
		to -= c.rng.Int64N(g + 1)
	default:
		to -= c.rng.Int64N(w + 1)
	}
	c.setClock(to)
}

func (c *modelCase) note(e event) {
	c.log[c.logged%len(c.log)] = e
	c.logged++
}

func (k *tracked) note(e event) {
	if len(k.history) == 200 {
		k.history = append(k.history[:0], k.history[100:]...)
	}
	k.history = append(k.history, e)
}

func (c *modelCase) show(e event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "clock +%v", c.rel(e.now))
	if e.at != e.now {
		fmt.Fprintf(&b, " (decides at +%v)", c.rel(e.at))
	}
	switch e.op {
	case "AllowN":
		fmt.Fprintf(&b, ": AllowN(%s, %d) -> %s", e.key, e.n, showDecision(e.d))
	case "AllowPolicy":
		fmt.Fprintf(&b, ": AllowPolicy(%s, %s, %d) -> %s", e.pol, e.key, e.n, showDecision(e.d))
	case "Get":
		fmt.Fprintf(&b, ": Get(%s, %s) -> %s", e.pol, e.key, showUsage(e.u))
	case "Set":
		fmt.Fprintf(&b, ": Set(%s, %s, %d)", e.pol, e.key, e.n)
	case "Peek":
		fmt.Fprintf(&b, ": Peek(%s) -> %s", e.key, showDecision(e.d))
	case "Reset":
		fmt.Fprintf(&b, ": Reset(%s)", e.key)
	case "Sweep":
		fmt.Fprintf(&b, ": Sweep")
	default:
		return "  (" + e.op + ")"
	}
	if e.err != nil {
		fmt.Fprintf(&b, " err %v", e.err)
	}
	return b.String()
}

func (c *modelCase) track(key string) *tracked {
	k := c.keys[key]
	if k == nil {
		k = &tracked{h: newHistory()}
		if c.pl != nil {
			k.plan = c.rng.IntN(len(c.plans))
		}
		c.keys[key] = k
	}
	if since := k.maxAdmit + c.rec; k.tainted && c.frame() >= since {
		k.note(event{op: "idle for Recovery since its latest admission: new again"})
		// Its history stays, and so does a change of policy: a converted
		// state may take longer than Recovery to be new.
		*k = tracked{h: k.h, mixed: k.mixed, history: k.history, plan: k.plan, maxAdmit: k.maxAdmit, since: since}
	}
	return k
}

func (c *modelCase) reset(key string) error {
	c.step++
	c.stats.resets++
	err := c.lim.Reset(context.Background(), key)
	e := event{op: "Reset", key: key, now: c.now, at: c.frame(), err: err}
	c.note(e)
	k := c.track(key)
	k.note(e)
	*k = tracked{h: newHistory(), history: k.history, plan: k.plan}
	if err != nil {
		return c.failure(key, "Reset: %v", err)
	}
	return nil
}

func showDecision(d core.Decision) string {
	s := fmt.Sprintf("{Allowed:%v Remaining:%d ResetAfter:%v RetryAfter:%v Delay:%v", d.Allowed, d.Remaining, d.ResetAfter, d.RetryAfter, d.Delay)
	if d.Source != core.SourceStore {
		s += " Source:" + d.Source.String()
	}
	return s + "}"
}

// failure describes a failed check on key, with what led to it.
func (c *modelCase) failure(key, format string, args ...any) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", key)
	fmt.Fprintf(&b, format, args...)
	fmt.Fprintf(&b, "\n\nlatest calls on key %q (clock instants from the case's start at Unix %d ns):\n", key, c.start)
	if k := c.keys[key]; k != nil {
		h := k.history
		if len(h) > 60 {
			fmt.Fprintf(&b, "  ... earlier calls\n")
			h = h[len(h)-60:]
		}
		for _, e := range h {
			fmt.Fprintf(&b, "  %s\n", c.show(e))
		}
	}
	fmt.Fprintf(&b, "\nlatest calls, all keys:\n")
	for i := max(0, c.logged-len(c.log)); i < c.logged; i++ {
		fmt.Fprintf(&b, "  %s\n", c.show(c.log[i%len(c.log)]))
	}
	return errors.New(b.String())
}

// call makes one AllowN (or Peek) on key and checks its answer.
func (c *modelCase) call(key string, n int64, peek bool) error {
	return c.callPolicy(key, c.p, true, n, peek)
}

// request makes one AllowN or AllowPolicy of a cost drawn by cost on key,
// under the policy traffic picks for it (the limiter's own, unless it is
// a PolicyLimiter).
func (c *modelCase) request(key string, cost func(capacity int64) int64) error {
	if c.pl == nil {
		return c.callPolicy(key, c.p, true, cost(c.p.Capacity()), false)
	}
	k := c.track(key)
	i := k.plan
	switch r := c.rng.IntN(100); {
	case r < 8: // the key moves to another plan
		k.plan = c.rng.IntN(len(c.plans))
		i = k.plan
	case r < 15: // one call under another plan
		i = c.rng.IntN(len(c.plans))
	}
	pol := c.plans[i]
	n := cost(pol.Capacity())
	if (n <= 0 || n > pol.Capacity()) && k.h.pol != (core.Policy{}) {
		// Whether a call that is an error moves a key to its policy is
		// not said: such calls use the policy in force for the key.
		pol = k.h.pol
	}
	return c.callPolicy(key, pol, pol == c.p && c.rng.IntN(2) == 0, n, false)
}

// callPolicy makes one call on key and checks its answer: Peek (under the
// limiter's own policy), AllowN (own, under the limiter's own policy) or
// AllowPolicy(pol).
func (c *modelCase) callPolicy(key string, pol core.Policy, own bool, n int64, peek bool) error {
	c.step++
	k := c.track(key)
	at := c.frame()
	e := event{op: "AllowN", key: key, n: n, now: c.now, at: at, pol: showPolicy(pol)}
	op := "AllowN(" + key + ", " + strconv.FormatInt(n, 10) + ")"
	switch {
	case peek:
		e.op, op = "Peek", "Peek("+key+")"
		e.d, e.err = c.lim.Peek(context.Background(), key)
	case own:
		e.d, e.err = c.lim.AllowN(context.Background(), key, n)
	default:
		e.op, op = "AllowPolicy", fmt.Sprintf("AllowPolicy(%s, %s, %d)", showPolicy(pol), key, n)
		e.d, e.err = c.pl.AllowPolicy(context.Background(), pol, key, n)
		c.stats.perCall++
	}
	got, err := e.d, e.err
	c.note(e)
	k.note(e)
	c.lastAt, c.lastDurs = at, c.lastDurs[:0]
	for _, d := range []time.Duration{got.ResetAfter, got.RetryAfter, got.Delay} {
		if d > 0 {
			c.lastDurs = append(c.lastDurs, int64(d))
		}
	}

	capacity := pol.Capacity()
	if !peek && n <= 0 {
		if !errors.Is(err, core.ErrInvalidCost) {
			return c.failure(key, "%s returned error %v, want core.ErrInvalidCost", op, err)
		}
		c.stats.invalid++
		return nil
	}
	over := !peek && n > capacity
	switch {
	case over && !errors.Is(err, core.ErrCostExceedsCapacity):
		return c.failure(key, "%s (capacity %d) returned error %v, want core.ErrCostExceedsCapacity", op, capacity, err)
	case !over && err != nil:
		return c.failure(key, "%s returned error %v", op, err)
	}
	cost, consume := n, !peek && !over
	if !consume {
		cost = 1 // what Peek and a refused cost report
	}
	exact := k.exact(pol)
	prev := k.look
	k.look = nil
	last := max(k.h.last, k.since)
	back := at < last
	moves := consume && got.Allowed && k.h.pol != (core.Policy{}) && k.h.pol != pol
	if consume && got.Allowed { // a denial leaves the key as it was
		c.take(k, pol, at)
		if k.recentP != pol {
			// The policy in force changes: MaxInWindow is checked from now on.
			k.recent, k.recentP = nil, pol
		}
	}
	rec := c.rec
	if !exact {
		rec = math.MaxInt64 // the docs bound no duration of a converted key
	}
	if msg := shapeOf(pol, got, n, peek, over, back || k.tainted, rec); msg != "" {
		return c.failure(key, "%s: %s: %s", op, showDecision(got), msg)
	}
	// Calls on other keys may come between (not under Inexact, where they
	// may evict this key and change its state).
	if prev != nil && consume && n == 1 && prev.pol == pol && prev.at == at && !back && !c.s.Inexact {
		if msg := prev.agrees(got); msg != "" {
			return c.failure(key, "%s at +%v after %s -> %s at the same instant: %s -> %s: %s", op, c.rel(at), prev.op, prev.answer, op, showDecision(got), msg)
		}
		c.stats.looks++
	}
	if peek {
		k.look = &look{pol: pol, at: at, allowed: got.Allowed, remaining: got.Remaining, reset: got.ResetAfter, retry: got.RetryAfter,
			peek: true, op: op, answer: showDecision(got)}
	}
	admitted := got.Allowed && consume
	switch {
	case k.tainted:
		c.stats.loose++
		if consume && got.Allowed {
			// An admitted call writes the key, which the model no longer
			// knows: the store's state may live until Recovery after it.
			k.maxAdmit = max(k.maxAdmit, at)
		}
		return c.history(key, k, admitted, pol, at, got, n, false)
	case back:
		c.stats.back++
		if exact {
			still := k.model(pol).decide(last, cost, false)
			if got.Allowed && !still.allowed {
				return c.failure(key, "%s at +%v, before the key's latest admission (+%v), was admitted; standing still at +%v denies it: a clock that steps back must not add capacity", op, c.rel(at), c.rel(last), c.rel(last))
			}
			if got.Remaining > still.remaining {
				return c.failure(key, "%s at +%v, before the key's latest admission (+%v), reports Remaining %d; standing still at +%v leaves %d: a clock that steps back must not add capacity", op, c.rel(at), c.rel(last), got.Remaining, c.rel(last), still.remaining)
			}
		}
		if admitted || moves {
			k.tainted, k.maxAdmit, k.recent = true, max(k.maxAdmit, last), nil
			k.note(event{op: "admitted, or moved to another policy, at an instant before its latest admission: its state leaves the model"})
		}
		return c.history(key, k, admitted, pol, at, got, n, false)
	case !exact:
		c.stats.historyOnly++
		return c.history(key, k, admitted, pol, at, got, n, true)
	case c.s.Inexact:
		m := k.model(pol)
		want := m.decide(at, cost, false)
		if got.Allowed && !want.allowed {
			return c.failure(key, "%s was admitted; the model, fed the requests the store admitted for this key, denies it (%+v): a store may limit early, never late", op, want)
		}
		if !got.Allowed && want.allowed && !over {
			c.stats.early++
		}
		if admitted {
			m.decide(at, cost, true)
		}
		return c.history(key, k, admitted, pol, at, got, n, true)
	}
	v := k.model(pol).decide(at, cost, consume)
	want := decisionOf(pol, v)
	if over {
		want.Allowed, want.RetryAfter = false, 0
	}
	// Where the store decided (itself, or a cache of its denials) is not
	// for the model to say; shape checks that a cache only denies. Nor
	// the store's own clock reading (a clock that stepped back), which the
	// conformance suite checks.
	want.Source, want.At = got.Source, got.At
	if got != want {
		return c.failure(key, "%s at +%v:\n   got %s\n  want %s (the model)%s", op, c.rel(at), showDecision(got), showDecision(want), c.showKey(k))
	}
	c.stats.exact++
	if over {
		c.stats.refused++
	} else if !got.Allowed {
		c.stats.denied++
	}
	return c.history(key, k, admitted, pol, at, got, n, true)
}

// history checks an admission (when admitted) of cost n on key under pol
// at at on the key's history, and with bound set its MaxInWindow since
// its policy last changed.
func (c *modelCase) history(key string, k *tracked, admitted bool, pol core.Policy, at int64, d core.Decision, n int64, bound bool) error {
	if !admitted {
		return nil
	}
	c.stats.admissions++
	if msg := k.h.admit(pol, at, int64(d.Delay), n, c.rel); msg != "" {
		return c.failure(key, "%s\n(the key's history since it was new, Reset or Set breaks the promise of \"Policies per call\" in the package docs of core)", msg)
	}
	if bound {
		return c.bound(key, k, at, n, pol)
	}
	return nil
}

// agrees checks the unit request d made under l.pol at l's instant, right
// after l: admitted exactly when l said so, then with one less Remaining;
// denied with the same Remaining, ResetAfter and (after a Peek)
// RetryAfter.
func (l *look) agrees(d core.Decision) string {
	switch {
	case d.Allowed != l.allowed:
		return "Peek's Allowed (a Get's Remaining >= 1) is what the next unit request gets"
	case d.Allowed && d.Remaining != l.remaining-1:
		return "an admitted unit request leaves one less Remaining than the look before it"
	case !d.Allowed && (d.Remaining != l.remaining || d.ResetAfter != l.reset || (l.peek && d.RetryAfter != l.retry)):
		return "a denied unit request reports what the look before it did (Remaining, ResetAfter, Peek's RetryAfter)"
	}
	return ""
}

// bound records an admission of key at at under pol and checks that no
// interval of one Window ending there, since pol became the key's policy,
// admitted more than pol's MaxInWindow.
func (c *modelCase) bound(key string, k *tracked, at, n int64, pol core.Policy) error {
	k.recent = append(k.recent, admission{at, n})
	w := int64(pol.Window)
	i := 0
	for i < len(k.recent) && k.recent[i].at < at-w {
		i++
	}
	k.recent = k.recent[i:]
	var sum int64
	for _, a := range k.recent {
		sum += a.n
	}
	if most := pol.MaxInWindow(); sum > most {
		return c.failure(key, "admitted %d in [+%v, +%v], an interval of one Window of %s: more than MaxInWindow %d", sum, c.rel(at-w), c.rel(at), showPolicy(pol), most)
	}
	return nil
}

// shapeOf checks what every Decision under p must satisfy, and returns
// what is wrong, or "". loose skips the bounds that assume the clock did
// not step back. rec bounds every duration: p's Recovery, or more for a
// key that may have been moved from another policy with more used.
func shapeOf(p core.Policy, d core.Decision, n int64, peek, over, loose bool, recNs int64) string {
	capacity, rec := p.Capacity(), time.Duration(recNs)
	delays := p.Algorithm == core.AlgLeakyBucket && !p.Meter
	switch {
	case d.Limit != p.Limit || d.Policy != p:
		return fmt.Sprintf("Limit %d and Policy %v, want %d and %v", d.Limit, d.Policy, p.Limit, p)
	case d.Remaining < 0 || d.Remaining > capacity:
		return fmt.Sprintf("Remaining outside [0, %d]", capacity)
	case d.ResetAfter < 0 || d.RetryAfter < 0 || d.Delay < 0:
		return "a negative duration"
	case d.Allowed && d.RetryAfter != 0:
		return "admitted with a RetryAfter"
	case d.Source == core.SourceDenyCache && (d.Allowed || peek):
		return "a cache of denials admitted, or answered a Peek"
	case over && (d.Allowed || d.RetryAfter != 0):
		return "a cost above capacity must be denied with RetryAfter 0"
	case !over && !d.Allowed && d.RetryAfter == 0:
		return "denied with RetryAfter 0: a denial must say when to retry"
	case d.Delay != 0 && !(delays && d.Allowed && !peek && !over):
		return "a Delay, where only an admitted leaky-bucket request has one"
	case d.Allowed && !peek && d.Remaining > capacity-n:
		return fmt.Sprintf("admitted cost %d and reports Remaining above capacity-%d", n, n)
	case d.Allowed && !peek && d.ResetAfter == 0:
		return "admitted (consumed capacity) and reports ResetAfter 0 (at full quota)"
	case loose:
		return ""
	case d.ResetAfter > rec || d.RetryAfter > rec || d.Delay > rec:
		return fmt.Sprintf("a duration above the policy's Recovery %v", rec)
	case (d.Remaining == capacity) != (d.ResetAfter == 0):
		return "Remaining at capacity must go with ResetAfter 0 (full quota), and only then"
	}
	return ""
}
