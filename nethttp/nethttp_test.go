package nethttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-ratelimit/ratelimit/internal/testkit/assert"
	"github.com/go-ratelimit/ratelimit/internal/testkit/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

func TestMiddlewareLimitsAWindow(t *testing.T) {
	clk := newClock(t0)
	h := wrap(t, newLimiter(t, core.FixedWindow(100, time.Minute), clk))

	t.Run("admits 100 requests with exact headers", func(t *testing.T) {
		for i := 1; i <= 100; i++ {
			w := get(h, "")
			require.Equal(t, http.StatusOK, w.Code, "request %d", i)
			require.Equal(t, xHeaders("100", fmt.Sprint(100-i), "60"), rateHeaders(t, w), "request %d", i)
			require.Equal(t, "ok", w.Body.String())
		}
	})
	t.Run("denies the 101st request in a window with exact headers", func(t *testing.T) {
		clk.Set(t0.Add(54 * time.Second))
		w := get(h, "")
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Equal(t, with(xHeaders("100", "0", "6"), nethttp.HeaderRetryAfter, "6"), rateHeaders(t, w))
		assert.Equal(t, "text/plain; charset=utf-8", w.Header().Get("Content-Type"))
		assert.Equal(t, "Too Many Requests\n", w.Body.String())
	})
	t.Run("rounds Retry-After and the reset up to whole seconds", func(t *testing.T) {
		clk.Set(t0.Add(54*time.Second + 500*time.Millisecond))
		w := get(h, "")
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Equal(t, with(xHeaders("100", "0", "6"), nethttp.HeaderRetryAfter, "6"), rateHeaders(t, w))
	})
	t.Run("keeps Retry-After at 1 or more just before the reset", func(t *testing.T) {
		clk.Set(t0.Add(time.Minute - time.Millisecond))
		w := get(h, "")
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Equal(t, with(xHeaders("100", "0", "1"), nethttp.HeaderRetryAfter, "1"), rateHeaders(t, w))
	})
	t.Run("counts another client separately", func(t *testing.T) {
		w := get(h, "198.51.100.7:999")
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, xHeaders("100", "99", "1"), rateHeaders(t, w))
	})
	t.Run("admits again in the next window", func(t *testing.T) {
		clk.Set(t0.Add(time.Minute))
		w := get(h, "")
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, xHeaders("100", "99", "60"), rateHeaders(t, w))
	})
}

func TestMiddlewareResetAsUnixTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// In the bubble time.Now is 2000-01-01T00:00:00Z and only moves
		// when every goroutine is blocked: exact Unix times.
		start := time.Now()
		lim, err := core.New(core.FixedWindow(3, 10*time.Second))
		require.NoError(t, err)
		defer lim.Close()
		h := wrap(t, lim, nethttp.WithResetAsUnixTime())

		time.Sleep(2500 * time.Millisecond)
		w := get(h, "")
		assert.Equal(t, xHeaders("3", "2", fmt.Sprint(start.Unix()+10)), rateHeaders(t, w))
	})
}

func TestMiddlewareHeaderStyles(t *testing.T) {
	policy := core.FixedWindow(100, time.Minute)
	for _, tc := range []struct {
		name    string
		policy  core.Policy
		style   nethttp.HeaderStyle
		allowed map[string]string // on the 100th request
		denied  map[string]string // on the 101st, 6 s before the reset
	}{{
		name: "X-RateLimit by default", policy: policy, style: nethttp.HeadersXRateLimit,
		allowed: xHeaders("100", "0", "60"),
		denied:  with(xHeaders("100", "0", "6"), "Retry-After", "6"),
	}, {
		name: "IETF fields with the policy's name", policy: policy.WithName("per-ip"), style: nethttp.HeadersIETF,
		allowed: map[string]string{"RateLimit-Policy": `"per-ip";q=100;w=60`, "RateLimit": `"per-ip";r=0;t=60`},
		denied: map[string]string{
			"RateLimit-Policy": `"per-ip";q=100;w=60`, "RateLimit": `"per-ip";r=0;t=6`, "Retry-After": "6",
		},
	}, {
		name: "IETF fields with a name derived from the policy", policy: policy, style: nethttp.HeadersIETF,
		allowed: map[string]string{
			"RateLimit-Policy": `"fixedwindow-100-per-60s";q=100;w=60`, "RateLimit": `"fixedwindow-100-per-60s";r=0;t=60`,
		},
		denied: map[string]string{
			"RateLimit-Policy": `"fixedwindow-100-per-60s";q=100;w=60`, "RateLimit": `"fixedwindow-100-per-60s";r=0;t=6`,
			"Retry-After": "6",
		},
	}, {
		name: "IETF names escaped as structured-field strings", policy: policy.WithName(`a "quoted" \name`), style: nethttp.HeadersIETF,
		allowed: map[string]string{
			"RateLimit-Policy": `"a \"quoted\" \\name";q=100;w=60`, "RateLimit": `"a \"quoted\" \\name";r=0;t=60`,
		},
		denied: map[string]string{
			"RateLimit-Policy": `"a \"quoted\" \\name";q=100;w=60`, "RateLimit": `"a \"quoted\" \\name";r=0;t=6`,
			"Retry-After": "6",
		},
	}, {
		name: "both sets", policy: policy.WithName("per-ip"), style: nethttp.HeadersBoth,
		allowed: with(xHeaders("100", "0", "60"), "RateLimit-Policy", `"per-ip";q=100;w=60`, "RateLimit", `"per-ip";r=0;t=60`),
		denied: with(xHeaders("100", "0", "6"), "RateLimit-Policy", `"per-ip";q=100;w=60`, "RateLimit", `"per-ip";r=0;t=6`,
			"Retry-After", "6"),
	}, {
		name: "none but Retry-After", policy: policy, style: nethttp.HeadersNone,
		allowed: map[string]string{},
		denied:  map[string]string{"Retry-After": "6"},
	}} {
		t.Run("writes "+tc.name, func(t *testing.T) {
			clk := newClock(t0)
			h := wrap(t, newLimiter(t, tc.policy, clk), nethttp.WithHeaderStyle(tc.style))
			for range 99 {
				require.Equal(t, http.StatusOK, get(h, "").Code)
			}
			w := get(h, "")
			require.Equal(t, http.StatusOK, w.Code)
			assert.Equal(t, tc.allowed, rateHeaders(t, w))
			clk.Set(t0.Add(54 * time.Second))
			w = get(h, "")
			require.Equal(t, http.StatusTooManyRequests, w.Code)
			assert.Equal(t, tc.denied, rateHeaders(t, w))
		})
	}
	t.Run("rounds a sub-second IETF window up to w=1", func(t *testing.T) {
		h := wrap(t, newLimiter(t, core.FixedWindow(5, 500*time.Millisecond).WithName("burst"), newClock(t0)),
			nethttp.WithHeaderStyle(nethttp.HeadersIETF))
		assert.Equal(t, `"burst";q=5;w=1`, get(h, "").Header().Get("RateLimit-Policy"))
	})
}

