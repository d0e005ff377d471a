package nethttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

func TestHooksGetOneEventPerRequestInOrder(t *testing.T) {
	clk := newClock(t0)
	lim := newLimiter(t, core.FixedWindow(1, time.Minute).WithName("per-ip"), clk)
	var order []string
	var events []nethttp.Event
	h := wrap(t, lim,
		nethttp.WithHook(func(ev nethttp.Event) { order = append(order, "first "+ev.Outcome.String()) }),
		nethttp.WithHook(func(ev nethttp.Event) { order = append(order, "second "+ev.Outcome.String()) }),
		recorder(&events))

	r := httptest.NewRequest(http.MethodGet, "/a", nil)
	if got := send(h, r, "").Code; got != http.StatusOK {
		t.Errorf("status: got %v, want %v", got, http.StatusOK)
	}
	if got := get(h, "").Code; got != http.StatusTooManyRequests {
		t.Errorf("status: got %v, want %v", got, http.StatusTooManyRequests)
	}
	if got, want := order, ([]string{"first allowed", "second allowed", "first denied", "second denied"}); !reflect.DeepEqual(got, want) {
		t.Errorf("order: got %v, want %v", got, want)
	}

	if got := len(events); got != 2 {
		t.Fatalf("len(events): got %d, want %d", got, 2)
	}
	if got := events[0].Request; got != r {
		t.Errorf("events[0].Request: got %p, want %p", got, r)
	}
	if got, want := events[0], (nethttp.Event{
		Request: events[0].Request, Key: "192.0.2.1", Cost: 1, Outcome: nethttp.OutcomeAllowed,
		Decision: core.Decision{Allowed: true, Limit: 1, Remaining: 0, ResetAfter: time.Minute, Policy: lim.Policy(), At: t0.UTC()},
		Latency:  events[0].Latency, LimiterCalled: true,
	}); got != want {
		t.Errorf("events[0]: got %v, want %v", got, want)
	}
	if got, want := events[1], (nethttp.Event{
		Request: events[1].Request, Key: "192.0.2.1", Cost: 1, Outcome: nethttp.OutcomeDenied,
		Decision: core.Decision{Limit: 1, ResetAfter: time.Minute, RetryAfter: time.Minute, Policy: lim.Policy(), At: t0.UTC()},
		Latency:  events[1].Latency, LimiterCalled: true,
	}); got != want {
		t.Errorf("events[1]: got %v, want %v", got, want)
	}
}

func TestHooksAreNotCalledForSkippedRequests(t *testing.T) {
	var events []nethttp.Event
	h := wrap(t, newLimiter(t, core.FixedWindow(1, time.Minute), newClock(t0)),
		nethttp.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }), recorder(&events))
	send(h, httptest.NewRequest(http.MethodGet, "/healthz", nil), "")
	if got := events; len(got) != 0 {
		t.Errorf("events: got %v, want empty", got)
	}
	get(h, "")
	if got := len(events); got != 1 {
		t.Errorf("len(events): got %d, want %d", got, 1)
	}
}

// sleepy is a limiter that takes d (of synctest's fake time) to answer.
type sleepy struct {
	core.Limiter
	d time.Duration
}

func (s sleepy) AllowN(ctx context.Context, key string, n int64) (core.Decision, error) {
	time.Sleep(s.d)
	return s.Limiter.AllowN(ctx, key, n)
}

func TestHookLatencyIsTheLimiterCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := core.New(core.FixedWindow(10, time.Minute))
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		defer lim.Close()
		var events []nethttp.Event
		h := wrap(t, sleepy{lim, 3 * time.Millisecond}, recorder(&events),
			nethttp.WithCostFunc(func(*http.Request) (int64, error) {
				time.Sleep(time.Second) // not the limiter's time
				return 2, nil
			}))
		get(h, "")
		if got := len(events); got != 1 {
			t.Fatalf("len(events): got %d, want %d", got, 1)
		}
		if got := events[0].Latency; got != 3*time.Millisecond {
			t.Errorf("events[0].Latency: got %v, want %v", got, 3*time.Millisecond)
		}
		if got := events[0].Cost; got != int64(2) {
			t.Errorf("events[0].Cost: got %v, want %v", got, int64(2))
		}
	})
}

