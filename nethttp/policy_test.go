package nethttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

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
	if got, want := rateHeaders(t, planned(h, "a", "")), free("1", "60"); !reflect.DeepEqual(got, want) {
		t.Errorf("headers: got %v, want %v", got, want)
	}
	if got, want := rateHeaders(t, planned(h, "b", "pro")), pro("49"); !reflect.DeepEqual(got, want) {
		t.Errorf("headers: got %v, want %v", got, want)
	}
	if got, want := rateHeaders(t, planned(h, "a", "")), free("0", "60"); !reflect.DeepEqual(got, want) {
		t.Errorf("headers: got %v, want %v", got, want)
	}
	w := planned(h, "a", "")
	wantStatus(t, w, http.StatusTooManyRequests)
	wantHeaders(t, w, with(free("0", "60"), "Retry-After", "60"))
	if got, want := rateHeaders(t, planned(h, "b", "pro")), pro("48"); !reflect.DeepEqual(got, want) {
		t.Errorf("headers: got %v, want %v", got, want)
	}

	if got, want := keys, ([]string{"a", "b", "a", "a", "b"}); !reflect.DeepEqual(got, want) {
		t.Errorf("f gets the key: got %v, want %v", got, want)
	}
	if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeAllowed, nethttp.OutcomeAllowed, nethttp.OutcomeAllowed,
		nethttp.OutcomeDenied, nethttp.OutcomeAllowed}); !reflect.DeepEqual(got, want) {
		t.Errorf("outcomes: got %v, want %v", got, want)
	}
	if len(events) == 5 {
		if got := events[1].Decision.Policy; got != proPlan {
			t.Errorf("events[1].Decision.Policy: got %v, want %v", got, proPlan)
		}
		if got := events[3].Decision.Policy; got != freePlan {
			t.Errorf("events[3].Decision.Policy: got %v, want %v", got, freePlan)
		}
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
	if got := get(h, "").Code; got != http.StatusBadRequest {
		t.Errorf("status: got %v, want %v", got, http.StatusBadRequest)
	}
	if got := get(h, "", "X-API-Key", "a", "X-Cost", "bad").Code; got != http.StatusInternalServerError {
		t.Errorf("status: got %v, want %v", got, http.StatusInternalServerError)
	}
	if got := calls; got != 0 {
		t.Errorf("calls: got %v, want zero", got)
	}
	// The request's policy is not known without calling f, so the events
	// do not name the limiter's own, which could be another plan's.
	if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeKeyError, nethttp.OutcomeCostError}); !reflect.DeepEqual(got, want) {
		t.Errorf("outcomes: got %v, want %v", got, want)
	}
	for _, ev := range events {
		if got, want := ev.Decision, (core.Decision{}); got != want {
			t.Errorf("ev.Decision: got %v, want %v", got, want)
		}
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
			wantStatus(t, w, tc.status)
			if got := rateHeaders(t, w); len(got) != 0 {
				t.Errorf("no policy is known: got %v, want empty", got)
			}
			if got := calls; got != 0 {
				t.Errorf("the limiter is not asked: got %v, want zero", got)
			}
			if got := len(events); got != 1 {
				t.Fatalf("len(events): got %d, want %d", got, 1)
			}
			if got := events[0].Outcome; got != tc.outcome {
				t.Errorf("events[0].Outcome: got %v, want %v", got, tc.outcome)
			}
			if err := events[0].Err; !errors.Is(err, errPlanLookup) {
				t.Errorf("events[0].Err: got %v, want %v", err, errPlanLookup)
			}
			if err := events[0].Err; err == nil || err.Error() != "policy func: plan lookup failed" {
				t.Errorf("events[0].Err: got %v, want %q", err, "policy func: plan lookup failed")
			}
			if got, want := events[0].Decision, (core.Decision{}); got != want {
				t.Errorf("events[0].Decision: got %v, want %v", got, want)
			}
			if got := events[0].Latency; got != 0 {
				t.Errorf("events[0].Latency: got %v, want zero", got)
			}
			if got := events[0].Cost; got != int64(1) {
				t.Errorf("events[0].Cost: got %v, want %v", got, int64(1))
			}
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
		wantStatus(t, w, http.StatusServiceUnavailable)
		if got := rateHeaders(t, w); len(got) != 0 {
			t.Errorf("headers: got %v, want empty", got)
		}
		if got := calls; got != 0 {
			t.Errorf("calls: got %v, want zero", got)
		}
		if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeFailedClosed}); !reflect.DeepEqual(got, want) {
			t.Fatalf("outcomes(events): got %v, want %v", got, want)
		}
		if err := events[0].Err; err == nil || err.Error() != `policy func: policy name "pro\r\nX-Evil: 1" cannot be sent in a header: use printable ASCII only` {
			t.Errorf("events[0].Err: got %v, want %q", err, `policy func: policy name "pro\r\nX-Evil: 1" cannot be sent in a header: use printable ASCII only`)
		}
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
		wantStatus(t, w, http.StatusServiceUnavailable)
		if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeCanceled}); !reflect.DeepEqual(got, want) {
			t.Fatalf("outcomes(events): got %v, want %v", got, want)
		}
		if err := events[0].Err; !errors.Is(err, context.Canceled) {
			t.Errorf("events[0].Err: got %v, want %v", err, context.Canceled)
		}
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
			wantStatus(t, w, status)
			if got := rateHeaders(t, w); len(got) != 0 {
				t.Errorf("an invalid policy's limit is not known: got %v, want empty", got)
			}
			if got, want := outcomes(events), ([]nethttp.Outcome{outcome}); !reflect.DeepEqual(got, want) {
				t.Fatalf("outcomes(events): got %v, want %v", got, want)
			}
			if err := events[0].Err; err == nil || err.Error() != "policy func: core: TokenBucket limit must be > 0, got 0" {
				t.Errorf("events[0].Err: got %v, want %q", err, "policy func: core: TokenBucket limit must be > 0, got 0")
			}
			if got, want := events[0].Decision, (core.Decision{}); got != want {
				t.Errorf("events[0].Decision: got %v, want %v", got, want)
			}
		})
	}
}