func TestMiddlewareSkip(t *testing.T) {
	clk := newClock(t0)
	lim := newLimiter(t, core.FixedWindow(1, time.Minute), clk)
	var hooks int
	health := func(r *http.Request) bool { return r.URL.Path == "/healthz" }
	never := func(*http.Request) bool { return false }
	h := wrap(t, lim, nethttp.WithSkip(never), nethttp.WithSkip(health),
		nethttp.WithHook(func(nethttp.Event) { hooks++ }))

	t.Run("lets skipped requests through without headers, hooks or cost", func(t *testing.T) {
		for range 5 {
			w := send(h, httptest.NewRequest(http.MethodGet, "/healthz", nil), "")
			require.Equal(t, http.StatusOK, w.Code)
			assert.Empty(t, rateHeaders(t, w))
		}
		assert.Zero(t, hooks)
		d, err := lim.Peek(context.Background(), "192.0.2.1")
		require.NoError(t, err)
		assert.Equal(t, int64(1), d.Remaining)
	})
	t.Run("limits the other requests", func(t *testing.T) {
		assert.Equal(t, http.StatusOK, get(h, "").Code)
		assert.Equal(t, http.StatusTooManyRequests, get(h, "").Code)
		assert.Equal(t, 2, hooks)
	})
}

func TestMiddlewareCost(t *testing.T) {
	costHeader := func(r *http.Request) (int64, error) {
		var n int64
		_, err := fmt.Sscan(r.Header.Get("X-Cost"), &n)
		return n, err
	}
	setup := func(t *testing.T) (http.Handler, *[]nethttp.Event) {
		var events []nethttp.Event
		h := wrap(t, newLimiter(t, core.FixedWindow(100, time.Minute), newClock(t0)),
			nethttp.WithCostFunc(costHeader), recorder(&events))
		return h, &events
	}

	t.Run("charges the request's cost", func(t *testing.T) {
		h, events := setup(t)
		w := get(h, "", "X-Cost", "10")
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, xHeaders("100", "90", "60"), rateHeaders(t, w))
		w = get(h, "", "X-Cost", "91")
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Equal(t, with(xHeaders("100", "90", "60"), "Retry-After", "60"), rateHeaders(t, w))
		require.Len(t, *events, 2)
		assert.Equal(t, []int64{10, 91}, []int64{(*events)[0].Cost, (*events)[1].Cost})
		assert.Equal(t, []nethttp.Outcome{nethttp.OutcomeAllowed, nethttp.OutcomeDenied}, outcomes(*events))
		assert.NoError(t, (*events)[1].Err, "a denial is not an error")
	})
	t.Run("denies a cost above capacity without Retry-After", func(t *testing.T) {
		h, events := setup(t)
		w := get(h, "", "X-Cost", "101")
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Equal(t, xHeaders("100", "100", "0"), rateHeaders(t, w))
		assert.Equal(t, "Too Many Requests: the request costs more than the rate limit ever admits\n", w.Body.String())
		require.Len(t, *events, 1)
		ev := (*events)[0]
		assert.Equal(t, nethttp.OutcomeDenied, ev.Outcome)
		assert.Equal(t, int64(101), ev.Cost)
		assert.False(t, ev.Decision.Allowed)
		assert.Zero(t, ev.Decision.RetryAfter)
		assert.ErrorIs(t, ev.Err, core.ErrCostExceedsCapacity)
	})
	t.Run("answers 500 when the cost function fails", func(t *testing.T) {
		h, events := setup(t)
		w := get(h, "", "X-Cost", "<script>")
		assert.Equal(t, http.StatusInternalServerError, w.Code)
		assert.Equal(t, "Internal Server Error\n", w.Body.String())
		assert.Empty(t, rateHeaders(t, w))
		require.Len(t, *events, 1)
		ev := (*events)[0]
		assert.Equal(t, nethttp.OutcomeCostError, ev.Outcome)
		assert.Equal(t, "192.0.2.1", ev.Key)
		assert.Zero(t, ev.Cost)
		assert.Zero(t, ev.Latency, "the limiter was not called")
		p := core.FixedWindow(100, time.Minute)
		assert.Equal(t, core.Decision{Limit: 100, Policy: p}, ev.Decision, "the limit the request met, for metrics")
		assert.EqualError(t, ev.Err, "cost function: expected integer")
	})
	t.Run("answers 500 for a cost of zero, a server bug", func(t *testing.T) {
		h, events := setup(t)
		w := get(h, "", "X-Cost", "0")
		assert.Equal(t, http.StatusInternalServerError, w.Code)
		require.Len(t, *events, 1)
		assert.Equal(t, nethttp.OutcomeCostError, (*events)[0].Outcome)
		assert.ErrorIs(t, (*events)[0].Err, core.ErrInvalidCost)
		assert.EqualError(t, (*events)[0].Err, "cost function returned 0: core: cost must be > 0")
	})
}

