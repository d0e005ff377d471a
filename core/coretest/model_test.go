package coretest

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// TestModelByHand holds refModel to sequences worked out by hand from the
// definitions (the same as the conformance suite's), so that the model is
// checked against something other than the stores it judges.
func TestModelByHand(t *testing.T) {
	type step struct {
		at        time.Duration
		n         int64 // 0: Peek
		allowed   bool
		remaining int64
		reset     time.Duration
		retry     time.Duration
		delay     time.Duration
	}
	for _, tc := range []struct {
		p     core.Policy
		steps []step
	}{
		{core.FixedWindow(3, time.Minute), []step{
			{at: 10 * time.Second, n: 1, allowed: true, remaining: 2, reset: 50 * time.Second},
			{at: 10 * time.Second, n: 2, allowed: true, remaining: 0, reset: 50 * time.Second},
			{at: 20 * time.Second, n: 1, remaining: 0, reset: 40 * time.Second, retry: 40 * time.Second},
			{at: 20 * time.Second, n: 0, remaining: 0, reset: 40 * time.Second, retry: 40 * time.Second},
			{at: time.Minute, n: 0, allowed: true, remaining: 3},
			{at: time.Minute, n: 2, allowed: true, remaining: 1, reset: time.Minute},
			{at: time.Minute, n: 2, remaining: 1, reset: time.Minute, retry: time.Minute},
		}},
		{core.SlidingWindow(10, time.Second), []step{
			{at: 50 * ms, n: 10, allowed: true, remaining: 0, reset: 1050 * ms},
			{at: 950 * ms, n: 1, remaining: 0, reset: 150 * ms, retry: 50 * ms},
			// Bucket 0 has left the trailing window, not the B+1 buckets:
			// one more (ceil(Limit/B)) fits, not ten.
			{at: 1000 * ms, n: 1, allowed: true, remaining: 0, reset: 1000 * ms},
			{at: 1000 * ms, n: 1, remaining: 0, reset: 1000 * ms, retry: 100 * ms},
			{at: 1100 * ms, n: 1, allowed: true, remaining: 8, reset: 1000 * ms},
			{at: 1150 * ms, n: 0, allowed: true, remaining: 8, reset: 950 * ms},
			{at: 5 * time.Second, n: 0, allowed: true, remaining: 10},
		}},
		{core.TokenBucket(10, time.Second).WithBurst(5), []step{
			{at: 0, n: 1, allowed: true, remaining: 4, reset: 100 * ms},
			{at: 0, n: 3, allowed: true, remaining: 1, reset: 400 * ms},
			{at: 0, n: 1, allowed: true, remaining: 0, reset: 500 * ms},
			{at: 0, n: 1, remaining: 0, reset: 500 * ms, retry: 100 * ms},
			{at: 100 * ms, n: 1, allowed: true, remaining: 0, reset: 500 * ms},
			{at: 100 * ms, n: 2, remaining: 0, reset: 500 * ms, retry: 200 * ms},
			{at: 350 * ms, n: 2, allowed: true, remaining: 0, reset: 450 * ms},
			{at: 350 * ms, n: 0, remaining: 0, reset: 450 * ms, retry: 50 * ms},
			{at: 2 * time.Second, n: 1, allowed: true, remaining: 4, reset: 100 * ms},
		}},
		{core.LeakyBucket(10, time.Second).WithBurst(3), []step{
			{at: 0, n: 1, allowed: true, remaining: 2, reset: 100 * ms, delay: 0},
			{at: 0, n: 1, allowed: true, remaining: 1, reset: 200 * ms, delay: 100 * ms},
			{at: 0, n: 1, allowed: true, remaining: 0, reset: 300 * ms, delay: 200 * ms},
			{at: 0, n: 1, remaining: 0, reset: 300 * ms, retry: 100 * ms},
			// The first request has left at 100ms; the second is being
			// served until 200ms and counts.
			{at: 150 * ms, n: 0, allowed: true, remaining: 1, reset: 150 * ms},
			{at: 150 * ms, n: 2, remaining: 1, reset: 150 * ms, retry: 50 * ms},
			{at: 150 * ms, n: 1, allowed: true, remaining: 0, reset: 250 * ms, delay: 150 * ms},
			{at: 400 * ms, n: 2, allowed: true, remaining: 1, reset: 200 * ms, delay: 0},
		}},
		{core.LeakyBucket(10, time.Second).WithBurst(3).AsMeter(), []step{
			{at: 0, n: 3, allowed: true, remaining: 0, reset: 300 * ms},
			{at: 0, n: 1, remaining: 0, reset: 300 * ms, retry: 100 * ms},
			{at: 150 * ms, n: 1, allowed: true, remaining: 0, reset: 250 * ms},
		}},
	} {
		t.Run(tc.p.String(), func(t *testing.T) {
			m, err := newRefModel(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tc.steps {
				now := Epoch.Add(st.at)
				var d core.Decision
				if st.n == 0 {
					d = m.Peek("k", now)
				} else {
					d, err = m.AllowN("k", now, st.n)
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				}
				want := core.Decision{
					Allowed: st.allowed, Limit: tc.p.Limit, Remaining: st.remaining,
					ResetAfter: st.reset, RetryAfter: st.retry, Delay: st.delay, Policy: tc.p,
				}
				if d != want {
					t.Errorf("step %d: at +%v cost %d: d = %+v, want %+v", i, st.at, st.n, d, want)
				}
			}
		})
	}
}

// TestModelSteadyClient: the model admits a client at exactly Limit per
// Window whatever Limit mod Buckets (issue 8, defect 1), and its costs
// follow the errors of the contract.
func TestModelSteadyClient(t *testing.T) {
	for _, p := range []core.Policy{
		core.SlidingWindow(5, time.Minute),
		core.SlidingWindow(5, time.Second),
		core.SlidingWindow(15, 1500*ms),
	} {
		m, err := newRefModel(p)
		if err != nil {
			t.Fatal(err)
		}
		every := p.Window / time.Duration(p.Limit)
		for i := range 10 * p.Limit {
			d, err := m.AllowN("k", Epoch.Add(time.Duration(i)*every+7*ms), 1)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				t.Fatalf("%v: request %d: denied, want allowed: %+v", p, i, d)
			}
		}
		_, err = m.AllowN("k", Epoch, 0)
		if !errors.Is(err, core.ErrInvalidCost) {
			t.Errorf("got %v, want %v", err, core.ErrInvalidCost)
		}
		d, err := m.AllowN("other", Epoch, p.Limit+1)
		if !errors.Is(err, core.ErrCostExceedsCapacity) {
			t.Errorf("got %v, want %v", err, core.ErrCostExceedsCapacity)
		}
		if want := (core.Decision{Limit: p.Limit, Remaining: p.Limit, Policy: p}); d != want {
			t.Errorf("d = %+v, want %+v", d, want)
		}
	}
}

