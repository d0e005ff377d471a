package coretest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// The conformance cases of core.PolicyLimiter ("Policies per call" in the
// package docs of core), run by Suite.Run when the limiter under test
// implements it. Each table is worked out by hand from the docs; the
// package's own tests hold the reference refModel to the same tables.

// pop is what one step of a policy table does.
type pop uint8

const (
	opAllow pop = iota // AllowPolicy(policies[p], key, n)
	opOwn              // AllowN(key, n), under the limiter's own policy
	opPeek             // Peek(key)
	opGet              // Get(policies[p], key)
	opSet              // Set(policies[p], key, n)
)

func (o pop) String() string {
	return [...]string{"AllowPolicy", "AllowN", "Peek", "Get", "Set"}[o]
}

// pstep is one step of a policy table, at Epoch+at. The expected answer:
// a Decision (Allowed ok, Remaining rem, ResetAfter reset, RetryAfter
// retry, Delay delay, Limit and Policy of the step's policy) for opAllow,
// opOwn and opPeek; a Usage (Used used, Remaining rem, ResetAfter reset)
// for opGet; for opSet, err (nil: success).
type pstep struct {
	at                  time.Duration
	op                  pop
	p                   int // index into the table's policies; opOwn and opPeek use 0
	n                   int64
	ok                  bool
	rem, used           int64
	reset, retry, delay time.Duration
	err                 error
}

// policyTable is one case: a key decided under policies[0] (the limiter's
// own) and others of the same algorithm.
type policyTable struct {
	name     string
	policies []core.Policy
	steps    []pstep
}

// policyTarget is what a table runs against: a store at an instant, or
// the refModel.
type policyTarget interface {
	at(d time.Duration)
	allowPolicy(p core.Policy, n int64) (core.Decision, error)
	allowN(n int64) (core.Decision, error)
	peek() (core.Decision, error)
	get(p core.Policy) (core.Usage, error)
	set(p core.Policy, used int64) error
}

// runPolicyTable runs tc's steps against target and checks every answer.
func runPolicyTable(t *testing.T, tc policyTable, target policyTarget) {
	t.Helper()
	for i, st := range tc.steps {
		p := tc.policies[st.p]
		if st.op == opOwn || st.op == opPeek {
			p = tc.policies[0]
		}
		target.at(st.at)
		what := fmt.Sprintf("step %d: %v(%q, %d) at +%v", i, st.op, p.Name, st.n, st.at)
		switch st.op {
		case opAllow, opOwn, opPeek:
			var d core.Decision
			var err error
			switch st.op {
			case opAllow:
				d, err = target.allowPolicy(p, st.n)
			case opOwn:
				d, err = target.allowN(st.n)
			default:
				d, err = target.peek()
			}
			if err != nil {
				t.Fatalf("%v: %v", what, err)
			}
			want := core.Decision{
				Allowed: st.ok, Limit: p.Limit, Remaining: st.rem, ResetAfter: st.reset,
				RetryAfter: st.retry, Delay: st.delay, Policy: p,
				At: d.At, // the conformance suite's steps check it
			}
			if d.Source == core.SourceDenyCache && !d.Allowed && st.op != opPeek {
				want.Source = d.Source // a store's cache of its denials may answer a denial
			}
			if d != want {
				t.Fatalf("%v: d = %+v, want %+v", what, d, want)
			}
		case opGet:
			u, err := target.get(p)
			if err != nil {
				t.Fatalf("%v: %v", what, err)
			}
			if want := (core.Usage{Used: st.used, Remaining: st.rem, ResetAfter: st.reset, Policy: p}); u != want {
				t.Fatalf("%v: u = %+v, want %+v", what, u, want)
			}
		case opSet:
			err := target.set(p, st.n)
			if st.err == nil {
				if err != nil {
					t.Fatalf("%v: %v", what, err)
				}
			} else {
				if !errors.Is(err, st.err) {
					t.Fatalf("%v: got %v, want %v", what, err, st.err)
				}
			}
		}
	}
}

// storeTarget runs a table on one key of a PolicyLimiter reading clock.
type storeTarget struct {
	lim   core.PolicyLimiter
	clock *Clock
	key   string
}

func (s *storeTarget) at(d time.Duration) { s.clock.Set(Epoch.Add(d)) }
func (s *storeTarget) allowPolicy(p core.Policy, n int64) (core.Decision, error) {
	return s.lim.AllowPolicy(context.Background(), p, s.key, n)
}
func (s *storeTarget) allowN(n int64) (core.Decision, error) {
	return s.lim.AllowN(context.Background(), s.key, n)
}
func (s *storeTarget) peek() (core.Decision, error) { return s.lim.Peek(context.Background(), s.key) }
func (s *storeTarget) get(p core.Policy) (core.Usage, error) {
	return s.lim.Get(context.Background(), p, s.key)
}
func (s *storeTarget) set(p core.Policy, used int64) error {
	return s.lim.Set(context.Background(), p, s.key, used)
}