func TestMiddlewareDryRun(t *testing.T) {
	var events []nethttp.Event
	opts := []nethttp.Option{nethttp.WithDryRun(), recorder(&events)}
	t.Run("serves a request the limit would deny, with headers but no Retry-After", func(t *testing.T) {
		events = nil
		h := wrap(t, newLimiter(t, core.FixedWindow(1, time.Minute), newClock(t0)), opts...)
		assert.Equal(t, http.StatusOK, get(h, "").Code)
		w := get(h, "")
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, "ok", w.Body.String())
		assert.Equal(t, xHeaders("1", "0", "60"), rateHeaders(t, w))
		assert.Equal(t, []nethttp.Outcome{nethttp.OutcomeAllowed, nethttp.OutcomeDryRun}, outcomes(events))
		assert.True(t, events[0].Decision.Allowed)
		assert.False(t, events[1].Decision.Allowed)
		assert.Equal(t, time.Minute, events[1].Decision.RetryAfter)
	})
	t.Run("serves a request without a key, reporting the error", func(t *testing.T) {
		events = nil
		h := wrap(t, newLimiter(t, core.FixedWindow(1, time.Minute), newClock(t0)),
			append(opts, nethttp.WithKeyFunc(mustHeader(t, "X-API-Key")))...)
		assert.Equal(t, http.StatusOK, get(h, "").Code)
		require.Equal(t, []nethttp.Outcome{nethttp.OutcomeKeyError}, outcomes(events))
		assert.ErrorIs(t, events[0].Err, keyfunc.ErrNoKey)
		assert.Empty(t, events[0].Key)
	})
	t.Run("serves requests when the limiter fails, even fail-closed", func(t *testing.T) {
		events = nil
		h := wrap(t, coretest.Failing{Err: errors.New("boom"), P: core.FixedWindow(3, time.Second)},
			append(opts, nethttp.WithFailClosed())...)
		w := get(h, "")
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, map[string]string{nethttp.HeaderLimit: "3"}, rateHeaders(t, w))
		require.Equal(t, []nethttp.Outcome{nethttp.OutcomeFailedOpen}, outcomes(events))
		assert.EqualError(t, events[0].Err, "boom")
	})
	t.Run("does not apply leaky-bucket delays", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lim, err := core.New(core.LeakyBucket(1, time.Second).WithBurst(5))
			require.NoError(t, err)
			defer lim.Close()
			h := wrap(t, lim, opts...)
			start := time.Now()
			for range 3 {
				assert.Equal(t, http.StatusOK, get(h, "").Code)
			}
			assert.Zero(t, time.Since(start))
		})
	})
}

