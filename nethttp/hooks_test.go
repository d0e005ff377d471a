package nethttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-ratelimit/ratelimit/internal/testkit/assert"
	"github.com/go-ratelimit/ratelimit/internal/testkit/require"

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
	assert.Equal(t, http.StatusOK, send(h, r, "").Code)
	assert.Equal(t, http.StatusTooManyRequests, get(h, "").Code)
	assert.Equal(t, []string{"first allowed", "second allowed", "first denied", "second denied"}, order)

	require.Len(t, events, 2)
	assert.Same(t, r, events[0].Request)
	assert.Equal(t, nethttp.Event{
		Request: events[0].Request, Key: "192.0.2.1", Cost: 1, Outcome: nethttp.OutcomeAllowed,
		Decision: core.Decision{Allowed: true, Limit: 1, Remaining: 0, ResetAfter: time.Minute, Policy: lim.Policy()},
		Latency:  events[0].Latency,
	}, events[0])
	assert.Equal(t, nethttp.Event{
		Request: events[1].Request, Key: "192.0.2.1", Cost: 1, Outcome: nethttp.OutcomeDenied,
		Decision: core.Decision{Limit: 1, ResetAfter: time.Minute, RetryAfter: time.Minute, Policy: lim.Policy()},
		Latency:  events[1].Latency,
	}, events[1])
}

func TestHooksAreNotCalledForSkippedRequests(t *testing.T) {
	var events []nethttp.Event
	h := wrap(t, newLimiter(t, core.FixedWindow(1, time.Minute), newClock(t0)),
		nethttp.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }), recorder(&events))
	send(h, httptest.NewRequest(http.MethodGet, "/healthz", nil), "")
	assert.Empty(t, events)
	get(h, "")
	assert.Len(t, events, 1)
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
		require.NoError(t, err)
		defer lim.Close()
		var events []nethttp.Event
		h := wrap(t, sleepy{lim, 3 * time.Millisecond}, recorder(&events),
			nethttp.WithCostFunc(func(*http.Request) (int64, error) {
				time.Sleep(time.Second) // not the limiter's time
				return 2, nil
			}))
		get(h, "")
		require.Len(t, events, 1)
		assert.Equal(t, 3*time.Millisecond, events[0].Latency)
		assert.Equal(t, int64(2), events[0].Cost)
	})
}

func TestHookSeesTheOutcomeAfterALeakyBucketDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := core.New(core.LeakyBucket(1, time.Second).WithBurst(3))
		require.NoError(t, err)
		defer lim.Close()
		var events []nethttp.Event
		var servedAt []time.Duration
		start := time.Now()
		mw := nethttp.Middleware(lim, recorder(&events), nethttp.WithHook(func(nethttp.Event) {
			servedAt = append(servedAt, time.Since(start))
		}))
		h := mw(ok)
		assert.Equal(t, http.StatusOK, get(h, "").Code)
		assert.Equal(t, http.StatusOK, get(h, "").Code)

		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		w := send(h, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil), "")
		assert.Equal(t, http.StatusServiceUnavailable, w.Code)

		assert.Equal(t, []nethttp.Outcome{nethttp.OutcomeAllowed, nethttp.OutcomeAllowed, nethttp.OutcomeCanceled}, outcomes(events))
		assert.Equal(t, []time.Duration{0, time.Second, 1300 * time.Millisecond}, servedAt, "after each delay")
		assert.Equal(t, time.Second, events[1].Decision.Delay)
		assert.Equal(t, time.Second, events[2].Decision.Delay, "it would have left at 2 s")
		assert.ErrorIs(t, events[2].Err, context.DeadlineExceeded)
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

			assert.Equal(t, http.StatusServiceUnavailable, w.Code)
			assert.Equal(t, "Service Unavailable\n", w.Body.String())
			assert.Empty(t, rateHeaders(t, w), "nothing is known, and nobody is listening")
			assert.False(t, served)
			require.Equal(t, []nethttp.Outcome{nethttp.OutcomeCanceled}, outcomes(events))
			assert.ErrorIs(t, events[0].Err, context.Canceled)
			assert.Equal(t, core.Decision{Limit: 5, Policy: p}, events[0].Decision)
		})
	}
	t.Run("the deadline of the request, with its latency", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var events []nethttp.Event
			h := wrap(t, blocking{p: p}, recorder(&events))
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
			defer cancel()
			w := send(h, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil), "")
			assert.Equal(t, http.StatusServiceUnavailable, w.Code)
			require.Equal(t, []nethttp.Outcome{nethttp.OutcomeCanceled}, outcomes(events))
			assert.ErrorIs(t, events[0].Err, context.DeadlineExceeded)
			assert.Equal(t, 40*time.Millisecond, events[0].Latency)
		})
	})
	t.Run("an adapter's rejection says so", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		e := nethttp.NewEngine(blocking{p: p})
		rej := e.Check(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil))
		require.NotNil(t, rej)
		assert.Equal(t, http.StatusServiceUnavailable, rej.Status)
		assert.EqualError(t, rej, "nethttp: request ended before it was served: store: AllowN: context canceled")
	})
}