func TestHookSeesTheOutcomeAfterALeakyBucketDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := core.New(core.LeakyBucket(1, time.Second).WithBurst(3))
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		defer lim.Close()
		var events []nethttp.Event
		var servedAt []time.Duration
		start := time.Now()
		mw := nethttp.Middleware(lim, recorder(&events), nethttp.WithHook(func(nethttp.Event) {
			servedAt = append(servedAt, time.Since(start))
		}))
		h := mw(ok)
		if got := get(h, "").Code; got != http.StatusOK {
			t.Errorf("status: got %v, want %v", got, http.StatusOK)
		}
		if got := get(h, "").Code; got != http.StatusOK {
			t.Errorf("status: got %v, want %v", got, http.StatusOK)
		}

		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		w := send(h, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil), "")
		wantStatus(t, w, http.StatusServiceUnavailable)

		if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeAllowed, nethttp.OutcomeAllowed, nethttp.OutcomeCanceled}); !reflect.DeepEqual(got, want) {
			t.Errorf("outcomes: got %v, want %v", got, want)
		}
		if got, want := servedAt, ([]time.Duration{0, time.Second, 1300 * time.Millisecond}); !reflect.DeepEqual(got, want) {
			t.Errorf("after each delay: got %v, want %v", got, want)
		}
		if got := events[1].Decision.Delay; got != time.Second {
			t.Errorf("events[1].Decision.Delay: got %v, want %v", got, time.Second)
		}
		if got := events[2].Decision.Delay; got != time.Second {
			t.Errorf("it would have left at 2 s: got %v, want %v", got, time.Second)
		}
		if err := events[2].Err; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("events[2].Err: got %v, want %v", err, context.DeadlineExceeded)
		}
	})
}

// blocking is a limiter that answers only when the request's context ends,
// with the context's error wrapped as a store wraps it, and the Limit and
// Policy a store returns with its errors. entered is told each call.
type blocking struct {
	p       core.Policy
	entered chan struct{}
}

func (b blocking) AllowN(ctx context.Context, _ string, _ int64) (core.Decision, error) {
	if b.entered != nil {
		b.entered <- struct{}{}
	}
	<-ctx.Done()
	return core.Decision{Limit: b.p.Limit, Policy: b.p}, fmt.Errorf("store: AllowN: %w", ctx.Err())
}
func (b blocking) Peek(context.Context, string) (core.Decision, error) { return core.Decision{}, nil }
func (b blocking) Reset(context.Context, string) error                 { return nil }
func (b blocking) Policy() core.Policy                                 { return b.p }