func TestMiddlewareFailurePolicy(t *testing.T) {
	secret := errors.New("dial tcp 10.1.2.3:6379: connection refused (secret-detail)")
	broken := coretest.Failing{Err: secret, P: core.FixedWindow(10, time.Second)}

	t.Run("fails open by default, with the limit only", func(t *testing.T) {
		var events []nethttp.Event
		h := wrap(t, broken, recorder(&events))
		w := get(h, "")
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, "ok", w.Body.String())
		assert.Equal(t, map[string]string{nethttp.HeaderLimit: "10"}, rateHeaders(t, w))
		require.Len(t, events, 1)
		ev := events[0]
		assert.Equal(t, nethttp.OutcomeFailedOpen, ev.Outcome)
		assert.ErrorIs(t, ev.Err, secret)
		assert.Equal(t, "192.0.2.1", ev.Key)
		assert.Equal(t, int64(1), ev.Cost)
		assert.Equal(t, core.Decision{Limit: 10, Policy: broken.P}, ev.Decision)
	})
	t.Run("fails closed with 503, the limit only and no error text", func(t *testing.T) {
		var events []nethttp.Event
		h := wrap(t, broken, nethttp.WithFailClosed(), recorder(&events))
		w := get(h, "")
		assert.Equal(t, http.StatusServiceUnavailable, w.Code)
		assert.Equal(t, "Service Unavailable\n", w.Body.String())
		assert.NotContains(t, fmt.Sprint(w.Result().Header), "secret")
		assert.Equal(t, map[string]string{nethttp.HeaderLimit: "10"}, rateHeaders(t, w))
		require.Equal(t, []nethttp.Outcome{nethttp.OutcomeFailedClosed}, outcomes(events))
		assert.ErrorIs(t, events[0].Err, secret)
	})
	t.Run("fails closed with Retry-After when the error says when to retry", func(t *testing.T) {
		knows := coretest.Failing{P: broken.P, Err: retryError{1500 * time.Millisecond}}
		w := get(wrap(t, knows, nethttp.WithFailClosed()), "")
		assert.Equal(t, http.StatusServiceUnavailable, w.Code)
		assert.Equal(t, []string{"2"}, w.Result().Header.Values(nethttp.HeaderRetryAfter))
		assert.Empty(t, get(wrap(t, knows), "").Result().Header.Values(nethttp.HeaderRetryAfter), "failing open")
		unknown := coretest.Failing{P: broken.P, Err: retryError{0}}
		assert.Empty(t, get(wrap(t, unknown, nethttp.WithFailClosed()), "").Result().Header.Values(nethttp.HeaderRetryAfter))
	})
	t.Run("never serves unlimited through a closed limiter", func(t *testing.T) {
		lim, err := core.New(core.FixedWindow(10, time.Second))
		require.NoError(t, err)
		require.NoError(t, lim.Close())
		var events []nethttp.Event
		assert.Equal(t, http.StatusServiceUnavailable, get(wrap(t, lim, nethttp.WithFailClosed()), "").Code)
		assert.Equal(t, http.StatusServiceUnavailable, get(wrap(t, lim, recorder(&events)), "").Code, "failing open")
		require.Equal(t, []nethttp.Outcome{nethttp.OutcomeFailedClosed}, outcomes(events))
		assert.ErrorIs(t, events[0].Err, core.ErrClosed)
	})
}

func mustHeader(t testing.TB, name string) keyfunc.Func {
	t.Helper()
	return keyfunc.Header(name)
}

func TestMiddlewareKeyErrors(t *testing.T) {
	apiKey := mustHeader(t, "X-API-Key")
	newH := func(t *testing.T, opts ...nethttp.Option) http.Handler {
		return wrap(t, newLimiter(t, core.FixedWindow(2, time.Minute), newClock(t0)),
			append([]nethttp.Option{nethttp.WithKeyFunc(apiKey)}, opts...)...)
	}

	t.Run("rejects a request without a key with 400", func(t *testing.T) {
		var events []nethttp.Event
		h := newH(t, recorder(&events))
		w := get(h, "")
		assert.Equal(t, http.StatusBadRequest, w.Code)
		assert.Equal(t, "Bad Request: the request carries no rate-limit key\n", w.Body.String())
		assert.Empty(t, rateHeaders(t, w))
		require.Len(t, events, 1)
		assert.Equal(t, nethttp.OutcomeKeyError, events[0].Outcome)
		assert.ErrorIs(t, events[0].Err, keyfunc.ErrNoKey)
		assert.Empty(t, events[0].Key)
		assert.Zero(t, events[0].Cost)
		p := core.FixedWindow(2, time.Minute)
		assert.Equal(t, core.Decision{Limit: 2, Policy: p}, events[0].Decision, "the limit the request met, for metrics")
	})
	t.Run("limits each key separately", func(t *testing.T) {
		h := newH(t)
		for _, k := range []string{"a", "a", "b", "b"} {
			assert.Equal(t, http.StatusOK, get(h, "", "X-API-Key", k).Code)
		}
		assert.Equal(t, http.StatusTooManyRequests, get(h, "", "X-API-Key", "a").Code)
	})
	t.Run("falls back to another key function", func(t *testing.T) {
		h := newH(t, nethttp.WithKeyFallback(keyfunc.IP()))
		assert.Equal(t, http.StatusOK, get(h, "192.0.2.1:1").Code)
		assert.Equal(t, http.StatusOK, get(h, "192.0.2.1:2").Code)
		w := get(h, "192.0.2.1:3")
		assert.Equal(t, http.StatusTooManyRequests, w.Code, "the fallback key is the peer's IP")
		assert.Equal(t, http.StatusOK, get(h, "192.0.2.2:1").Code)
		assert.Equal(t, http.StatusOK, get(h, "192.0.2.1:1", "X-API-Key", "a").Code)
	})
	t.Run("rejects when the fallback fails too", func(t *testing.T) {
		h := newH(t, nethttp.WithKeyFallback(keyfunc.IP()))
		assert.Equal(t, http.StatusBadRequest, get(h, "not-an-address").Code)
	})
	t.Run("answers with a replaced key-error handler", func(t *testing.T) {
		h := newH(t, nethttp.WithKeyErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
			w.Header().Set("WWW-Authenticate", `ApiKey realm="api"`)
			http.Error(w, "API key required", http.StatusUnauthorized)
		}))
		w := get(h, "")
		assert.Equal(t, http.StatusUnauthorized, w.Code)
		assert.Equal(t, "API key required\n", w.Body.String())
	})
}