func TestPolicyLimiterFailureShowsTheRequestsPolicy(t *testing.T) {
	broken := errors.New("redis: i/o timeout")
	var events []nethttp.Event
	h := wrap(t, planLimiter{Failing: coretest.Failing{P: freePlan}, err: broken}, recorder(&events),
		nethttp.WithHeaderStyle(nethttp.HeadersBoth), nethttp.WithPolicyFunc(plans))
	w := planned(h, "k", "pro")
	wantStatus(t, w, http.StatusOK)
	wantHeaders(t, w, map[string]string{
		nethttp.HeaderLimit: "50", nethttp.HeaderRateLimitPolicy: `"pro";q=50;w=60`,
	})
	if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeFailedOpen}); !reflect.DeepEqual(got, want) {
		t.Fatalf("outcomes(events): got %v, want %v", got, want)
	}
	if got, want := events[0].Decision, (core.Decision{Limit: 50, Policy: proPlan}); got != want {
		t.Errorf("events[0].Decision: got %v, want %v", got, want)
	}
	if err := events[0].Err; !errors.Is(err, broken) {
		t.Errorf("events[0].Err: got %v, want %v", err, broken)
	}
}

func TestPolicyFuncWithAnotherAlgorithmIsAFailure(t *testing.T) {
	var events []nethttp.Event
	h := wrap(t, newLimiter(t, freePlan, newClock(t0)), recorder(&events), nethttp.WithFailClosed(),
		nethttp.WithPolicyFunc(func(*http.Request, string) (core.Policy, error) {
			return core.TokenBucket(10, time.Minute).WithName("tb"), nil
		}))
	w := get(h, "")
	wantStatus(t, w, http.StatusServiceUnavailable)
	wantHeaders(t, w, map[string]string{}) // a policy the limiter rejects: none applied, none advertised
	if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeFailedClosed}); !reflect.DeepEqual(got, want) {
		t.Fatalf("outcomes(events): got %v, want %v", got, want)
	}
	if err := events[0].Err; !errors.Is(err, core.ErrAlgorithmMismatch) || !strings.HasPrefix(err.Error(), "policy func: ") {
		t.Errorf("events[0].Err: got %v, want %v prefixed %q", err, core.ErrAlgorithmMismatch, "policy func: ")
	}
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
		if rej := e.Check(w, r, nil); rej != nil {
			e.Respond(w, rej)
		}
	})
	n := nethttp.MaxRenderers + 44
	for round := range 2 {
		for i := range n {
			w := planned(h, "k", fmt.Sprint(i))
			limit := fmt.Sprint(1000 + i)
			if got, want := rateHeaders(t, w), with(xHeaders(limit, fmt.Sprint(999+i), "60"),
				"RateLimit-Policy", fmt.Sprintf(`"plan-%d";q=%s;w=60`, i, limit),
				"RateLimit", fmt.Sprintf(`"plan-%d";r=%d;t=60`, i, 999+i)); !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, plan %d: got %v, want %v", round, i, got, want)
			}
		}
		if got := nethttp.CachedRenderers(e); got != nethttp.MaxRenderers {
			t.Errorf("nethttp.CachedRenderers(e): got %v, want %v", got, nethttp.MaxRenderers)
		}
	}
	planned(h, "k", "x") // the limiter's own policy: not cached
	if got := nethttp.CachedRenderers(e); got != nethttp.MaxRenderers {
		t.Errorf("nethttp.CachedRenderers(e): got %v, want %v", got, nethttp.MaxRenderers)
	}
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
				if err := e.Check(w, r, nil); err != nil {
					t.Errorf("Check: %v", err)
					return
				}
				if got, want := w.Header().Get("RateLimit-Policy"), `"`+name+`";q=10;w=60`; got != want {
					t.Errorf("RateLimit-Policy: got %q, want %q", got, want)
				}
			}
		}()
	}
	for range goroutines {
		<-done
	}
	if got := nethttp.CachedRenderers(e); got != plans {
		t.Errorf("nethttp.CachedRenderers(e): got %v, want %v", got, plans)
	}
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
		{"headers=XRateLimit", fixed, nil, 2},
		{"headers=XRateLimit with a hook", fixed, []nethttp.Option{nop}, 2},
		{"headers=XRateLimit per request", perRequest, []nethttp.Option{pro}, 2},
		{"headers=None per request", perRequest, []nethttp.Option{pro, nethttp.WithHeaderStyle(nethttp.HeadersNone)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := nethttp.NewEngine(tc.lim, append([]nethttp.Option{static}, tc.opts...)...)
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			w := httpbench.NewDiscardWriter()
			e.Check(w, r, nil) // the first request under a policy caches its strings
			got := testing.AllocsPerRun(100, func() {
				w.Reset()
				if e.Check(w, r, nil) != nil {
					panic("rejected")
				}
			})
			if got != tc.allocs {
				t.Errorf("allocations per Check: got %v, want %v", got, tc.allocs)
			}
		})
	}
}