func TestCallerCancellationIsNotALimiterFailure(t *testing.T) {
	p := core.FixedWindow(5, time.Second)
	for _, failClosed := range []bool{false, true} {
		t.Run(fmt.Sprintf("failClosed=%v", failClosed), func(t *testing.T) {
			lim := blocking{p: p, entered: make(chan struct{})}
			var events []nethttp.Event
			opts := []nethttp.Option{recorder(&events), nethttp.WithHeaderStyle(nethttp.HeadersBoth)}
			if failClosed {
				opts = append(opts, nethttp.WithFailClosed())
			}
			served := false
			mw := nethttp.Middleware(lim, opts...)
			h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }))

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				<-lim.entered // the client hangs up while the limiter decides
				cancel()
			}()
			w := send(h, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil), "")

			wantStatus(t, w, http.StatusServiceUnavailable)
			if got := w.Body.String(); got != "Service Unavailable\n" {
				t.Errorf("body: got %q, want %q", got, "Service Unavailable\n")
			}
			if got := rateHeaders(t, w); len(got) != 0 {
				t.Errorf("nothing is known, and nobody is listening: got %v, want empty", got)
			}
			if served {
				t.Errorf("served: got true, want false")
			}
			if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeCanceled}); !reflect.DeepEqual(got, want) {
				t.Fatalf("outcomes(events): got %v, want %v", got, want)
			}
			if err := events[0].Err; !errors.Is(err, context.Canceled) {
				t.Errorf("events[0].Err: got %v, want %v", err, context.Canceled)
			}
			if got, want := events[0].Decision, (core.Decision{Limit: 5, Policy: p}); got != want {
				t.Errorf("events[0].Decision: got %v, want %v", got, want)
			}
		})
	}
	t.Run("the deadline of the request, with its latency", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var events []nethttp.Event
			h := wrap(t, blocking{p: p}, recorder(&events))
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
			defer cancel()
			w := send(h, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil), "")
			wantStatus(t, w, http.StatusServiceUnavailable)
			if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeCanceled}); !reflect.DeepEqual(got, want) {
				t.Fatalf("outcomes(events): got %v, want %v", got, want)
			}
			if err := events[0].Err; !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("events[0].Err: got %v, want %v", err, context.DeadlineExceeded)
			}
			if got := events[0].Latency; got != 40*time.Millisecond {
				t.Errorf("events[0].Latency: got %v, want %v", got, 40*time.Millisecond)
			}
		})
	})
	t.Run("an adapter's rejection says so", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		e := nethttp.NewEngine(blocking{p: p})
		rej := e.Check(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil), nil)
		if rej == nil {
			t.Fatalf("rej: got nil")
		}
		if got := rej.Status; got != http.StatusServiceUnavailable {
			t.Errorf("rej.Status: got %v, want %v", got, http.StatusServiceUnavailable)
		}
		if rej == nil || rej.Error() != "nethttp: request ended before it was served: store: AllowN: context canceled" {
			t.Errorf("rej: got %v, want %q", rej, "nethttp: request ended before it was served: store: AllowN: context canceled")
		}
	})
}

// timingOut is a store whose own timeout expires while the request's
// context is still alive: a failure, not a cancellation.
type timingOut struct{ coretest.Failing }

func TestLimiterTimeoutIsAFailure(t *testing.T) {
	var events []nethttp.Event
	lim := timingOut{coretest.Failing{Err: fmt.Errorf("store: %w", context.DeadlineExceeded), P: core.FixedWindow(5, time.Second)}}
	w := get(wrap(t, lim, recorder(&events)), "")
	wantStatus(t, w, http.StatusOK)
	wantHeaders(t, w, map[string]string{nethttp.HeaderLimit: "5"})
	if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeFailedOpen}); !reflect.DeepEqual(got, want) {
		t.Fatalf("outcomes(events): got %v, want %v", got, want)
	}
	if err := events[0].Err; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("events[0].Err: got %v, want %v", err, context.DeadlineExceeded)
	}
}

// partial is a store that fails with what it knows of the limit, as
// redisstore does: its Limit and Policy.
type partial struct {
	coretest.Failing
	d core.Decision
}

func (p partial) AllowN(context.Context, string, int64) (core.Decision, error) { return p.d, p.Err }