func TestMiddlewareDenyHandlers(t *testing.T) {
	t.Run("passes the decision to a replaced denial handler", func(t *testing.T) {
		var got core.Decision
		h := wrap(t, newLimiter(t, core.FixedWindow(1, time.Minute), newClock(t0)),
			nethttp.WithDenyHandler(func(w http.ResponseWriter, _ *http.Request, d core.Decision) {
				got = d
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
		get(h, "")
		w := get(h, "")
		assert.Equal(t, http.StatusServiceUnavailable, w.Code)
		assert.Equal(t, with(xHeaders("1", "0", "60"), "Retry-After", "60"), rateHeaders(t, w), "headers are set before")
		assert.False(t, got.Allowed)
		assert.Equal(t, time.Minute, got.RetryAfter)
	})
	t.Run("writes RFC 9457 problem details", func(t *testing.T) {
		clk := newClock(t0)
		h := wrap(t, newLimiter(t, core.FixedWindow(1, time.Minute).WithName("per-ip"), clk),
			nethttp.WithDenyHandler(nethttp.ProblemJSON))
		get(h, "")
		clk.Set(t0.Add(54 * time.Second))
		w := get(h, "")
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
		assert.Equal(t, "6", w.Header().Get("Retry-After"))
		assert.JSONEq(t, `{
			"type": "https://iana.org/assignments/http-problem-types#quota-exceeded",
			"title": "Request cannot be satisfied as assigned quota has been exceeded",
			"status": 429,
			"detail": "Retry later; see the Retry-After header.",
			"violated-policies": ["per-ip"]
		}`, w.Body.String())
	})
	t.Run("writes problem details for a cost above capacity", func(t *testing.T) {
		h := wrap(t, newLimiter(t, core.FixedWindow(1, time.Minute), newClock(t0)),
			nethttp.WithDenyHandler(nethttp.ProblemJSON),
			nethttp.WithCostFunc(func(*http.Request) (int64, error) { return 2, nil }))
		w := get(h, "")
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Empty(t, w.Header().Get("Retry-After"))
		assert.Contains(t, w.Body.String(), `"detail":"The request costs more than the policy ever admits; retrying cannot succeed."`)
		assert.Contains(t, w.Body.String(), `"violated-policies":["fixedwindow-1-per-60s"]`)
	})
}

func TestMiddlewareLeakyBucketDelay(t *testing.T) {
	// synctest's fake clock drives both the limiter (its default clock) and
	// the middleware's timer: the delays are exact and take no real time.
	t.Run("holds each request for its delay before serving it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lim, err := core.New(core.LeakyBucket(10, time.Second))
			require.NoError(t, err)
			defer lim.Close()
			start := time.Now()
			var served []time.Duration
			mw := nethttp.Middleware(lim)
			h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				served = append(served, time.Since(start))
			}))
			for range 3 {
				assert.Equal(t, http.StatusOK, get(h, "").Code)
			}
			assert.Equal(t, []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}, served)
		})
	})
	t.Run("answers 503 without serving when the request ends during the delay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lim, err := core.New(core.LeakyBucket(1, time.Second).WithBurst(3))
			require.NoError(t, err)
			defer lim.Close()
			served := 0
			mw := nethttp.Middleware(lim)
			h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
			assert.Equal(t, http.StatusOK, get(h, "").Code)

			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			w := send(h, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil), "")
			assert.Equal(t, 300*time.Millisecond, time.Since(start), "released when the context ended, not after 1s")
			assert.Equal(t, http.StatusServiceUnavailable, w.Code)
			assert.Equal(t, xHeaders("1", "1", "2"), rateHeaders(t, w))
			assert.Equal(t, 1, served)
		})
	})
}