// policyLimiter builds the limiter under test for p and returns it as a
// PolicyLimiter, or skips t when it is not one.
func (s Suite) policyLimiter(t *testing.T, p core.Policy, now func() time.Time) core.PolicyLimiter {
	t.Helper()
	lim := s.New(t, p, now)
	pl, ok := lim.(core.PolicyLimiter)
	if !ok {
		t.Skipf("%T does not implement core.PolicyLimiter", lim)
	}
	return pl
}

// policies runs the per-call policy cases.
func (s Suite) policies(t *testing.T) {
	for _, tc := range policyTables() {
		t.Run(tc.name, func(t *testing.T) {
			clock := NewClock(Epoch)
			lim := s.policyLimiter(t, tc.policies[0], clock.Now)
			runPolicyTable(t, tc, &storeTarget{lim: lim, clock: clock, key: key(t, "k")})
		})
	}
	for _, p := range Policies() {
		t.Run(name(p)+"/errors change nothing", func(t *testing.T) { s.policyErrors(t, p) })
	}
}

// otherAlgorithm returns a valid policy of another algorithm than p's.
func otherAlgorithm(p core.Policy) core.Policy {
	if p.Algorithm == core.AlgFixedWindow {
		return core.TokenBucket(5, time.Second)
	}
	return core.FixedWindow(5, time.Minute)
}

