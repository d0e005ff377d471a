package nethttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/internal/testkit/assert"
	"github.com/go-ratelimit/ratelimit/internal/testkit/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/internal/httpbench"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// planned sends a request with the API key and plan given.
func planned(h http.Handler, key, plan string) *httptest.ResponseRecorder {
	return get(h, "", "X-API-Key", key, "X-Plan", plan)
}

func TestPolicyFuncAppliesEachRequestsPolicy(t *testing.T) {
	clk := newClock(t0)
	lim := newLimiter(t, freePlan, clk)
	var events []nethttp.Event
	var keys []string
	h := wrap(t, lim, recorder(&events), nethttp.WithHeaderStyle(nethttp.HeadersBoth),
		nethttp.WithKeyFunc(keyfunc.Header("X-API-Key")),
		nethttp.WithPolicyFunc(func(r *http.Request, key string) (core.Policy, error) {
			keys = append(keys, key)
			return plans(r, key)
		}))

	free := func(remaining, reset string) map[string]string {
		return with(xHeaders("2", remaining, reset),
			"RateLimit-Policy", `"free";q=2;w=60`, "RateLimit", `"free";r=`+remaining+`;t=`+reset)
	}
	pro := func(remaining string) map[string]string {
		return with(xHeaders("50", remaining, "60"),
			"RateLimit-Policy", `"pro";q=50;w=60`, "RateLimit", `"pro";r=`+remaining+`;t=60`)
	}
	assert.Equal(t, free("1", "60"), rateHeaders(t, planned(h, "a", "")))
	assert.Equal(t, pro("49"), rateHeaders(t, planned(h, "b", "pro")))
	assert.Equal(t, free("0", "60"), rateHeaders(t, planned(h, "a", "")))
	w := planned(h, "a", "")
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, with(free("0", "60"), "Retry-After", "60"), rateHeaders(t, w))
	assert.Equal(t, pro("48"), rateHeaders(t, planned(h, "b", "pro")))

	assert.Equal(t, []string{"a", "b", "a", "a", "b"}, keys, "f gets the key")
	assert.Equal(t, []nethttp.Outcome{nethttp.OutcomeAllowed, nethttp.OutcomeAllowed, nethttp.OutcomeAllowed,
		nethttp.OutcomeDenied, nethttp.OutcomeAllowed}, outcomes(events))
	if len(events) == 5 {
		assert.Equal(t, proPlan, events[1].Decision.Policy)
		assert.Equal(t, freePlan, events[3].Decision.Policy)
	}
}

func TestPolicyFuncIsCalledAfterKeyAndCost(t *testing.T) {
	var calls int
	var events []nethttp.Event
	h := wrap(t, newLimiter(t, freePlan, newClock(t0)), recorder(&events),
		nethttp.WithKeyFunc(keyfunc.Header("X-API-Key")),
		nethttp.WithCostFunc(func(r *http.Request) (int64, error) {
			if r.Header.Get("X-Cost") == "bad" {
				return 0, errors.New("bad cost")
			}
			return 1, nil
		}),
		nethttp.WithPolicyFunc(func(r *http.Request, key string) (core.Policy, error) {
			calls++
			return plans(r, key)
		}))
	assert.Equal(t, http.StatusBadRequest, get(h, "").Code)
	assert.Equal(t, http.StatusInternalServerError, get(h, "", "X-API-Key", "a", "X-Cost", "bad").Code)
	assert.Zero(t, calls)
	// The request's policy is not known without calling f, so the events
	// do not name the limiter's own, which could be another plan's.
	assert.Equal(t, []nethttp.Outcome{nethttp.OutcomeKeyError, nethttp.OutcomeCostError}, outcomes(events))
	for _, ev := range events {
		assert.Equal(t, core.Decision{}, ev.Decision)
	}
}

// planLimiter is a PolicyLimiter whose decisions describe the policy of
// the call (always admitted, one unit used), or fail with err: for the
// engine's side of per-request policies alone.
type planLimiter struct {
	coretest.Failing // Peek, Reset and Policy; AllowN fails
	err              error
	calls            *int
}