func TestMiddlewareStacking(t *testing.T) {
	// Per-IP 5 per second outside, per-API-key quota per day inside, as
	// one would mount them on one route.
	stack := func(t *testing.T, clk *coretest.Clock, perKeyDay int64, style nethttp.HeaderStyle) http.Handler {
		perIP := nethttp.Middleware(
			newLimiter(t, core.FixedWindow(5, time.Second).WithName("per-ip"), clk),
			nethttp.WithHeaderStyle(style))
		perKey := nethttp.Middleware(
			newLimiter(t, core.FixedWindow(perKeyDay, 24*time.Hour).WithName("per-key"), clk),
			nethttp.WithKeyFunc(mustHeader(t, "X-API-Key")), nethttp.WithHeaderStyle(style))
		return perIP(perKey(ok))
	}
	day := time.Unix(1_699_920_000, 0) // a day boundary, also a second boundary

	t.Run("reports the per-IP limit while it is the tighter", func(t *testing.T) {
		h := stack(t, newClock(day), 1000, nethttp.HeadersBoth)
		w := get(h, "", "X-API-Key", "k")
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, with(xHeaders("5", "4", "1"),
			"RateLimit-Policy", `"per-ip";q=5;w=1, "per-key";q=1000;w=86400`,
			"RateLimit", `"per-ip";r=4;t=1, "per-key";r=999;t=86400`), rateHeaders(t, w))
	})
	t.Run("reports the per-key limit once it is the tighter", func(t *testing.T) {
		h := stack(t, newClock(day), 3, nethttp.HeadersBoth)
		w := get(h, "", "X-API-Key", "k")
		assert.Equal(t, with(xHeaders("3", "2", "86400"),
			"RateLimit-Policy", `"per-ip";q=5;w=1, "per-key";q=3;w=86400`,
			"RateLimit", `"per-ip";r=4;t=1, "per-key";r=2;t=86400`), rateHeaders(t, w))
	})
	t.Run("breaks a tie in Remaining by the later reset", func(t *testing.T) {
		h := stack(t, newClock(day), 5, nethttp.HeadersXRateLimit)
		w := get(h, "", "X-API-Key", "k")
		assert.Equal(t, xHeaders("5", "4", "86400"), rateHeaders(t, w))
	})
	t.Run("keeps the outer limit on a tie when its reset is later", func(t *testing.T) {
		clk := newClock(day)
		perKey := nethttp.Middleware(newLimiter(t, core.FixedWindow(5, 24*time.Hour), clk),
			nethttp.WithKeyFunc(mustHeader(t, "X-API-Key")))
		perIP := nethttp.Middleware(newLimiter(t, core.FixedWindow(5, time.Second), clk))
		w := get(perKey(perIP(ok)), "", "X-API-Key", "k")
		assert.Equal(t, xHeaders("5", "4", "86400"), rateHeaders(t, w))
	})
	t.Run("reports the inner denial with its Retry-After", func(t *testing.T) {
		clk := newClock(day)
		h := stack(t, clk, 2, nethttp.HeadersBoth)
		get(h, "", "X-API-Key", "k")
		get(h, "", "X-API-Key", "k")
		clk.Set(day.Add(2 * time.Second))
		w := get(h, "", "X-API-Key", "k")
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Equal(t, with(xHeaders("2", "0", "86398"), "Retry-After", "86398",
			"RateLimit-Policy", `"per-ip";q=5;w=1, "per-key";q=2;w=86400`,
			"RateLimit", `"per-ip";r=4;t=1, "per-key";r=0;t=86398`), rateHeaders(t, w))
	})
	t.Run("reports the outer denial alone", func(t *testing.T) {
		h := stack(t, newClock(day), 1000, nethttp.HeadersBoth)
		for range 5 {
			get(h, "", "X-API-Key", "k")
		}
		w := get(h, "", "X-API-Key", "k")
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Equal(t, with(xHeaders("5", "0", "1"), "Retry-After", "1",
			"RateLimit-Policy", `"per-ip";q=5;w=1`, "RateLimit", `"per-ip";r=0;t=1`), rateHeaders(t, w))
	})
}

func TestMiddlewareEchoesNothingFromTheClient(t *testing.T) {
	const marker = "zzmarkerzz"
	h := wrap(t, newLimiter(t, core.FixedWindow(1, time.Minute), newClock(t0)),
		nethttp.WithKeyFunc(mustHeader(t, "X-API-Key")), nethttp.WithHeaderStyle(nethttp.HeadersBoth),
		nethttp.WithCostFunc(func(r *http.Request) (int64, error) {
			if r.Header.Get("X-Cost") != "" {
				return 0, errors.New(r.Header.Get("X-Cost"))
			}
			return 1, nil
		}))
	client := []string{
		"X-API-Key", marker, "X-Forwarded-For", marker, "Forwarded", "for=" + marker,
		"X-RateLimit-Limit", marker, "RateLimit-Policy", marker, "Retry-After", marker,
	}
	for name, w := range map[string]*httptest.ResponseRecorder{
		"admitted": send(h, httptest.NewRequest(http.MethodGet, "/"+marker+"?"+marker, nil), "", client...),
		"denied":   send(h, httptest.NewRequest(http.MethodGet, "/"+marker+"?"+marker, nil), "", client...),
		"key error": send(h, httptest.NewRequest(http.MethodGet, "/"+marker, nil), "",
			"X-Forwarded-For", marker),
		"cost error": send(h, httptest.NewRequest(http.MethodGet, "/"+marker, nil), "",
			"X-API-Key", "other", "X-Cost", marker),
	} {
		t.Run("in the "+name+" response", func(t *testing.T) {
			assert.NotContains(t, fmt.Sprint(w.Result().Header), marker)
			if name != "admitted" {
				assert.NotContains(t, w.Body.String(), marker)
			}
		})
	}
}