// policyErrors: another algorithm, an invalid policy, a usage out of range
// and invalid costs under another policy are errors and leave the key as
// it was; Get of a key never seen reports it unused.
func (s Suite) policyErrors(t *testing.T, p core.Policy) {
	clock := NewClock(Epoch.Add(10 * time.Second))
	lim := s.policyLimiter(t, p, clock.Now)
	ctx := context.Background()
	k := key(t, "k")

	u, err := lim.Get(ctx, p, key(t, "never-seen"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (core.Usage{Remaining: p.Capacity(), Policy: p}); u != want {
		t.Errorf("a key never seen: u = %+v, want %+v", u, want)
	}

	d, err := lim.AllowN(ctx, k, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed {
		t.Fatalf("denied, want allowed: %+v", d)
	}
	before, err := lim.Get(ctx, p, k)
	if err != nil {
		t.Fatal(err)
	}
	if before.Used != 1 {
		t.Fatalf("before.Used = %+v, want 1", before.Used)
	}

	other := otherAlgorithm(p)
	_, err = lim.AllowPolicy(ctx, other, k, 1)
	if !errors.Is(err, core.ErrAlgorithmMismatch) {
		t.Errorf("AllowPolicy(%v): got %v, want %v", other, err, core.ErrAlgorithmMismatch)
	}
	_, err = lim.Get(ctx, other, k)
	if !errors.Is(err, core.ErrAlgorithmMismatch) {
		t.Errorf("Get(%v): got %v, want %v", other, err, core.ErrAlgorithmMismatch)
	}
	if err := lim.Set(ctx, other, k, 0); !errors.Is(err, core.ErrAlgorithmMismatch) {
		t.Errorf("Set(%v): lim.Set(ctx, other, k, 0): got %v, want %v", other, err, core.ErrAlgorithmMismatch)
	}

	invalid := p
	invalid.Limit = 0
	for _, err := range []error{
		func() error { _, err := lim.AllowPolicy(ctx, invalid, k, 1); return err }(),
		func() error { _, err := lim.Get(ctx, invalid, k); return err }(),
		lim.Set(ctx, invalid, k, 0),
	} {
		if err == nil || !strings.Contains(err.Error(), "limit") || errors.Is(err, core.ErrAlgorithmMismatch) {
			t.Errorf("a policy with Limit 0: got %v, want an error naming the limit, not ErrAlgorithmMismatch", err)
		}
	}

	bigger := p.WithName("bigger")
	bigger.Limit *= 2
	if bigger.Burst != 0 {
		bigger.Burst *= 2
	}
	if err := bigger.Validate(); err != nil {
		t.Fatalf("bigger.Validate(): %v", err)
	}
	for _, used := range []int64{-1, bigger.Capacity() + 1} {
		if err := lim.Set(ctx, bigger, k, used); !errors.Is(err, core.ErrInvalidUsage) {
			t.Errorf("Set(%d) under capacity %d: lim.Set(ctx, bigger, k, used): got %v, want %v", used, bigger.Capacity(), err, core.ErrInvalidUsage)
		}
	}
	if err := lim.Set(ctx, p, k, p.Capacity()+1); !errors.Is(err, core.ErrInvalidUsage) {
		t.Errorf("lim.Set(ctx, p, k, p.Capacity()+1): got %v, want %v", err, core.ErrInvalidUsage)
	}
	_, err = lim.AllowPolicy(ctx, bigger, k, 0)
	if !errors.Is(err, core.ErrInvalidCost) {
		t.Errorf("got %v, want %v", err, core.ErrInvalidCost)
	}
	d, err = lim.AllowPolicy(ctx, bigger, k, bigger.Capacity()+1)
	if !errors.Is(err, core.ErrCostExceedsCapacity) {
		t.Errorf("got %v, want %v", err, core.ErrCostExceedsCapacity)
	}
	if d.Allowed {
		t.Errorf("allowed, want denied: %+v", d)
	}
	if d.Policy != bigger {
		t.Errorf("a refused cost is answered under the call's policy: d.Policy = %+v, want %+v", d.Policy, bigger)
	}
	if d.Limit != bigger.Limit {
		t.Errorf("d.Limit = %+v, want %+v", d.Limit, bigger.Limit)
	}
	// A key never seen is at its full quota under any policy.
	d, err = lim.AllowPolicy(ctx, bigger, key(t, "new"), bigger.Capacity()+1)
	if !errors.Is(err, core.ErrCostExceedsCapacity) {
		t.Errorf("got %v, want %v", err, core.ErrCostExceedsCapacity)
	}
	if want := (core.Decision{Limit: bigger.Limit, Remaining: bigger.Capacity(), Policy: bigger, At: d.At}); d != want {
		t.Errorf("a cost above capacity under another policy than the limiter's, on a key never seen: d = %+v, want %+v", d, want)
	}

	after, err := lim.Get(ctx, p, k)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("errors must leave the key as it was: after = %+v, want %+v", after, before)
	}
	// Nothing above moved the key: its own policy applies unconverted.
	want, err := lim.Peek(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if want.Remaining != p.Capacity()-1 {
		t.Errorf("the reference's Remaining = %d, want %d", want.Remaining, p.Capacity()-1)
	}
}

func named(p core.Policy, name string) core.Policy { return p.WithName(name) }

// policyTables are the hand-worked cases, per algorithm: a key moved to
// another policy keeps what it used and AllowN converts it back; a plan's
// limit raised and lowered mid-window; Get changes nothing; Set; and a
// denied call leaves the key as it was.
func policyTables() []policyTable {
	const s = time.Second
	var (
		// Token bucket: free 10/s burst 5 (100ms a token), pro 20/s burst
		// 10 (50ms), tiny 10/s burst 2.
		tbFree = named(core.TokenBucket(10, s).WithBurst(5), "free")
		tbPro  = named(core.TokenBucket(20, s).WithBurst(10), "pro")
		tbTiny = named(core.TokenBucket(10, s).WithBurst(2), "tiny")
		// A plan changed by configuration: 10/s, then 20/s, then 5/s
		// (200ms a token) burst 8.
		tbPlan1 = named(core.TokenBucket(10, s), "plan")
		tbPlan2 = named(core.TokenBucket(20, s), "plan")
		tbPlan3 = named(core.TokenBucket(5, s).WithBurst(8), "plan")

		// Leaky bucket: free 10/s depth 3, pro 20/s depth 6, tiny depth 1.
		lbFree  = named(core.LeakyBucket(10, s).WithBurst(3), "free")
		lbPro   = named(core.LeakyBucket(20, s).WithBurst(6), "pro")
		lbTiny  = named(core.LeakyBucket(10, s).WithBurst(1), "tiny")
		lbPlan1 = named(core.LeakyBucket(10, s), "plan")
		lbPlan2 = named(core.LeakyBucket(20, s), "plan")
		lbPlan3 = named(core.LeakyBucket(5, s).WithBurst(6), "plan")

		// Fixed window: free 3 a minute, pro 5 an hour; a plan of 3, 5,
		// then 2 a minute.
		fwFree  = named(core.FixedWindow(3, time.Minute), "free")
		fwPro   = named(core.FixedWindow(5, time.Hour), "pro")
		fwPlan3 = named(core.FixedWindow(3, time.Minute), "plan")
		fwPlan5 = named(core.FixedWindow(5, time.Minute), "plan")
		fwPlan2 = named(core.FixedWindow(2, time.Minute), "plan")

		// Sliding window: free 10/s in 10 buckets of 100ms; pro 20/s, the
		// same geometry; other 10 per 2s in 4 buckets of 500ms.
		swFree  = named(core.SlidingWindow(10, s), "free")
		swPro   = named(core.SlidingWindow(20, s), "pro")
		swOther = named(core.SlidingWindow(10, 2*s).WithBuckets(4), "other")
		swPlan1 = named(core.SlidingWindow(10, s), "plan")
		swPlan2 = named(core.SlidingWindow(20, s), "plan")
		swPlan3 = named(core.SlidingWindow(5, s), "plan")
	)
	return []policyTable{
		// Token bucket.
		{"TokenBucket/moved keeps its debt, rescaled exactly", []core.Policy{tbFree, tbPro}, []pstep{
			{at: 0, op: opAllow, p: 0, n: 4, ok: true, rem: 1, reset: 400 * ms},
			// 4 tokens owed are 200ms at pro's rate; 300ms of 500 left.
			{at: 0, op: opAllow, p: 1, n: 1, ok: true, rem: 5, reset: 250 * ms},
			// Refilled at pro's rate: 150ms owed, 3 tokens.
			{at: 100 * ms, op: opGet, p: 1, used: 3, rem: 7, reset: 150 * ms},
			// 130ms at pro's rate is 2.6 tokens: 260ms at free's. A Get
			// only looks: the key, still under pro, is full in 130ms.
			{at: 120 * ms, op: opGet, p: 0, used: 3, rem: 2, reset: 130 * ms},
			{at: 120 * ms, op: opOwn, n: 2, ok: true, rem: 0, reset: 460 * ms},
			{at: 120 * ms, op: opOwn, n: 1, rem: 0, reset: 460 * ms, retry: 60 * ms},
			{at: 180 * ms, op: opOwn, n: 1, ok: true, rem: 0, reset: 500 * ms},
			{at: 180 * ms, op: opPeek, rem: 0, reset: 500 * ms, retry: 100 * ms},
		}},
		{"TokenBucket/moved to a smaller Burst than it used", []core.Policy{tbFree, tbTiny}, []pstep{
			{at: 0, op: opAllow, p: 0, n: 5, ok: true, rem: 0, reset: 500 * ms},
			// 4 tokens owed, burst 2: 2 below empty.
			{at: 100 * ms, op: opAllow, p: 1, n: 1, rem: 0, reset: 400 * ms, retry: 300 * ms},
			{at: 100 * ms, op: opGet, p: 1, used: 4, rem: 0, reset: 400 * ms},
			{at: 399 * ms, op: opAllow, p: 1, n: 1, rem: 0, reset: 101 * ms, retry: ms},
			{at: 400 * ms, op: opAllow, p: 1, n: 1, ok: true, rem: 0, reset: 200 * ms},
			{at: 400 * ms, op: opOwn, n: 1, ok: true, rem: 2, reset: 300 * ms},
		}},
		{"TokenBucket/a plan's limit raised then lowered", []core.Policy{tbPlan1, tbPlan2, tbPlan3}, []pstep{
			{at: 0, op: opOwn, n: 6, ok: true, rem: 4, reset: 600 * ms},
			{at: 0, op: opAllow, p: 1, n: 1, ok: true, rem: 13, reset: 350 * ms},
			// 250ms owed at 50ms a token: 5 tokens, 1000ms at 200ms a token.
			{at: 100 * ms, op: opAllow, p: 2, n: 1, ok: true, rem: 2, reset: 1200 * ms},
			{at: 100 * ms, op: opAllow, p: 2, n: 3, rem: 2, reset: 1200 * ms, retry: 200 * ms},
			{at: 300 * ms, op: opAllow, p: 2, n: 3, ok: true, rem: 0, reset: 1600 * ms},
		}},
		{"TokenBucket/Get changes nothing", []core.Policy{tbFree, tbPro}, []pstep{
			{at: 0, op: opOwn, n: 4, ok: true, rem: 1, reset: 400 * ms},
			// 300ms of free's owed are 150ms of pro's; the key refills at
			// free's rate, full at 400ms.
			{at: 100 * ms, op: opGet, p: 1, used: 3, rem: 7, reset: 300 * ms},
			{at: 200 * ms, op: opGet, p: 1, used: 2, rem: 8, reset: 200 * ms},
			// Still free's state: 100ms owed.
			{at: 300 * ms, op: opAllow, p: 0, n: 1, ok: true, rem: 3, reset: 200 * ms},
		}},
		{"TokenBucket/Set", []core.Policy{tbFree, tbPro}, []pstep{
			{at: 0, op: opSet, p: 0, n: 3},
			{at: 0, op: opGet, p: 0, used: 3, rem: 2, reset: 300 * ms},
			{at: 0, op: opOwn, n: 2, ok: true, rem: 0, reset: 500 * ms},
			{at: 0, op: opPeek, rem: 0, reset: 500 * ms, retry: 100 * ms},
			{at: 0, op: opSet, p: 0, n: 0},
			{at: 0, op: opPeek, ok: true, rem: 5},
			{at: 0, op: opSet, p: 1, n: 10},
			{at: 0, op: opGet, p: 1, used: 10, rem: 0, reset: 500 * ms},
			// 400ms of pro's owed, 800ms of free's; full at 500ms.
			{at: 100 * ms, op: opGet, p: 0, used: 8, rem: 0, reset: 400 * ms},
			{at: 400 * ms, op: opOwn, n: 1, ok: true, rem: 2, reset: 300 * ms},
			{at: 400 * ms, op: opSet, p: 0, n: 6, err: core.ErrInvalidUsage},
			{at: 400 * ms, op: opSet, p: 0, n: -1, err: core.ErrInvalidUsage},
			{at: 400 * ms, op: opGet, p: 0, used: 3, rem: 2, reset: 300 * ms},
		}},
		{"TokenBucket/a denied call leaves the key as it was", []core.Policy{tbFree, tbPro}, []pstep{
			{at: 0, op: opOwn, n: 5, ok: true, rem: 0, reset: 500 * ms},
			// 250ms owed at pro's rate; 6 tokens need 300ms, so 200ms of
			// pro's (400ms of free's) may be owed: from 100ms, as the key
			// refills at free's rate. It is full at 500ms.
			{at: 0, op: opAllow, p: 1, n: 6, rem: 5, reset: 500 * ms, retry: 100 * ms},
			// The key still refills at free's rate: 4 tokens owed, 200ms
			// at pro's rate (pro's would leave 150ms: Used 3).
			{at: 100 * ms, op: opGet, p: 1, used: 4, rem: 6, reset: 400 * ms},
			{at: 100 * ms, op: opGet, p: 0, used: 4, rem: 1, reset: 400 * ms},
		}},

		// Leaky bucket.
		{"LeakyBucket/moved keeps what is in the bucket, rescaled, and its queue", []core.Policy{lbFree, lbPro}, []pstep{
			{at: 0, op: opOwn, n: 1, ok: true, rem: 2, reset: 100 * ms},
			{at: 0, op: opOwn, n: 1, ok: true, rem: 1, reset: 200 * ms, delay: 100 * ms},
			// 150ms of free's service left would be 75ms at pro's rate,
			// but the request queued is served at 100ms: pro's is served
			// after it, at 200ms, and pro counts 150ms of its units (3).
			{at: 50 * ms, op: opAllow, p: 1, n: 1, ok: true, rem: 2, reset: 200 * ms, delay: 150 * ms},
			// 200ms of pro's left is 400ms of free's (4 requests); the
			// key, still under pro, is empty at 250ms.
			{at: 50 * ms, op: opGet, p: 0, used: 4, rem: 0, reset: 200 * ms},
			// Still pro's state at 100ms: 150ms left, 300ms of free's. One
			// of free's fits once 100ms of pro's are left (200ms of
			// free's): at 150ms.
			{at: 100 * ms, op: opOwn, n: 1, rem: 0, reset: 150 * ms, retry: 50 * ms},
			{at: 100 * ms, op: opPeek, rem: 0, reset: 150 * ms, retry: 50 * ms},
		}},
		{"LeakyBucket/moved to a shallower bucket than it holds", []core.Policy{lbFree, lbTiny}, []pstep{
			{at: 0, op: opOwn, n: 3, ok: true, rem: 0, reset: 300 * ms},
			{at: 50 * ms, op: opAllow, p: 1, n: 1, rem: 0, reset: 250 * ms, retry: 250 * ms},
			{at: 50 * ms, op: opGet, p: 1, used: 3, rem: 0, reset: 250 * ms},
			{at: 300 * ms, op: opAllow, p: 1, n: 1, ok: true, rem: 0, reset: 100 * ms},
		}},
		{"LeakyBucket/a plan's limit raised then lowered", []core.Policy{lbPlan1, lbPlan2, lbPlan3}, []pstep{
			{at: 0, op: opOwn, n: 4, ok: true, rem: 6, reset: 400 * ms},
			// The 4 queued end at 400ms: plan2's 2 are served after them.
			{at: 0, op: opAllow, p: 1, n: 2, ok: true, rem: 10, reset: 500 * ms, delay: 400 * ms},
			// 400ms of plan2's service left is 1600ms at 200ms a request,
			// above plan3's depth of 6 (1200ms). The queue, still plan2's,
			// ends at 500ms; 1000ms of plan3's (250ms of plan2's) leave
			// room for one request, from 250ms, 800ms for two, from 300ms.
			{at: 100 * ms, op: opAllow, p: 2, n: 1, rem: 0, reset: 400 * ms, retry: 150 * ms},
			{at: 100 * ms, op: opAllow, p: 2, n: 2, rem: 0, reset: 400 * ms, retry: 200 * ms},
		}},
		{"LeakyBucket/Get changes nothing", []core.Policy{lbFree, lbPro}, []pstep{
			{at: 0, op: opOwn, n: 3, ok: true, rem: 0, reset: 300 * ms},
			// The queue ends at 300ms: 200ms left, 4 of pro's units.
			{at: 100 * ms, op: opGet, p: 1, used: 4, rem: 2, reset: 200 * ms},
			{at: 100 * ms, op: opGet, p: 1, used: 4, rem: 2, reset: 200 * ms},
			{at: 200 * ms, op: opOwn, n: 1, ok: true, rem: 1, reset: 200 * ms, delay: 100 * ms},
		}},
		{"LeakyBucket/Set", []core.Policy{lbFree, lbPro}, []pstep{
			{at: 0, op: opSet, p: 0, n: 2},
			{at: 0, op: opGet, p: 0, used: 2, rem: 1, reset: 200 * ms},
			{at: 0, op: opOwn, n: 1, ok: true, rem: 0, reset: 300 * ms, delay: 200 * ms},
			{at: 0, op: opPeek, rem: 0, reset: 300 * ms, retry: 100 * ms},
			{at: 0, op: opSet, p: 0, n: 0},
			{at: 0, op: opPeek, ok: true, rem: 3},
			{at: 0, op: opSet, p: 1, n: 6},
			{at: 0, op: opGet, p: 1, used: 6, rem: 0, reset: 300 * ms},
			// 250ms of pro's left, 500ms of free's; empty at 300ms.
			{at: 50 * ms, op: opGet, p: 0, used: 5, rem: 0, reset: 250 * ms},
			{at: 250 * ms, op: opOwn, n: 1, ok: true, rem: 1, reset: 200 * ms, delay: 100 * ms},
			{at: 250 * ms, op: opSet, p: 0, n: 4, err: core.ErrInvalidUsage},
			{at: 250 * ms, op: opSet, p: 0, n: -1, err: core.ErrInvalidUsage},
			{at: 250 * ms, op: opGet, p: 0, used: 2, rem: 1, reset: 200 * ms},
		}},
		{"LeakyBucket/a denied call leaves the key as it was", []core.Policy{lbFree, lbPro}, []pstep{
			{at: 0, op: opOwn, n: 3, ok: true, rem: 0, reset: 300 * ms},
			// The queue ends at 300ms, 6 of pro's units: 6 more do not fit.
			{at: 0, op: opAllow, p: 1, n: 6, rem: 0, reset: 300 * ms, retry: 300 * ms},
			// Still free's 3 queued (moved to pro, its 300ms would be 6
			// of pro's units, 600ms back at free's rate), however often
			// the denial is repeated.
			{at: 0, op: opGet, p: 0, used: 3, rem: 0, reset: 300 * ms},
			{at: 0, op: opAllow, p: 1, n: 6, rem: 0, reset: 300 * ms, retry: 300 * ms},
			{at: 0, op: opOwn, n: 1, rem: 0, reset: 300 * ms, retry: 100 * ms},
			{at: 100 * ms, op: opGet, p: 1, used: 4, rem: 2, reset: 200 * ms},
			{at: 100 * ms, op: opOwn, n: 1, ok: true, rem: 0, reset: 300 * ms, delay: 200 * ms},
		}},

		// Fixed window.
		{"FixedWindow/moved keeps the count of its window", []core.Policy{fwFree, fwPro}, []pstep{
			{at: 10 * s, op: opOwn, n: 2, ok: true, rem: 1, reset: 50 * s},
			{at: 20 * s, op: opAllow, p: 1, n: 1, ok: true, rem: 2, reset: time.Hour - 20*s},
			{at: 30 * s, op: opGet, p: 1, used: 3, rem: 2, reset: time.Hour - 30*s},
			// Back to free: pro's count is carried into free's window,
			// and into each of free's windows within pro's hour 0.
			{at: 30 * s, op: opGet, p: 0, used: 3, rem: 0, reset: time.Hour - 30*s},
			{at: 40 * s, op: opOwn, n: 1, rem: 0, reset: time.Hour - 40*s, retry: time.Hour - 40*s},
			{at: 40 * s, op: opPeek, rem: 0, reset: time.Hour - 40*s, retry: time.Hour - 40*s},
			{at: time.Hour + 10*s, op: opOwn, n: 1, ok: true, rem: 2, reset: 50 * s},
		}},
		{"FixedWindow/a denial under a smaller limit gives nothing back", []core.Policy{fwFree, fwPro}, []pstep{
			{at: 10 * s, op: opAllow, p: 1, n: 5, ok: true, rem: 0, reset: time.Hour - 10*s},
			// Pro's 5 count in free's minute 1, above its Limit, and in
			// each minute of pro's hour 0: denied, and the key stays
			// under pro.
			{at: 70 * s, op: opOwn, n: 1, rem: 0, reset: time.Hour - 70*s, retry: time.Hour - 70*s},
			// Pro's hour 0: still 5 used (a count cut to free's Limit would
			// give 2 back).
			{at: 80 * s, op: opAllow, p: 1, n: 1, rem: 0, reset: time.Hour - 80*s, retry: time.Hour - 80*s},
			// The count is what the key might have used, not what free
			// could admit.
			{at: 80 * s, op: opGet, p: 0, used: 5, rem: 0, reset: time.Hour - 80*s},
		}},
		{"FixedWindow/a window that has just ended still counts in a longer one", []core.Policy{fwFree, fwPro}, []pstep{
			{at: 10 * s, op: opOwn, n: 3, ok: true, rem: 0, reset: 50 * s},
			// Free's minute 0 has ended, but its requests lie in pro's
			// hour 0.
			{at: 60 * s, op: opAllow, p: 1, n: 1, ok: true, rem: 1, reset: 59 * time.Minute},
		}},
		{"FixedWindow/a window two windows old counts nowhere", []core.Policy{fwFree, fwPro}, []pstep{
			{at: 10 * s, op: opOwn, n: 3, ok: true, rem: 0, reset: 50 * s},
			// Every request of free's minute 0 is more than a minute old.
			{at: 120 * s, op: opAllow, p: 1, n: 1, ok: true, rem: 4, reset: 58 * time.Minute},
		}},
		{"FixedWindow/a plan's limit raised then lowered", []core.Policy{fwPlan3, fwPlan5, fwPlan2}, []pstep{
			{at: 10 * s, op: opOwn, n: 2, ok: true, rem: 1, reset: 50 * s},
			{at: 20 * s, op: opAllow, p: 1, n: 1, ok: true, rem: 2, reset: 40 * s},
			{at: 25 * s, op: opAllow, p: 1, n: 2, ok: true, rem: 0, reset: 35 * s},
			{at: 30 * s, op: opAllow, p: 2, n: 1, rem: 0, reset: 30 * s, retry: 30 * s},
			{at: 60 * s, op: opAllow, p: 2, n: 2, ok: true, rem: 0, reset: 60 * s},
			{at: 60 * s, op: opOwn, n: 1, ok: true, rem: 0, reset: 60 * s},
		}},
		{"FixedWindow/Get changes nothing", []core.Policy{fwFree, fwPro}, []pstep{
			{at: 10 * s, op: opOwn, n: 2, ok: true, rem: 1, reset: 50 * s},
			// Free's minute 0 counts in pro's hour until it is two
			// minutes old.
			{at: 30 * s, op: opGet, p: 1, used: 2, rem: 3, reset: 90 * s},
			{at: 30 * s, op: opGet, p: 1, used: 2, rem: 3, reset: 90 * s},
			// Still free's minute 0, which has ended.
			{at: 61 * s, op: opOwn, n: 1, ok: true, rem: 2, reset: 59 * s},
		}},
		{"FixedWindow/Set", []core.Policy{fwFree, fwPro}, []pstep{
			{at: 10 * s, op: opSet, p: 0, n: 2},
			{at: 10 * s, op: opGet, p: 0, used: 2, rem: 1, reset: 50 * s},
			{at: 10 * s, op: opOwn, n: 1, ok: true, rem: 0, reset: 50 * s},
			{at: 10 * s, op: opOwn, n: 1, rem: 0, reset: 50 * s, retry: 50 * s},
			{at: 10 * s, op: opSet, p: 0, n: 0},
			{at: 10 * s, op: opPeek, ok: true, rem: 3},
			{at: 10 * s, op: opSet, p: 1, n: 5},
			{at: 10 * s, op: opGet, p: 1, used: 5, rem: 0, reset: time.Hour - 10*s},
			{at: 70 * s, op: opGet, p: 0, used: 5, rem: 0, reset: time.Hour - 70*s},
			{at: 70 * s, op: opSet, p: 0, n: 4, err: core.ErrInvalidUsage},
			{at: 70 * s, op: opSet, p: 0, n: -1, err: core.ErrInvalidUsage},
			{at: 70 * s, op: opGet, p: 1, used: 5, rem: 0, reset: time.Hour - 70*s},
		}},
		{"FixedWindow/a denied call leaves the key as it was", []core.Policy{fwFree, fwPro}, []pstep{
			{at: 10 * s, op: opOwn, n: 3, ok: true, rem: 0, reset: 50 * s},
			// Free's minute 0 counts in pro's hour 0 until it is two
			// minutes old.
			{at: 20 * s, op: opAllow, p: 1, n: 3, rem: 2, reset: 100 * s, retry: 100 * s},
			// Still under free: its minute 0, the one before its current,
			// lies in pro's hour 0 and counts there.
			{at: 70 * s, op: opGet, p: 1, used: 3, rem: 2, reset: 50 * s},
		}},

		// Sliding window.
		{"SlidingWindow/moved with the same geometry keeps every bucket", []core.Policy{swFree, swPro}, []pstep{
			{at: 50 * ms, op: opOwn, n: 6, ok: true, rem: 4, reset: 1050 * ms},
			{at: 550 * ms, op: opOwn, n: 3, ok: true, rem: 1, reset: 1050 * ms},
			{at: 950 * ms, op: opAllow, p: 1, n: 1, ok: true, rem: 10, reset: 950 * ms},
			// Bucket 0 has left pro's trailing window, not its B+1 buckets.
			{at: 1000 * ms, op: opAllow, p: 1, n: 10, ok: true, rem: 2, reset: 1100 * ms},
			{at: 1000 * ms, op: opOwn, n: 1, rem: 0, reset: 1100 * ms, retry: 1000 * ms},
		}},
		{"SlidingWindow/moved to another geometry counts each bucket in the newest it overlaps", []core.Policy{swFree, swOther}, []pstep{
			{at: 50 * ms, op: opOwn, n: 6, ok: true, rem: 4, reset: 1050 * ms},
			{at: 550 * ms, op: opOwn, n: 3, ok: true, rem: 1, reset: 1050 * ms},
			// Free's bucket [0, 100ms) into other's [0, 500ms), its bucket
			// [500ms, 600ms) into other's [500ms, 1000ms).
			{at: 950 * ms, op: opAllow, p: 1, n: 1, ok: true, rem: 0, reset: 2050 * ms},
			// Other's bucket 0 has left its trailing window, not its B+1.
			{at: 2499 * ms, op: opAllow, p: 1, n: 1, ok: true, rem: 2, reset: 1501 * ms},
			{at: 2500 * ms, op: opAllow, p: 1, n: 3, ok: true, rem: 5, reset: 2000 * ms},
			// Back to free: other's bucket [2000ms, 2500ms) into free's
			// [2400ms, 2500ms), [2500ms, 3000ms) into free's bucket 26.
			// Left under other, the latter counts in the newest of free's
			// it overlaps, 29, once that is current: it leaves free's 11
			// buckets at 4s.
			{at: 2600 * ms, op: opGet, p: 0, used: 4, rem: 6, reset: 1400 * ms},
			{at: 2600 * ms, op: opOwn, n: 1, ok: true, rem: 5, reset: 1100 * ms},
		}},
		{"SlidingWindow/a plan's limit raised then lowered", []core.Policy{swPlan1, swPlan2, swPlan3}, []pstep{
			{at: 50 * ms, op: opOwn, n: 6, ok: true, rem: 4, reset: 1050 * ms},
			{at: 150 * ms, op: opAllow, p: 1, n: 4, ok: true, rem: 10, reset: 1050 * ms},
			{at: 250 * ms, op: opAllow, p: 2, n: 1, rem: 0, reset: 950 * ms, retry: 850 * ms},
			{at: 1100 * ms, op: opAllow, p: 2, n: 1, ok: true, rem: 1, reset: 1000 * ms},
		}},
		{"SlidingWindow/Get changes nothing", []core.Policy{swFree, swOther}, []pstep{
			{at: 50 * ms, op: opOwn, n: 6, ok: true, rem: 4, reset: 1050 * ms},
			{at: 550 * ms, op: opOwn, n: 3, ok: true, rem: 1, reset: 1050 * ms},
			// Left under free, its buckets leave its 11: the last at 1.6s.
			{at: 950 * ms, op: opGet, p: 1, used: 9, rem: 1, reset: 650 * ms},
			{at: 960 * ms, op: opGet, p: 1, used: 9, rem: 1, reset: 640 * ms},
			// Still free's buckets: bucket 0 has left.
			{at: 1100 * ms, op: opOwn, n: 1, ok: true, rem: 6, reset: 1000 * ms},
		}},
		{"SlidingWindow/Set", []core.Policy{swFree, swOther}, []pstep{
			{at: 50 * ms, op: opSet, p: 0, n: 7},
			{at: 50 * ms, op: opGet, p: 0, used: 7, rem: 3, reset: 1050 * ms},
			{at: 50 * ms, op: opOwn, n: 3, ok: true, rem: 0, reset: 1050 * ms},
			{at: 50 * ms, op: opOwn, n: 1, rem: 0, reset: 1050 * ms, retry: 950 * ms},
			{at: 50 * ms, op: opSet, p: 0, n: 0},
			{at: 50 * ms, op: opPeek, ok: true, rem: 10},
			{at: 50 * ms, op: opSet, p: 1, n: 10},
			{at: 50 * ms, op: opGet, p: 1, used: 10, rem: 0, reset: 2450 * ms},
			// Other's bucket [0, 500ms) into free's [400ms, 500ms).
			{at: 1000 * ms, op: opGet, p: 0, used: 10, rem: 0, reset: 500 * ms},
			{at: 1000 * ms, op: opSet, p: 0, n: 11, err: core.ErrInvalidUsage},
			{at: 1000 * ms, op: opSet, p: 0, n: -1, err: core.ErrInvalidUsage},
			{at: 1000 * ms, op: opGet, p: 1, used: 10, rem: 0, reset: 1500 * ms},
		}},
		{"SlidingWindow/a denied call leaves the key as it was", []core.Policy{swFree, swOther}, []pstep{
			{at: 50 * ms, op: opOwn, n: 10, ok: true, rem: 0, reset: 1050 * ms},
			// Left under free, the 10 leave its 11 buckets at 1.1s.
			{at: 950 * ms, op: opAllow, p: 1, n: 1, rem: 0, reset: 150 * ms, retry: 150 * ms},
			// Still under free, whose Window has let the 10 go (moved to
			// other at the denial, they would count until 1.5s).
			{at: 1100 * ms, op: opGet, p: 1, used: 0, rem: 10, reset: 0},
		}},
	}
}