func (l planLimiter) AllowPolicy(_ context.Context, p core.Policy, _ string, n int64) (core.Decision, error) {
	if l.calls != nil {
		*l.calls++
	}
	if l.err != nil {
		return core.Decision{}, l.err
	}
	return core.Decision{Allowed: true, Limit: p.Limit, Remaining: p.Limit - n, ResetAfter: p.Window, Policy: p}, nil
}

func (l planLimiter) Get(context.Context, core.Policy, string) (core.Usage, error) {
	return core.Usage{}, errors.New("planLimiter: Get")
}

func (l planLimiter) Set(context.Context, core.Policy, string, int64) error {
	return errors.New("planLimiter: Set")
}

var _ core.PolicyLimiter = planLimiter{}

func TestPolicyFuncErrorIsALimiterFailure(t *testing.T) {
	for _, tc := range []struct {
		name       string
		failClosed bool
		status     int
		outcome    nethttp.Outcome
	}{
		{"fails open by default", false, http.StatusOK, nethttp.OutcomeFailedOpen},
		{"fails closed on request", true, http.StatusServiceUnavailable, nethttp.OutcomeFailedClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var events []nethttp.Event
			var calls int
			opts := []nethttp.Option{recorder(&events), nethttp.WithHeaderStyle(nethttp.HeadersBoth),
				nethttp.WithPolicyFunc(plans)}
			if tc.failClosed {
				opts = append(opts, nethttp.WithFailClosed())
			}
			h := wrap(t, planLimiter{Failing: coretest.Failing{P: freePlan}, calls: &calls}, opts...)
			w := planned(h, "k", "broken")
			assert.Equal(t, tc.status, w.Code)
			assert.Empty(t, rateHeaders(t, w), "no policy is known")
			assert.Zero(t, calls, "the limiter is not asked")
			require.Len(t, events, 1)
			assert.Equal(t, tc.outcome, events[0].Outcome)
			assert.ErrorIs(t, events[0].Err, errPlanLookup)
			assert.EqualError(t, events[0].Err, "policy func: plan lookup failed")
			assert.Equal(t, core.Decision{}, events[0].Decision)
			assert.Zero(t, events[0].Latency)
			assert.Equal(t, int64(1), events[0].Cost)
		})
	}
	t.Run("treats a policy name that cannot be sent as an error", func(t *testing.T) {
		var events []nethttp.Event
		var calls int
		h := wrap(t, planLimiter{Failing: coretest.Failing{P: freePlan}, calls: &calls}, recorder(&events),
			nethttp.WithFailClosed(), nethttp.WithHeaderStyle(nethttp.HeadersIETF),
			nethttp.WithPolicyFunc(func(*http.Request, string) (core.Policy, error) {
				return proPlan.WithName("pro\r\nX-Evil: 1"), nil
			}))
		w := get(h, "")
		assert.Equal(t, http.StatusServiceUnavailable, w.Code)
		assert.Empty(t, rateHeaders(t, w))
		assert.Zero(t, calls)
		require.Equal(t, []nethttp.Outcome{nethttp.OutcomeFailedClosed}, outcomes(events))
		assert.EqualError(t, events[0].Err,
			`policy func: policy name "pro\r\nX-Evil: 1" cannot be sent in a header: use printable ASCII only`)
	})
	t.Run("is a cancellation when the request's context ended", func(t *testing.T) {
		var events []nethttp.Event
		h := wrap(t, planLimiter{Failing: coretest.Failing{P: freePlan}}, recorder(&events),
			nethttp.WithPolicyFunc(func(r *http.Request, _ string) (core.Policy, error) {
				<-r.Context().Done() // a lookup that ends with the request
				return core.Policy{}, r.Context().Err()
			}))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		w := send(h, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil), "")
		assert.Equal(t, http.StatusServiceUnavailable, w.Code)
		require.Equal(t, []nethttp.Outcome{nethttp.OutcomeCanceled}, outcomes(events))
		assert.ErrorIs(t, events[0].Err, context.Canceled)
	})
}