func TestMiddlewareConstructorPanics(t *testing.T) {
	lim := newLimiter(t, core.FixedWindow(1, time.Minute), newClock(t0))
	for _, tc := range []struct {
		name  string
		build func()
		want  string
	}{
		{"a nil limiter", func() { nethttp.Middleware(nil) }, "nethttp: Middleware: nil limiter"},
		{"a nil limiter given to NewEngine", func() { nethttp.NewEngine(nil) }, "nethttp: NewEngine: nil limiter"},
		{"a typed nil limiter (a constructor's error ignored)", func() { var lim *core.MemoryLimiter; nethttp.Middleware(lim) }, "nethttp: Middleware: nil limiter (a nil *core.MemoryLimiter)"},
		{"a nil option", func() { nethttp.Middleware(lim, nil) }, "nethttp: Middleware: nil Option"},
		{"a nil key function", func() { nethttp.WithKeyFunc(nil) }, "nethttp: WithKeyFunc: nil function"},
		{"a nil fallback", func() { nethttp.WithKeyFallback(nil) }, "nethttp: WithKeyFallback: nil function"},
		{"a nil key-error handler", func() { nethttp.WithKeyErrorHandler(nil) }, "nethttp: WithKeyErrorHandler: nil function"},
		{"a nil cost function", func() { nethttp.WithCostFunc(nil) }, "nethttp: WithCostFunc: nil function"},
		{"a nil skip function", func() { nethttp.WithSkip(nil) }, "nethttp: WithSkip: nil function"},
		{"a nil hook", func() { nethttp.WithHook(nil) }, "nethttp: WithHook: nil function"},
		{"a nil policy function", func() { nethttp.WithPolicyFunc(nil) }, "nethttp: WithPolicyFunc: nil function"},
		{"a policy function on a limiter without per-call policies", func() {
			nethttp.Middleware(coretest.Failing{P: core.FixedWindow(1, time.Second)}, nethttp.WithPolicyFunc(plans))
		}, "nethttp: Middleware: WithPolicyFunc needs a core.PolicyLimiter, and coretest.Failing is not one"},
		{"a nil deny handler", func() { nethttp.WithDenyHandler(nil) }, "nethttp: WithDenyHandler: nil function"},
		{"an unknown header style", func() { nethttp.WithHeaderStyle(9) }, "nethttp: WithHeaderStyle: unknown header style HeaderStyle(9)"},
		{"a policy name that is not printable ASCII", func() {
			nethttp.Middleware(coretest.Failing{P: core.FixedWindow(1, time.Second).WithName("pér\n")})
		}, `nethttp: Middleware: policy name "pér\n" cannot be sent in a header: use printable ASCII only`},
	} {
		t.Run("panics at construction for "+tc.name, func(t *testing.T) {
			assert.PanicsWithError(t, tc.want, tc.build)
		})
	}
	t.Run("serves admitted requests with 404 when next is nil", func(t *testing.T) {
		mw := nethttp.Middleware(lim)
		assert.Equal(t, http.StatusNotFound, get(mw(nil), "").Code)
	})
}

func TestHeaderNamesAreCanonicalisedAsExpected(t *testing.T) {
	for name, canonical := range map[string]string{
		nethttp.HeaderLimit:           "X-Ratelimit-Limit",
		nethttp.HeaderRemaining:       "X-Ratelimit-Remaining",
		nethttp.HeaderReset:           "X-Ratelimit-Reset",
		nethttp.HeaderRetryAfter:      "Retry-After",
		nethttp.HeaderRateLimitPolicy: "Ratelimit-Policy",
		nethttp.HeaderRateLimit:       "Ratelimit",
	} {
		assert.Equal(t, canonical, http.CanonicalHeaderKey(name))
		h := http.Header{}
		nethttp.WriteHeaders(h, core.Decision{
			Limit: 1, RetryAfter: time.Second, Policy: core.FixedWindow(1, time.Second),
		}, nethttp.HeadersBoth, false)
		assert.NotEmpty(t, h.Get(name), "WriteHeaders sets %s under its canonical key", name)
	}
}

func TestWriteHeadersForAnotherPolicy(t *testing.T) {
	h := http.Header{}
	nethttp.WriteHeaders(h, core.Decision{
		Allowed: true, Limit: 7, Remaining: 3, ResetAfter: 1500 * time.Millisecond,
		Policy: core.TokenBucket(7, 2*time.Second),
	}, nethttp.HeadersBoth, false)
	assert.Equal(t, http.Header{
		"X-Ratelimit-Limit":     {"7"},
		"X-Ratelimit-Remaining": {"3"},
		"X-Ratelimit-Reset":     {"2"},
		"Ratelimit-Policy":      {`"tokenbucket-7-per-2s";q=7;w=2`},
		"Ratelimit":             {`"tokenbucket-7-per-2s";r=3;t=2`},
	}, h)
}