func TestFailureHeadersCarryWhatIsKnown(t *testing.T) {
	own := core.TokenBucket(100, time.Minute).WithName("per-ip")
	broken := errors.New("redis: connection refused")
	t.Run("from the decision returned with the error", func(t *testing.T) {
		stored := core.TokenBucket(80, time.Minute).WithName("stored")
		lim := partial{coretest.Failing{Err: broken, P: own}, core.Decision{Limit: 80, Policy: stored, Source: core.SourceStore}}
		var events []nethttp.Event
		w := get(wrap(t, lim, recorder(&events), nethttp.WithHeaderStyle(nethttp.HeadersBoth)), "")
		wantStatus(t, w, http.StatusOK)
		wantHeaders(t, w, map[string]string{
			nethttp.HeaderLimit: "80", nethttp.HeaderRateLimitPolicy: `"stored";q=80;w=60`,
		})
		if got := len(events); got != 1 {
			t.Fatalf("len(events): got %d, want %d", got, 1)
		}
		if got, want := events[0].Decision, (core.Decision{Limit: 80, Policy: stored}); got != want {
			t.Errorf("events[0].Decision: got %v, want %v", got, want)
		}
	})
	t.Run("from the limiter's policy otherwise", func(t *testing.T) {
		for _, tc := range []struct {
			style nethttp.HeaderStyle
			want  map[string]string
		}{
			{nethttp.HeadersXRateLimit, map[string]string{nethttp.HeaderLimit: "100"}},
			{nethttp.HeadersIETF, map[string]string{nethttp.HeaderRateLimitPolicy: `"per-ip";q=100;w=60`}},
			{nethttp.HeadersNone, map[string]string{}},
		} {
			for _, failClosed := range []bool{false, true} {
				opts := []nethttp.Option{nethttp.WithHeaderStyle(tc.style)}
				want := http.StatusOK
				if failClosed {
					opts, want = append(opts, nethttp.WithFailClosed()), http.StatusServiceUnavailable
				}
				w := get(wrap(t, coretest.Failing{Err: broken, P: own}, opts...), "")
				wantStatus(t, w, want)
				if got, want := rateHeaders(t, w), tc.want; !reflect.DeepEqual(got, want) {
					t.Errorf("%v, failClosed=%v: got %v, want %v", tc.style, failClosed, got, want)
				}
			}
		}
	})
	t.Run("keeping an outer limit's complete fields", func(t *testing.T) {
		clk := newClock(t0)
		outer := nethttp.Middleware(newLimiter(t, core.FixedWindow(10, time.Minute).WithName("outer"), clk),
			nethttp.WithHeaderStyle(nethttp.HeadersBoth))
		inner := nethttp.Middleware(coretest.Failing{Err: broken, P: own}, nethttp.WithHeaderStyle(nethttp.HeadersBoth))
		w := get(outer(inner(ok)), "")
		wantStatus(t, w, http.StatusOK)
		wantHeaders(t, w, with(xHeaders("10", "9", "60"),
			nethttp.HeaderRateLimitPolicy, `"outer";q=10;w=60, "per-ip";q=100;w=60`,
			nethttp.HeaderRateLimit, `"outer";r=9;t=60`))
	})
}

// TestUnknownStateIsNotWritten: a denial of a cost above capacity whose
// state the store could not read (as redisstore returns it while Redis is
// down) is answered 429 with the limit and the policy, never
// a Remaining, a Reset or a Retry-After, even where an outer limit wrote
// its own.
func TestUnknownStateIsNotWritten(t *testing.T) {
	own := core.TokenBucket(100, time.Minute).WithName("per-ip")
	err := fmt.Errorf("store: %w (key state unknown: redis: connection refused)", core.ErrCostExceedsCapacity)
	lim := partial{coretest.Failing{Err: err, P: own}, core.Decision{Limit: 100, Policy: own}}
	clk := newClock(t0)
	outer := nethttp.Middleware(newLimiter(t, core.FixedWindow(10, time.Minute).WithName("outer"), clk),
		nethttp.WithHeaderStyle(nethttp.HeadersBoth))
	for _, tc := range []struct {
		name string
		h    http.Handler
		want map[string]string
	}{
		{"alone", wrap(t, lim, nethttp.WithHeaderStyle(nethttp.HeadersBoth)), map[string]string{
			nethttp.HeaderLimit: "100", nethttp.HeaderRateLimitPolicy: `"per-ip";q=100;w=60`,
		}},
		{"inside an outer limit", outer(nethttp.Middleware(lim, nethttp.WithHeaderStyle(nethttp.HeadersBoth))(ok)), map[string]string{
			nethttp.HeaderLimit:           "100",
			nethttp.HeaderRateLimitPolicy: `"outer";q=10;w=60, "per-ip";q=100;w=60`,
			nethttp.HeaderRateLimit:       `"outer";r=9;t=60`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := get(tc.h, "")
			wantStatus(t, w, http.StatusTooManyRequests)
			wantHeaders(t, w, tc.want)
		})
	}
}