// timingOut is a store whose own timeout expires while the request's
// context is still alive: a failure, not a cancellation.
type timingOut struct{ coretest.Failing }

func TestLimiterTimeoutIsAFailure(t *testing.T) {
	var events []nethttp.Event
	lim := timingOut{coretest.Failing{Err: fmt.Errorf("store: %w", context.DeadlineExceeded), P: core.FixedWindow(5, time.Second)}}
	w := get(wrap(t, lim, recorder(&events)), "")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, map[string]string{nethttp.HeaderLimit: "5"}, rateHeaders(t, w))
	require.Equal(t, []nethttp.Outcome{nethttp.OutcomeFailedOpen}, outcomes(events))
	assert.ErrorIs(t, events[0].Err, context.DeadlineExceeded)
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
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, map[string]string{
			nethttp.HeaderLimit: "80", nethttp.HeaderRateLimitPolicy: `"stored";q=80;w=60`,
		}, rateHeaders(t, w))
		require.Len(t, events, 1)
		assert.Equal(t, core.Decision{Limit: 80, Policy: stored}, events[0].Decision)
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
				assert.Equal(t, want, w.Code)
				assert.Equal(t, tc.want, rateHeaders(t, w), "%v, failClosed=%v", tc.style, failClosed)
			}
		}
	})
	t.Run("keeping an outer limit's complete fields", func(t *testing.T) {
		clk := newClock(t0)
		outer := nethttp.Middleware(newLimiter(t, core.FixedWindow(10, time.Minute).WithName("outer"), clk),
			nethttp.WithHeaderStyle(nethttp.HeadersBoth))
		inner := nethttp.Middleware(coretest.Failing{Err: broken, P: own}, nethttp.WithHeaderStyle(nethttp.HeadersBoth))
		w := get(outer(inner(ok)), "")
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, with(xHeaders("10", "9", "60"),
			nethttp.HeaderRateLimitPolicy, `"outer";q=10;w=60, "per-ip";q=100;w=60`,
			nethttp.HeaderRateLimit, `"outer";r=9;t=60`), rateHeaders(t, w))
	})
}

// TestUnknownStateIsNotWritten: a denial of a cost above capacity whose
// state the store could not read (StateUnknown, as redisstore returns it
// while Redis is down) is answered 429 with the limit and the policy, never
// a Remaining, a Reset or a Retry-After, even where an outer limit wrote
// its own.
func TestUnknownStateIsNotWritten(t *testing.T) {
	own := core.TokenBucket(100, time.Minute).WithName("per-ip")
	err := fmt.Errorf("store: %w (key state unknown: redis: connection refused)", core.ErrCostExceedsCapacity)
	lim := partial{coretest.Failing{Err: err, P: own}, core.Decision{Limit: 100, Policy: own, StateUnknown: true}}
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
			assert.Equal(t, http.StatusTooManyRequests, w.Code)
			assert.Equal(t, tc.want, rateHeaders(t, w))
		})
	}
}

func TestOutcomeString(t *testing.T) {
	var got []string
	for o := nethttp.OutcomeAllowed; o <= nethttp.OutcomeCanceled+1; o++ {
		got = append(got, o.String())
	}
	assert.Equal(t, []string{
		"allowed", "denied", "dry-run", "failed-open", "failed-closed", "key-error", "cost-error", "canceled", "Outcome(8)",
	}, got)
}

func TestEventLimiterCalled(t *testing.T) {
	for _, tc := range []struct {
		ev   nethttp.Event
		want bool
	}{
		{nethttp.Event{Outcome: nethttp.OutcomeAllowed}, true},
		{nethttp.Event{Outcome: nethttp.OutcomeDenied}, true},
		{nethttp.Event{Outcome: nethttp.OutcomeDryRun}, true},
		{nethttp.Event{Outcome: nethttp.OutcomeFailedOpen, Latency: 50 * time.Millisecond}, true},
		{nethttp.Event{Outcome: nethttp.OutcomeFailedClosed, Latency: time.Microsecond}, true},
		{nethttp.Event{Outcome: nethttp.OutcomeCanceled, Latency: time.Millisecond}, true},
		{nethttp.Event{Outcome: nethttp.OutcomeFailedOpen}, false}, // a failed WithPolicyFunc lookup
		{nethttp.Event{Outcome: nethttp.OutcomeKeyError}, false},
		{nethttp.Event{Outcome: nethttp.OutcomeCostError}, false},
	} {
		assert.Equal(t, tc.want, tc.ev.LimiterCalled(), "%v, latency %v", tc.ev.Outcome, tc.ev.Latency)
	}
}