func TestMiddlewareLargeNumbers(t *testing.T) {
	// Beyond the renderer's table of small numbers: built per request.
	clk := newClock(time.Unix(1_699_999_200, 0)) // a 2-hour boundary
	h := wrap(t, newLimiter(t, core.FixedWindow(5000, 2*time.Hour).WithName("big"), clk),
		nethttp.WithHeaderStyle(nethttp.HeadersBoth),
		nethttp.WithCostFunc(func(*http.Request) (int64, error) { return 679, nil }))
	w := get(h, "")
	assert.Equal(t, with(xHeaders("5000", "4321", "7200"),
		"RateLimit-Policy", `"big";q=5000;w=7200`, "RateLimit", `"big";r=4321;t=7200`), rateHeaders(t, w))
}

func TestRejectionError(t *testing.T) {
	cause := errors.New("cause")
	assert.EqualError(t, &nethttp.Rejection{Status: 429}, "nethttp: rate limit exceeded")
	rej := &nethttp.Rejection{Status: 429, Err: cause}
	assert.EqualError(t, rej, "nethttp: rate limit exceeded: cause")
	assert.ErrorIs(t, rej, cause)
}

// TestMiddlewareOverLoopback drives a real server with concurrent clients:
// exactly the limit is admitted, whatever the interleaving.
func TestMiddlewareOverLoopback(t *testing.T) {
	const limit, clients, perClient = 100, 20, 10
	clk := newClock(t0)
	var admitted, denied, other int
	var mu sync.Mutex
	srv := httptest.NewServer(wrap(t, newLimiter(t, core.FixedWindow(limit, time.Minute), clk)))
	defer srv.Close()

	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for range perClient {
				resp, err := srv.Client().Get(srv.URL)
				if !assert.NoError(t, err) {
					return
				}
				_ = resp.Body.Close()
				mu.Lock()
				switch resp.StatusCode {
				case http.StatusOK:
					admitted++
				case http.StatusTooManyRequests:
					denied++
					assert.Equal(t, "60", resp.Header.Get("Retry-After"))
				default:
					other++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, limit, admitted)
	assert.Equal(t, clients*perClient-limit, denied)
	assert.Zero(t, other)
}

// The renderer writes every field of a denial (formerly ExampleWriteHeaders,
// when WriteHeaders was exported).
func TestRendererWritesEveryFieldOfADenial(t *testing.T) {
	h := http.Header{}
	nethttp.WriteHeaders(h, core.Decision{
		Allowed: false, Limit: 100, Remaining: 0,
		ResetAfter: 5200 * time.Millisecond, RetryAfter: 5200 * time.Millisecond,
		Policy: core.FixedWindow(100, time.Minute).WithName("per-ip"),
	}, nethttp.HeadersBoth, false)
	got := map[string]string{}
	for _, name := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After", "RateLimit-Policy", "RateLimit"} {
		got[name] = h.Get(name)
	}
	assert.Equal(t, map[string]string{
		"X-RateLimit-Limit":     "100",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     "6",
		"Retry-After":           "6",
		"RateLimit-Policy":      `"per-ip";q=100;w=60`,
		"RateLimit":             `"per-ip";r=0;t=6`,
	}, got)
}

// retryError is a store error that says when to retry, as the Redis
// store's do while its circuit breaker is open.
type retryError struct{ after time.Duration }

func (e retryError) Error() string             { return "store down" }
func (e retryError) RetryAfter() time.Duration { return e.after }

func TestEnginePassesRequest(t *testing.T) {
	lim := newLimiter(t, core.FixedWindow(10, time.Minute), newClock(t0))
	key := func(*http.Request) (string, error) { return "k", nil }
	for _, c := range []struct {
		name   string
		opts   []nethttp.Option
		passes bool
	}{
		{"no option", nil, false},
		{"options that get no request", []nethttp.Option{
			nethttp.WithFailClosed(), nethttp.WithDryRun(), nethttp.WithHeaderStyle(nethttp.HeadersIETF), nethttp.WithResetAsUnixTime(),
			// Respond's handlers: an adapter builds the copy for Respond anyway.
			nethttp.WithDenyHandler(nethttp.ProblemJSON),
			nethttp.WithKeyErrorHandler(func(http.ResponseWriter, *http.Request, error) {}),
		}, false},
		{"WithKeyFunc", []nethttp.Option{nethttp.WithKeyFunc(key)}, true},
		{"WithKeyFallback", []nethttp.Option{nethttp.WithKeyFallback(key)}, true},
		{"WithSkip", []nethttp.Option{nethttp.WithSkip(func(*http.Request) bool { return false })}, true},
		{"WithCostFunc", []nethttp.Option{nethttp.WithCostFunc(func(*http.Request) (int64, error) { return 1, nil })}, true},
		{"WithPolicyFunc", []nethttp.Option{nethttp.WithPolicyFunc(func(*http.Request, string) (core.Policy, error) { return lim.Policy(), nil })}, true},
		{"WithHook", []nethttp.Option{nethttp.WithHook(func(nethttp.Event) {})}, true},
	} {
		assert.Equal(t, c.passes, nethttp.NewEngine(lim, c.opts...).PassesRequest(), c.name)
	}
}