// modelTarget runs a policy table on the refModel.
type modelTarget struct {
	m   *refModel
	now time.Time
}

func (m *modelTarget) at(d time.Duration) { m.now = Epoch.Add(d) }
func (m *modelTarget) allowPolicy(p core.Policy, n int64) (core.Decision, error) {
	return m.m.AllowPolicy(p, "k", m.now, n)
}
func (m *modelTarget) allowN(n int64) (core.Decision, error) { return m.m.AllowN("k", m.now, n) }
func (m *modelTarget) peek() (core.Decision, error)          { return m.m.Peek("k", m.now), nil }
func (m *modelTarget) get(p core.Policy) (core.Usage, error) { return m.m.Get(p, "k", m.now) }
func (m *modelTarget) set(p core.Policy, used int64) error   { return m.m.Set(p, "k", m.now, used) }

// TestModelPolicyTables holds the refModel to the conformance suite's tables
// of policies per call, worked out by hand from the docs.
func TestModelPolicyTables(t *testing.T) {
	for _, tc := range policyTables() {
		t.Run(tc.name, func(t *testing.T) {
			m, err := newRefModel(tc.policies[0])
			if err != nil {
				t.Fatal(err)
			}
			runPolicyTable(t, tc, &modelTarget{m: m})
		})
	}
}

// modelLimiter is a core.PolicyLimiter that answers with the refModel, its
// clock made monotonic: correct by definition, it shows that the suite's
// own bookkeeping (RunModel's tracking of keys across policies, the
// properties) raises no false alarm.
type modelLimiter struct {
	mu   sync.Mutex
	m    *refModel
	now  func() time.Time
	high time.Time
}

var _ core.PolicyLimiter = (*modelLimiter)(nil)

func (l *modelLimiter) at() time.Time {
	if n := l.now(); n.After(l.high) {
		l.high = n
	}
	return l.high
}

func (l *modelLimiter) AllowN(_ context.Context, key string, n int64) (core.Decision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m.AllowN(key, l.at(), n)
}

func (l *modelLimiter) Peek(_ context.Context, key string) (core.Decision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m.Peek(key, l.at()), nil
}

func (l *modelLimiter) Reset(_ context.Context, key string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m.Reset(key)
	return nil
}

func (l *modelLimiter) Policy() core.Policy { return l.m.Policy() }

func (l *modelLimiter) AllowPolicy(_ context.Context, p core.Policy, key string, n int64) (core.Decision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m.AllowPolicy(p, key, l.at(), n)
}

func (l *modelLimiter) Get(_ context.Context, p core.Policy, key string) (core.Usage, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m.Get(p, key, l.at())
}

func (l *modelLimiter) Set(_ context.Context, p core.Policy, key string, used int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m.Set(p, key, l.at(), used)
}

func modelSuite() Suite {
	return Suite{
		New: func(t *testing.T, p core.Policy, now func() time.Time) core.Limiter {
			m, err := newRefModel(p)
			if err != nil {
				t.Fatal(err)
			}
			return &modelLimiter{m: m, now: now}
		},
		MonotonicClock: true,
	}
}

// TestModelLimiter runs the suite's policy cases, RunModel and the
// properties of policies per call on the refModel itself.
func TestModelLimiter(t *testing.T) {
	if testing.Short() {
		t.Skip("runs RunModel")
	}
	if os.Getenv(envModelDuration) == "" {
		t.Setenv(envModelDuration, "4s")
	}
	s := modelSuite()
	t.Run("policies per call", s.policies)
	t.Run("model", s.RunModel)
	t.Run("properties", func(t *testing.T) { s.runProperties(t, policyProperties) })
}