// TestPolicyFuncWithAnInvalidPolicyAdvertisesNothing is issue 17's case
// 5: a policy func that returns TokenBucket(0, time.Minute) had the
// fail-open answer say X-RateLimit-Limit: 0 and RateLimit-Policy:
// "tokenbucket-0-per-60s";q=0;w=60. The limit is not known: nothing is
// written, and the hooks get the policy's validation error.
func TestPolicyFuncWithAnInvalidPolicyAdvertisesNothing(t *testing.T) {
	for _, failClosed := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail closed %v", failClosed), func(t *testing.T) {
			var events []nethttp.Event
			opts := []nethttp.Option{recorder(&events), nethttp.WithHeaderStyle(nethttp.HeadersBoth),
				nethttp.WithPolicyFunc(func(*http.Request, string) (core.Policy, error) {
					return core.TokenBucket(0, time.Minute), nil
				})}
			status, outcome := http.StatusOK, nethttp.OutcomeFailedOpen
			if failClosed {
				opts = append(opts, nethttp.WithFailClosed())
				status, outcome = http.StatusServiceUnavailable, nethttp.OutcomeFailedClosed
			}
			h := wrap(t, newLimiter(t, core.TokenBucket(10, time.Minute), newClock(t0)), opts...)
			w := get(h, "")
			assert.Equal(t, status, w.Code)
			assert.Empty(t, rateHeaders(t, w), "an invalid policy's limit is not known")
			require.Equal(t, []nethttp.Outcome{outcome}, outcomes(events))
			assert.EqualError(t, events[0].Err, "policy func: core: TokenBucket limit must be > 0, got 0")
			assert.Equal(t, core.Decision{}, events[0].Decision)
		})
	}
}

func TestPolicyLimiterFailureShowsTheRequestsPolicy(t *testing.T) {
	broken := errors.New("redis: i/o timeout")
	var events []nethttp.Event
	h := wrap(t, planLimiter{Failing: coretest.Failing{P: freePlan}, err: broken}, recorder(&events),
		nethttp.WithHeaderStyle(nethttp.HeadersBoth), nethttp.WithPolicyFunc(plans))
	w := planned(h, "k", "pro")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, map[string]string{
		nethttp.HeaderLimit: "50", nethttp.HeaderRateLimitPolicy: `"pro";q=50;w=60`,
	}, rateHeaders(t, w))
	require.Equal(t, []nethttp.Outcome{nethttp.OutcomeFailedOpen}, outcomes(events))
	assert.Equal(t, core.Decision{Limit: 50, Policy: proPlan}, events[0].Decision)
	assert.ErrorIs(t, events[0].Err, broken)
}

func TestPolicyFuncWithAnotherAlgorithmIsAFailure(t *testing.T) {
	var events []nethttp.Event
	h := wrap(t, newLimiter(t, freePlan, newClock(t0)), recorder(&events), nethttp.WithFailClosed(),
		nethttp.WithPolicyFunc(func(*http.Request, string) (core.Policy, error) {
			return core.TokenBucket(10, time.Minute).WithName("tb"), nil
		}))
	w := get(h, "")
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Equal(t, map[string]string{nethttp.HeaderLimit: "10"}, rateHeaders(t, w))
	require.Equal(t, []nethttp.Outcome{nethttp.OutcomeFailedClosed}, outcomes(events))
	assert.ErrorIs(t, events[0].Err, core.ErrAlgorithmMismatch)
}