func TestOutcomeString(t *testing.T) {
	var got []string
	for o := nethttp.OutcomeAllowed; o <= nethttp.OutcomeSettleFailed+1; o++ {
		got = append(got, o.String())
	}
	if want := ([]string{
		"allowed", "denied", "dry-run", "failed-open", "failed-closed", "key-error", "cost-error", "canceled", "settle-failed", "Outcome(9)",
	}); !reflect.DeepEqual(got, want) {
		t.Errorf("outcome names: got %v, want %v", got, want)
	}
}

func TestHookLimiterCalledIsSetWhenTheLimiterDecidedOrFailed(t *testing.T) {
	p := core.FixedWindow(1, time.Minute)
	broken := coretest.Failing{Err: errors.New("store: down"), P: p}
	for _, tc := range []struct {
		name string
		lim  core.Limiter
		opts []nethttp.Option
		want bool
	}{
		{"a decision", newLimiter(t, p, newClock(t0)), nil, true},
		{"a store failure", broken, nil, true},
		{"a key error", broken, []nethttp.Option{nethttp.WithKeyFunc(func(*http.Request) (string, error) { return "", errors.New("no key") })}, false},
		{"a cost error", broken, []nethttp.Option{nethttp.WithCostFunc(func(*http.Request) (int64, error) { return 0, nil })}, false},
		{"a failed policy lookup", newLimiter(t, p, newClock(t0)), []nethttp.Option{nethttp.WithPolicyFunc(func(*http.Request, string) (core.Policy, error) {
			return core.Policy{}, errors.New("plan lookup failed")
		})}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var events []nethttp.Event
			get(wrap(t, tc.lim, append(tc.opts, recorder(&events))...), "")
			if got := len(events); got != 1 {
				t.Fatalf("len(events): got %d, want %d", got, 1)
			}
			if got := events[0].LimiterCalled; got != tc.want {
				t.Errorf("LimiterCalled (%v): got %v, want %v", events[0].Outcome, got, tc.want)
			}
		})
	}
}

func TestOutcomeOf(t *testing.T) {
	live, ended := context.Background(), canceledContext()
	down := errors.New("store: down")
	over := fmt.Errorf("store: %w", core.ErrCostExceedsCapacity)
	closed := fmt.Errorf("store: %w", core.ErrClosed)
	allowed, denied := core.Decision{Allowed: true}, core.Decision{}
	for _, tc := range []struct {
		name               string
		ctx                context.Context
		d                  core.Decision
		err                error
		failClosed, dryRun bool
		want               nethttp.Outcome
	}{
		{"an admission", live, allowed, nil, false, false, nethttp.OutcomeAllowed},
		{"a denial", live, denied, nil, false, false, nethttp.OutcomeDenied},
		{"a denial in dry run", live, denied, nil, false, true, nethttp.OutcomeDryRun},
		{"a cost above capacity", live, denied, over, true, false, nethttp.OutcomeDenied},
		{"a cost above capacity in dry run", live, denied, over, false, true, nethttp.OutcomeDryRun},
		{"a cost <= 0", live, denied, fmt.Errorf("store: %w", core.ErrInvalidCost), true, false, nethttp.OutcomeCostError},
		{"a failure", live, denied, down, false, false, nethttp.OutcomeFailedOpen},
		{"a failure, failing closed", live, denied, down, true, false, nethttp.OutcomeFailedClosed},
		{"a failure, failing closed in dry run", live, denied, down, true, true, nethttp.OutcomeFailedOpen},
		{"a closed limiter", live, denied, closed, false, false, nethttp.OutcomeFailedClosed},
		{"a closed limiter in dry run", live, denied, closed, false, true, nethttp.OutcomeFailedOpen},
		{"the request's context ended", ended, denied, fmt.Errorf("store: %w", context.Canceled), true, false, nethttp.OutcomeCanceled},
		{"a store's own timeout on a live context", live, denied, fmt.Errorf("store: %w", context.DeadlineExceeded), false, false, nethttp.OutcomeFailedOpen},
	} {
		if got := nethttp.OutcomeOf(tc.ctx, tc.d, tc.err, tc.failClosed, tc.dryRun); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func canceledContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