// The engine keeps the rendered strings of at most MaxRenderers policies
// besides its limiter's own; every policy beyond is still described
// exactly.
func TestPolicyRenderersAreBounded(t *testing.T) {
	policyOf := func(i int) core.Policy {
		return core.FixedWindow(int64(1000+i), time.Minute).WithName(fmt.Sprintf("plan-%d", i))
	}
	e := nethttp.NewEngine(planLimiter{Failing: coretest.Failing{P: freePlan}},
		nethttp.WithHeaderStyle(nethttp.HeadersBoth),
		nethttp.WithPolicyFunc(func(r *http.Request, _ string) (core.Policy, error) {
			var i int
			_, err := fmt.Sscan(r.Header.Get("X-Plan"), &i)
			return policyOf(i), err
		}))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rej := e.Check(w, r); rej != nil {
			e.Respond(w, r, rej)
		}
	})
	n := nethttp.MaxRenderers + 44
	for round := range 2 {
		for i := range n {
			w := planned(h, "k", fmt.Sprint(i))
			limit := fmt.Sprint(1000 + i)
			require.Equal(t, with(xHeaders(limit, fmt.Sprint(999+i), "60"),
				"RateLimit-Policy", fmt.Sprintf(`"plan-%d";q=%s;w=60`, i, limit),
				"RateLimit", fmt.Sprintf(`"plan-%d";r=%d;t=60`, i, 999+i)), rateHeaders(t, w), "round %d, plan %d", round, i)
		}
		assert.Equal(t, nethttp.MaxRenderers, nethttp.CachedRenderers(e))
	}
	planned(h, "k", "x") // the limiter's own policy: not cached
	assert.Equal(t, nethttp.MaxRenderers, nethttp.CachedRenderers(e))
}

func TestPolicyRenderersUnderConcurrency(t *testing.T) {
	e := nethttp.NewEngine(planLimiter{Failing: coretest.Failing{P: freePlan}},
		nethttp.WithHeaderStyle(nethttp.HeadersIETF),
		nethttp.WithPolicyFunc(func(r *http.Request, _ string) (core.Policy, error) {
			return core.FixedWindow(10, time.Minute).WithName(r.Header.Get("X-Plan")), nil
		}))
	const goroutines, plans = 8, 40
	done := make(chan struct{})
	for g := range goroutines {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range plans {
				name := fmt.Sprint("p", (i+g)%plans)
				w := httptest.NewRecorder()
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.Header.Set("X-Plan", name)
				if !assert.Nil(t, e.Check(w, r)) {
					return
				}
				assert.Equal(t, `"`+name+`";q=10;w=60`, w.Header().Get("RateLimit-Policy"))
			}
		}()
	}
	for range goroutines {
		<-done
	}
	assert.Equal(t, plans, nethttp.CachedRenderers(e))
}

// The fixed-policy path allocates what it did before hooks and per-request
// policies; a per-request policy whose strings are cached allocates the
// same, and a hook adds nothing.
func TestEngineAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := core.TokenBucket(100, time.Minute).WithName("per-ip")
	fixed := constLimiter{core.Decision{Allowed: true, Limit: 100, Remaining: 57, ResetAfter: 25 * time.Second, Policy: p}}
	perRequest := planLimiter{Failing: coretest.Failing{P: p}}
	static := nethttp.WithKeyFunc(keyfunc.Static("k"))
	pro := nethttp.WithPolicyFunc(func(*http.Request, string) (core.Policy, error) { return proPlan, nil })
	nop := nethttp.WithHook(func(nethttp.Event) {})
	for _, tc := range []struct {
		name   string
		lim    core.Limiter
		opts   []nethttp.Option
		allocs float64
	}{
		{"headers=None", fixed, []nethttp.Option{nethttp.WithHeaderStyle(nethttp.HeadersNone)}, 0},
		{"headers=None with a hook", fixed, []nethttp.Option{nethttp.WithHeaderStyle(nethttp.HeadersNone), nop}, 0},
		{"headers=XRateLimit", fixed, nil, 1},
		{"headers=XRateLimit with a hook", fixed, []nethttp.Option{nop}, 1},
		{"headers=XRateLimit per request", perRequest, []nethttp.Option{pro}, 1},
		{"headers=None per request", perRequest, []nethttp.Option{pro, nethttp.WithHeaderStyle(nethttp.HeadersNone)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := nethttp.NewEngine(tc.lim, append([]nethttp.Option{static}, tc.opts...)...)
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			w := httpbench.NewDiscardWriter()
			e.Check(w, r) // the first request under a policy caches its strings
			got := testing.AllocsPerRun(100, func() {
				w.Reset()
				if e.Check(w, r) != nil {
					panic("rejected")
				}
			})
			assert.Equal(t, tc.allocs, got)
		})
	}
}
