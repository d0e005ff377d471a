package nethttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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
			if got := w.Code; got != http.StatusOK {
				t.Fatalf("request %d: got %v, want %v", i, got, http.StatusOK)
			}
			if got, want := rateHeaders(t, w), xHeaders("100", fmt.Sprint(100-i), "60"); !reflect.DeepEqual(got, want) {
				t.Fatalf("request %d: got %v, want %v", i, got, want)
			}
			if got := w.Body.String(); got != "ok" {
				t.Fatalf("body: got %q, want %q", got, "ok")
			}
		}
	})
	t.Run("denies the 101st request in a window with exact headers", func(t *testing.T) {
		clk.Set(t0.Add(54 * time.Second))
		w := get(h, "")
		wantStatus(t, w, http.StatusTooManyRequests)
		wantHeaders(t, w, with(xHeaders("100", "0", "6"), nethttp.HeaderRetryAfter, "6"))
		if got := w.Header().Get("Content-Type"); got != "text/plain; charset=utf-8" {
			t.Errorf("Content-Type: got %q, want %q", got, "text/plain; charset=utf-8")
		}
		if got := w.Body.String(); got != "Too Many Requests\n" {
			t.Errorf("body: got %q, want %q", got, "Too Many Requests\n")
		}
	})
	t.Run("rounds Retry-After and the reset up to whole seconds", func(t *testing.T) {
		clk.Set(t0.Add(54*time.Second + 500*time.Millisecond))
		w := get(h, "")
		wantStatus(t, w, http.StatusTooManyRequests)
		wantHeaders(t, w, with(xHeaders("100", "0", "6"), nethttp.HeaderRetryAfter, "6"))
	})
	t.Run("keeps Retry-After at 1 or more just before the reset", func(t *testing.T) {
		clk.Set(t0.Add(time.Minute - time.Millisecond))
		w := get(h, "")
		wantStatus(t, w, http.StatusTooManyRequests)
		wantHeaders(t, w, with(xHeaders("100", "0", "1"), nethttp.HeaderRetryAfter, "1"))
	})
	t.Run("counts another client separately", func(t *testing.T) {
		w := get(h, "198.51.100.7:999")
		wantStatus(t, w, http.StatusOK)
		wantHeaders(t, w, xHeaders("100", "99", "1"))
	})
	t.Run("admits again in the next window", func(t *testing.T) {
		clk.Set(t0.Add(time.Minute))
		w := get(h, "")
		wantStatus(t, w, http.StatusOK)
		wantHeaders(t, w, xHeaders("100", "99", "60"))
	})
}

func TestMiddlewareResetAsUnixTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// In the bubble time.Now is 2000-01-01T00:00:00Z and only moves
		// when every goroutine is blocked: exact Unix times.
		start := time.Now()
		lim, err := core.New(core.FixedWindow(3, 10*time.Second))
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		defer lim.Close()
		h := wrap(t, lim, nethttp.WithResetAsUnixTime())

		time.Sleep(2500 * time.Millisecond)
		w := get(h, "")
		wantHeaders(t, w, xHeaders("3", "2", fmt.Sprint(start.Unix()+10)))
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
				if got := get(h, "").Code; got != http.StatusOK {
					t.Fatalf("status: got %v, want %v", got, http.StatusOK)
				}
			}
			w := get(h, "")
			if got := w.Code; got != http.StatusOK {
				t.Fatalf("status: got %v, want %v", got, http.StatusOK)
			}
			wantHeaders(t, w, tc.allowed)
			clk.Set(t0.Add(54 * time.Second))
			w = get(h, "")
			if got := w.Code; got != http.StatusTooManyRequests {
				t.Fatalf("status: got %v, want %v", got, http.StatusTooManyRequests)
			}
			wantHeaders(t, w, tc.denied)
		})
	}
	t.Run("rounds a sub-second IETF window up to w=1", func(t *testing.T) {
		h := wrap(t, newLimiter(t, core.FixedWindow(5, 500*time.Millisecond).WithName("burst"), newClock(t0)),
			nethttp.WithHeaderStyle(nethttp.HeadersIETF))
		if got := get(h, "").Header().Get("RateLimit-Policy"); got != `"burst";q=5;w=1` {
			t.Errorf("RateLimit-Policy: got %q, want %q", got, `"burst";q=5;w=1`)
		}
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
			if got := w.Code; got != http.StatusOK {
				t.Fatalf("status: got %v, want %v", got, http.StatusOK)
			}
			if got := rateHeaders(t, w); len(got) != 0 {
				t.Errorf("headers: got %v, want empty", got)
			}
		}
		if got := hooks; got != 0 {
			t.Errorf("hooks: got %v, want zero", got)
		}
		d, err := lim.Peek(context.Background(), "192.0.2.1")
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		if got := d.Remaining; got != int64(1) {
			t.Errorf("d.Remaining: got %v, want %v", got, int64(1))
		}
	})
	t.Run("limits the other requests", func(t *testing.T) {
		if got := get(h, "").Code; got != http.StatusOK {
			t.Errorf("status: got %v, want %v", got, http.StatusOK)
		}
		if got := get(h, "").Code; got != http.StatusTooManyRequests {
			t.Errorf("status: got %v, want %v", got, http.StatusTooManyRequests)
		}
		if got := hooks; got != 2 {
			t.Errorf("hooks: got %v, want %v", got, 2)
		}
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
		wantStatus(t, w, http.StatusOK)
		wantHeaders(t, w, xHeaders("100", "90", "60"))
		w = get(h, "", "X-Cost", "91")
		wantStatus(t, w, http.StatusTooManyRequests)
		wantHeaders(t, w, with(xHeaders("100", "90", "60"), "Retry-After", "60"))
		if got := len(*events); got != 2 {
			t.Fatalf("len(*events): got %d, want %d", got, 2)
		}
		if got, want := []int64{(*events)[0].Cost, (*events)[1].Cost}, []int64{10, 91}; !reflect.DeepEqual(got, want) {
			t.Errorf("costs: got %v, want %v", got, want)
		}
		if got, want := outcomes(*events), ([]nethttp.Outcome{nethttp.OutcomeAllowed, nethttp.OutcomeDenied}); !reflect.DeepEqual(got, want) {
			t.Errorf("outcomes: got %v, want %v", got, want)
		}
		if err := (*events)[1].Err; err != nil {
			t.Errorf("a denial is not an error: %v", err)
		}
	})
	t.Run("denies a cost above capacity without Retry-After", func(t *testing.T) {
		h, events := setup(t)
		w := get(h, "", "X-Cost", "101")
		wantStatus(t, w, http.StatusTooManyRequests)
		wantHeaders(t, w, map[string]string{nethttp.HeaderLimit: "100"}) // nothing of the key's state
		if got := w.Body.String(); got != "Too Many Requests: the request costs more than the rate limit ever admits\n" {
			t.Errorf("body: got %q, want %q", got, "Too Many Requests: the request costs more than the rate limit ever admits\n")
		}
		if got := len(*events); got != 1 {
			t.Fatalf("len(*events): got %d, want %d", got, 1)
		}
		ev := (*events)[0]
		if got := ev.Outcome; got != nethttp.OutcomeDenied {
			t.Errorf("ev.Outcome: got %v, want %v", got, nethttp.OutcomeDenied)
		}
		if got := ev.Cost; got != int64(101) {
			t.Errorf("ev.Cost: got %v, want %v", got, int64(101))
		}
		if ev.Decision.Allowed {
			t.Errorf("ev.Decision.Allowed: got true, want false")
		}
		if got := ev.Decision.RetryAfter; got != 0 {
			t.Errorf("ev.Decision.RetryAfter: got %v, want zero", got)
		}
		if err := ev.Err; !errors.Is(err, core.ErrCostExceedsCapacity) {
			t.Errorf("ev.Err: got %v, want %v", err, core.ErrCostExceedsCapacity)
		}
	})
	t.Run("answers 500 when the cost function fails", func(t *testing.T) {
		h, events := setup(t)
		w := get(h, "", "X-Cost", "<script>")
		wantStatus(t, w, http.StatusInternalServerError)
		if got := w.Body.String(); got != "Internal Server Error\n" {
			t.Errorf("body: got %q, want %q", got, "Internal Server Error\n")
		}
		if got := rateHeaders(t, w); len(got) != 0 {
			t.Errorf("headers: got %v, want empty", got)
		}
		if got := len(*events); got != 1 {
			t.Fatalf("len(*events): got %d, want %d", got, 1)
		}
		ev := (*events)[0]
		if got := ev.Outcome; got != nethttp.OutcomeCostError {
			t.Errorf("ev.Outcome: got %v, want %v", got, nethttp.OutcomeCostError)
		}
		if got := ev.Key; got != "192.0.2.1" {
			t.Errorf("ev.Key: got %q, want %q", got, "192.0.2.1")
		}
		if got := ev.Cost; got != 0 {
			t.Errorf("ev.Cost: got %v, want zero", got)
		}
		if got := ev.Latency; got != 0 {
			t.Errorf("the limiter was not called: got %v, want zero", got)
		}
		p := core.FixedWindow(100, time.Minute)
		if got, want := ev.Decision, (core.Decision{Limit: 100, Policy: p}); got != want {
			t.Errorf("the limit the request met, for metrics: got %v, want %v", got, want)
		}
		if err := ev.Err; err == nil || err.Error() != "cost function: expected integer" {
			t.Errorf("ev.Err: got %v, want %q", err, "cost function: expected integer")
		}
	})
	t.Run("answers 500 for a cost of zero, a server bug", func(t *testing.T) {
		h, events := setup(t)
		w := get(h, "", "X-Cost", "0")
		wantStatus(t, w, http.StatusInternalServerError)
		if got := len(*events); got != 1 {
			t.Fatalf("len(*events): got %d, want %d", got, 1)
		}
		if got := (*events)[0].Outcome; got != nethttp.OutcomeCostError {
			t.Errorf("(*events)[0].Outcome: got %v, want %v", got, nethttp.OutcomeCostError)
		}
		if err := (*events)[0].Err; !errors.Is(err, core.ErrInvalidCost) {
			t.Errorf("(*events)[0].Err: got %v, want %v", err, core.ErrInvalidCost)
		}
		if err := (*events)[0].Err; err == nil || err.Error() != "cost function returned 0: core: cost must be > 0" {
			t.Errorf("(*events)[0].Err: got %v, want %q", err, "cost function returned 0: core: cost must be > 0")
		}
	})
}

func TestMiddlewareDryRun(t *testing.T) {
	var events []nethttp.Event
	opts := []nethttp.Option{nethttp.WithDryRun(), recorder(&events)}
	t.Run("serves a request the limit would deny, with headers but no Retry-After", func(t *testing.T) {
		events = nil
		h := wrap(t, newLimiter(t, core.FixedWindow(1, time.Minute), newClock(t0)), opts...)
		if got := get(h, "").Code; got != http.StatusOK {
			t.Errorf("status: got %v, want %v", got, http.StatusOK)
		}
		w := get(h, "")
		wantStatus(t, w, http.StatusOK)
		if got := w.Body.String(); got != "ok" {
			t.Errorf("body: got %q, want %q", got, "ok")
		}
		wantHeaders(t, w, xHeaders("1", "0", "60"))
		if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeAllowed, nethttp.OutcomeDryRun}); !reflect.DeepEqual(got, want) {
			t.Errorf("outcomes: got %v, want %v", got, want)
		}
		if !events[0].Decision.Allowed {
			t.Errorf("events[0].Decision.Allowed: got false, want true")
		}
		if events[1].Decision.Allowed {
			t.Errorf("events[1].Decision.Allowed: got true, want false")
		}
		if got := events[1].Decision.RetryAfter; got != time.Minute {
			t.Errorf("events[1].Decision.RetryAfter: got %v, want %v", got, time.Minute)
		}
	})
	t.Run("serves a request without a key, reporting the error", func(t *testing.T) {
		events = nil
		h := wrap(t, newLimiter(t, core.FixedWindow(1, time.Minute), newClock(t0)),
			append(opts, nethttp.WithKeyFunc(mustHeader(t, "X-API-Key")))...)
		if got := get(h, "").Code; got != http.StatusOK {
			t.Errorf("status: got %v, want %v", got, http.StatusOK)
		}
		if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeKeyError}); !reflect.DeepEqual(got, want) {
			t.Fatalf("outcomes(events): got %v, want %v", got, want)
		}
		if err := events[0].Err; !errors.Is(err, keyfunc.ErrNoKey) {
			t.Errorf("events[0].Err: got %v, want %v", err, keyfunc.ErrNoKey)
		}
		if got := events[0].Key; got != "" {
			t.Errorf("events[0].Key: got %q, want empty", got)
		}
	})
	t.Run("serves requests when the limiter fails, even fail-closed", func(t *testing.T) {
		events = nil
		h := wrap(t, coretest.Failing{Err: errors.New("boom"), P: core.FixedWindow(3, time.Second)},
			append(opts, nethttp.WithFailClosed())...)
		w := get(h, "")
		wantStatus(t, w, http.StatusOK)
		wantHeaders(t, w, map[string]string{nethttp.HeaderLimit: "3"})
		if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeFailedOpen}); !reflect.DeepEqual(got, want) {
			t.Fatalf("outcomes(events): got %v, want %v", got, want)
		}
		if err := events[0].Err; err == nil || err.Error() != "boom" {
			t.Errorf("events[0].Err: got %v, want %q", err, "boom")
		}
	})
	t.Run("does not apply leaky-bucket delays", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lim, err := core.New(core.LeakyBucket(1, time.Second).WithBurst(5))
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			defer lim.Close()
			h := wrap(t, lim, opts...)
			start := time.Now()
			for range 3 {
				if got := get(h, "").Code; got != http.StatusOK {
					t.Errorf("status: got %v, want %v", got, http.StatusOK)
				}
			}
			if got := time.Since(start); got != 0 {
				t.Errorf("time.Since(start): got %v, want zero", got)
			}
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
		wantStatus(t, w, http.StatusOK)
		if got := w.Body.String(); got != "ok" {
			t.Errorf("body: got %q, want %q", got, "ok")
		}
		wantHeaders(t, w, map[string]string{nethttp.HeaderLimit: "10"})
		if got := len(events); got != 1 {
			t.Fatalf("len(events): got %d, want %d", got, 1)
		}
		ev := events[0]
		if got := ev.Outcome; got != nethttp.OutcomeFailedOpen {
			t.Errorf("ev.Outcome: got %v, want %v", got, nethttp.OutcomeFailedOpen)
		}
		if err := ev.Err; !errors.Is(err, secret) {
			t.Errorf("ev.Err: got %v, want %v", err, secret)
		}
		if got := ev.Key; got != "192.0.2.1" {
			t.Errorf("ev.Key: got %q, want %q", got, "192.0.2.1")
		}
		if got := ev.Cost; got != int64(1) {
			t.Errorf("ev.Cost: got %v, want %v", got, int64(1))
		}
		if got, want := ev.Decision, (core.Decision{Limit: 10, Policy: broken.P}); got != want {
			t.Errorf("ev.Decision: got %v, want %v", got, want)
		}
	})
	t.Run("fails closed with 503, the limit only and no error text", func(t *testing.T) {
		var events []nethttp.Event
		h := wrap(t, broken, nethttp.WithFailClosed(), recorder(&events))
		w := get(h, "")
		wantStatus(t, w, http.StatusServiceUnavailable)
		if got := w.Body.String(); got != "Service Unavailable\n" {
			t.Errorf("body: got %q, want %q", got, "Service Unavailable\n")
		}
		if got := fmt.Sprint(w.Result().Header); strings.Contains(got, "secret") {
			t.Errorf("headers: got %q, want none to contain %q", got, "secret")
		}
		wantHeaders(t, w, map[string]string{nethttp.HeaderLimit: "10"})
		if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeFailedClosed}); !reflect.DeepEqual(got, want) {
			t.Fatalf("outcomes(events): got %v, want %v", got, want)
		}
		if err := events[0].Err; !errors.Is(err, secret) {
			t.Errorf("events[0].Err: got %v, want %v", err, secret)
		}
	})
	t.Run("fails closed with Retry-After when the error says when to retry", func(t *testing.T) {
		knows := coretest.Failing{P: broken.P, Err: retryError{1500 * time.Millisecond}}
		w := get(wrap(t, knows, nethttp.WithFailClosed()), "")
		wantStatus(t, w, http.StatusServiceUnavailable)
		if got, want := w.Result().Header.Values(nethttp.HeaderRetryAfter), ([]string{"2"}); !reflect.DeepEqual(got, want) {
			t.Errorf("Retry-After: got %v, want %v", got, want)
		}
		if got := get(wrap(t, knows), "").Result().Header.Values(nethttp.HeaderRetryAfter); len(got) != 0 {
			t.Errorf("failing open: got %v, want empty", got)
		}
		unknown := coretest.Failing{P: broken.P, Err: retryError{0}}
		if got := get(wrap(t, unknown, nethttp.WithFailClosed()), "").Result().Header.Values(nethttp.HeaderRetryAfter); len(got) != 0 {
			t.Errorf("failing closed with no retry time: got Retry-After %v, want none", got)
		}
	})
	t.Run("never serves unlimited through a closed limiter", func(t *testing.T) {
		lim, err := core.New(core.FixedWindow(10, time.Second))
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		if err := lim.Close(); err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		var events []nethttp.Event
		if got := get(wrap(t, lim, nethttp.WithFailClosed()), "").Code; got != http.StatusServiceUnavailable {
			t.Errorf("status: got %v, want %v", got, http.StatusServiceUnavailable)
		}
		if got := get(wrap(t, lim, recorder(&events)), "").Code; got != http.StatusServiceUnavailable {
			t.Errorf("failing open: got %v, want %v", got, http.StatusServiceUnavailable)
		}
		if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeFailedClosed}); !reflect.DeepEqual(got, want) {
			t.Fatalf("outcomes(events): got %v, want %v", got, want)
		}
		if err := events[0].Err; !errors.Is(err, core.ErrClosed) {
			t.Errorf("events[0].Err: got %v, want %v", err, core.ErrClosed)
		}
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
		wantStatus(t, w, http.StatusBadRequest)
		if got := w.Body.String(); got != "Bad Request: the request carries no rate-limit key\n" {
			t.Errorf("body: got %q, want %q", got, "Bad Request: the request carries no rate-limit key\n")
		}
		if got := rateHeaders(t, w); len(got) != 0 {
			t.Errorf("headers: got %v, want empty", got)
		}
		if got := len(events); got != 1 {
			t.Fatalf("len(events): got %d, want %d", got, 1)
		}
		if got := events[0].Outcome; got != nethttp.OutcomeKeyError {
			t.Errorf("events[0].Outcome: got %v, want %v", got, nethttp.OutcomeKeyError)
		}
		if err := events[0].Err; !errors.Is(err, keyfunc.ErrNoKey) {
			t.Errorf("events[0].Err: got %v, want %v", err, keyfunc.ErrNoKey)
		}
		if got := events[0].Key; got != "" {
			t.Errorf("events[0].Key: got %q, want empty", got)
		}
		if got := events[0].Cost; got != 0 {
			t.Errorf("events[0].Cost: got %v, want zero", got)
		}
		p := core.FixedWindow(2, time.Minute)
		if got, want := events[0].Decision, (core.Decision{Limit: 2, Policy: p}); got != want {
			t.Errorf("the limit the request met, for metrics: got %v, want %v", got, want)
		}
	})
	t.Run("limits each key separately", func(t *testing.T) {
		h := newH(t)
		for _, k := range []string{"a", "a", "b", "b"} {
			if got := get(h, "", "X-API-Key", k).Code; got != http.StatusOK {
				t.Errorf("status: got %v, want %v", got, http.StatusOK)
			}
		}
		if got := get(h, "", "X-API-Key", "a").Code; got != http.StatusTooManyRequests {
			t.Errorf("status: got %v, want %v", got, http.StatusTooManyRequests)
		}
	})
	t.Run("falls back to another key function", func(t *testing.T) {
		h := newH(t, nethttp.WithKeyFallback(keyfunc.IP()))
		if got := get(h, "192.0.2.1:1").Code; got != http.StatusOK {
			t.Errorf("status: got %v, want %v", got, http.StatusOK)
		}
		if got := get(h, "192.0.2.1:2").Code; got != http.StatusOK {
			t.Errorf("status: got %v, want %v", got, http.StatusOK)
		}
		w := get(h, "192.0.2.1:3")
		if got := w.Code; got != http.StatusTooManyRequests {
			t.Errorf("the fallback key is the peer's IP: got %v, want %v", got, http.StatusTooManyRequests)
		}
		if got := get(h, "192.0.2.2:1").Code; got != http.StatusOK {
			t.Errorf("status: got %v, want %v", got, http.StatusOK)
		}
		if got := get(h, "192.0.2.1:1", "X-API-Key", "a").Code; got != http.StatusOK {
			t.Errorf("status: got %v, want %v", got, http.StatusOK)
		}
	})
	t.Run("rejects when the fallback fails too", func(t *testing.T) {
		h := newH(t, nethttp.WithKeyFallback(keyfunc.IP()))
		if got := get(h, "not-an-address").Code; got != http.StatusBadRequest {
			t.Errorf("status: got %v, want %v", got, http.StatusBadRequest)
		}
	})
	t.Run("answers with a replaced key-error handler", func(t *testing.T) {
		h := newH(t, nethttp.WithKeyErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
			w.Header().Set("WWW-Authenticate", `ApiKey realm="api"`)
			http.Error(w, "API key required", http.StatusUnauthorized)
		}))
		w := get(h, "")
		wantStatus(t, w, http.StatusUnauthorized)
		if got := w.Body.String(); got != "API key required\n" {
			t.Errorf("body: got %q, want %q", got, "API key required\n")
		}
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
		wantStatus(t, w, http.StatusServiceUnavailable)
		if got, want := rateHeaders(t, w), with(xHeaders("1", "0", "60"), "Retry-After", "60"); !reflect.DeepEqual(got, want) {
			t.Errorf("headers are set before: got %v, want %v", got, want)
		}
		if got.Allowed {
			t.Errorf("got.Allowed: got true, want false")
		}
		if got := got.RetryAfter; got != time.Minute {
			t.Errorf("got.RetryAfter: got %v, want %v", got, time.Minute)
		}
	})
	t.Run("writes RFC 9457 problem details", func(t *testing.T) {
		clk := newClock(t0)
		h := wrap(t, newLimiter(t, core.FixedWindow(1, time.Minute).WithName("per-ip"), clk),
			nethttp.WithDenyHandler(nethttp.ProblemJSON))
		get(h, "")
		clk.Set(t0.Add(54 * time.Second))
		w := get(h, "")
		wantStatus(t, w, http.StatusTooManyRequests)
		if got := w.Header().Get("Content-Type"); got != "application/problem+json" {
			t.Errorf("Content-Type: got %q, want %q", got, "application/problem+json")
		}
		if got := w.Header().Get("Retry-After"); got != "6" {
			t.Errorf("Retry-After: got %q, want %q", got, "6")
		}
		var got, want any
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatalf("body %q: %v", w.Body, err)
		}
		_ = json.Unmarshal([]byte(`{
			"type": "https://iana.org/assignments/http-problem-types#quota-exceeded",
			"title": "Request cannot be satisfied as assigned quota has been exceeded",
			"status": 429,
			"detail": "Retry later; see the Retry-After header.",
			"violated-policies": ["per-ip"]
		}`), &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("body: got %v, want %v", got, want)
		}
	})
	t.Run("writes problem details for a cost above capacity", func(t *testing.T) {
		h := wrap(t, newLimiter(t, core.FixedWindow(1, time.Minute), newClock(t0)),
			nethttp.WithDenyHandler(nethttp.ProblemJSON),
			nethttp.WithCostFunc(func(*http.Request) (int64, error) { return 2, nil }))
		w := get(h, "")
		wantStatus(t, w, http.StatusTooManyRequests)
		if got := w.Header().Get("Retry-After"); got != "" {
			t.Errorf("Retry-After: got %q, want empty", got)
		}
		if got := w.Body.String(); !strings.Contains(got, `"detail":"The request costs more than the policy ever admits; retrying cannot succeed."`) {
			t.Errorf("body: got %q, want it to contain %q", got, `"detail":"The request costs more than the policy ever admits; retrying cannot succeed."`)
		}
		if got := w.Body.String(); !strings.Contains(got, `"violated-policies":["fixedwindow-1-per-60s"]`) {
			t.Errorf("body: got %q, want it to contain %q", got, `"violated-policies":["fixedwindow-1-per-60s"]`)
		}
	})
}

func TestMiddlewareLeakyBucketDelay(t *testing.T) {
	// synctest's fake clock drives both the limiter (its default clock) and
	// the middleware's timer: the delays are exact and take no real time.
	t.Run("holds each request for its delay before serving it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lim, err := core.New(core.LeakyBucket(10, time.Second))
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			defer lim.Close()
			start := time.Now()
			var served []time.Duration
			mw := nethttp.Middleware(lim)
			h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				served = append(served, time.Since(start))
			}))
			for range 3 {
				if got := get(h, "").Code; got != http.StatusOK {
					t.Errorf("status: got %v, want %v", got, http.StatusOK)
				}
			}
			if got, want := served, ([]time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}); !reflect.DeepEqual(got, want) {
				t.Errorf("served: got %v, want %v", got, want)
			}
		})
	})
	t.Run("answers 503 without serving when the request ends during the delay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lim, err := core.New(core.LeakyBucket(1, time.Second).WithBurst(3))
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			defer lim.Close()
			served := 0
			mw := nethttp.Middleware(lim)
			h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
			if got := get(h, "").Code; got != http.StatusOK {
				t.Errorf("status: got %v, want %v", got, http.StatusOK)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			w := send(h, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil), "")
			if got := time.Since(start); got != 300*time.Millisecond {
				t.Errorf("released when the context ended, not after 1s: got %v, want %v", got, 300*time.Millisecond)
			}
			wantStatus(t, w, http.StatusServiceUnavailable)
			wantHeaders(t, w, xHeaders("1", "1", "2"))
			if got := served; got != 1 {
				t.Errorf("served: got %v, want %v", got, 1)
			}
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
		wantStatus(t, w, http.StatusOK)
		wantHeaders(t, w, with(xHeaders("5", "4", "1"),
			"RateLimit-Policy", `"per-ip";q=5;w=1, "per-key";q=1000;w=86400`,
			"RateLimit", `"per-ip";r=4;t=1, "per-key";r=999;t=86400`))
	})
	t.Run("reports the per-key limit once it is the tighter", func(t *testing.T) {
		h := stack(t, newClock(day), 3, nethttp.HeadersBoth)
		w := get(h, "", "X-API-Key", "k")
		wantHeaders(t, w, with(xHeaders("3", "2", "86400"),
			"RateLimit-Policy", `"per-ip";q=5;w=1, "per-key";q=3;w=86400`,
			"RateLimit", `"per-ip";r=4;t=1, "per-key";r=2;t=86400`))
	})
	t.Run("breaks a tie in Remaining by the later reset", func(t *testing.T) {
		h := stack(t, newClock(day), 5, nethttp.HeadersXRateLimit)
		w := get(h, "", "X-API-Key", "k")
		wantHeaders(t, w, xHeaders("5", "4", "86400"))
	})
	t.Run("keeps the outer limit on a tie when its reset is later", func(t *testing.T) {
		clk := newClock(day)
		perKey := nethttp.Middleware(newLimiter(t, core.FixedWindow(5, 24*time.Hour), clk),
			nethttp.WithKeyFunc(mustHeader(t, "X-API-Key")))
		perIP := nethttp.Middleware(newLimiter(t, core.FixedWindow(5, time.Second), clk))
		w := get(perKey(perIP(ok)), "", "X-API-Key", "k")
		wantHeaders(t, w, xHeaders("5", "4", "86400"))
	})
	t.Run("reports the inner denial with its Retry-After", func(t *testing.T) {
		clk := newClock(day)
		h := stack(t, clk, 2, nethttp.HeadersBoth)
		get(h, "", "X-API-Key", "k")
		get(h, "", "X-API-Key", "k")
		clk.Set(day.Add(2 * time.Second))
		w := get(h, "", "X-API-Key", "k")
		wantStatus(t, w, http.StatusTooManyRequests)
		wantHeaders(t, w, with(xHeaders("2", "0", "86398"), "Retry-After", "86398",
			"RateLimit-Policy", `"per-ip";q=5;w=1, "per-key";q=2;w=86400`,
			"RateLimit", `"per-ip";r=4;t=1, "per-key";r=0;t=86398`))
	})
	t.Run("reports the outer denial alone", func(t *testing.T) {
		h := stack(t, newClock(day), 1000, nethttp.HeadersBoth)
		for range 5 {
			get(h, "", "X-API-Key", "k")
		}
		w := get(h, "", "X-API-Key", "k")
		wantStatus(t, w, http.StatusTooManyRequests)
		wantHeaders(t, w, with(xHeaders("5", "0", "1"), "Retry-After", "1",
			"RateLimit-Policy", `"per-ip";q=5;w=1`, "RateLimit", `"per-ip";r=0;t=1`))
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
			if got := fmt.Sprint(w.Result().Header); strings.Contains(got, marker) {
				t.Errorf("headers: got %q, want none to contain %q", got, marker)
			}
			if name != "admitted" {
				if got := w.Body.String(); strings.Contains(got, marker) {
					t.Errorf("body: got %q, want it not to contain %q", got, marker)
				}
			}
		})
	}
}

// panicMessage returns the message of the error f panics with, or "" if f
// returns.
func panicMessage(f func()) (msg string) {
	defer func() {
		if err, ok := recover().(error); ok {
			msg = err.Error()
		}
	}()
	f()
	return ""
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
			if got := panicMessage(tc.build); got != tc.want {
				t.Errorf("panic: got %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("serves admitted requests with 404 when next is nil", func(t *testing.T) {
		mw := nethttp.Middleware(lim)
		if got := get(mw(nil), "").Code; got != http.StatusNotFound {
			t.Errorf("status: got %v, want %v", got, http.StatusNotFound)
		}
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
		if got := http.CanonicalHeaderKey(name); got != canonical {
			t.Errorf("http.CanonicalHeaderKey(name): got %q, want %q", got, canonical)
		}
		h := http.Header{}
		nethttp.WriteHeaders(h, core.Decision{
			Limit: 1, RetryAfter: time.Second, Policy: core.FixedWindow(1, time.Second),
		}, nethttp.HeadersBoth, false)
		if got := h.Get(name); !(got != "") {
			t.Errorf("WriteHeaders sets %s under its canonical key: got %q, want non-empty", name, got)
		}
	}
}

func TestWriteHeadersForAnotherPolicy(t *testing.T) {
	h := http.Header{}
	nethttp.WriteHeaders(h, core.Decision{
		Allowed: true, Limit: 7, Remaining: 3, ResetAfter: 1500 * time.Millisecond,
		Policy: core.TokenBucket(7, 2*time.Second),
	}, nethttp.HeadersBoth, false)
	if got, want := h, (http.Header{
		"X-Ratelimit-Limit":     {"7"},
		"X-Ratelimit-Remaining": {"3"},
		"X-Ratelimit-Reset":     {"2"},
		"Ratelimit-Policy":      {`"tokenbucket-7-per-2s";q=7;w=2`},
		"Ratelimit":             {`"tokenbucket-7-per-2s";r=3;t=2`},
	}); !reflect.DeepEqual(got, want) {
		t.Errorf("h: got %v, want %v", got, want)
	}
}

func TestMiddlewareLargeNumbers(t *testing.T) {
	// Numbers of four digits and more.
	clk := newClock(time.Unix(1_699_999_200, 0)) // a 2-hour boundary
	h := wrap(t, newLimiter(t, core.FixedWindow(5000, 2*time.Hour).WithName("big"), clk),
		nethttp.WithHeaderStyle(nethttp.HeadersBoth),
		nethttp.WithCostFunc(func(*http.Request) (int64, error) { return 679, nil }))
	w := get(h, "")
	wantHeaders(t, w, with(xHeaders("5000", "4321", "7200"),
		"RateLimit-Policy", `"big";q=5000;w=7200`, "RateLimit", `"big";r=4321;t=7200`))
}

func TestRejectionError(t *testing.T) {
	cause := errors.New("cause")
	if got, want := (&nethttp.Rejection{Outcome: nethttp.OutcomeDenied, Status: 429}).Error(), "nethttp: rate limit exceeded"; got != want {
		t.Errorf("Error(): got %q, want %q", got, want)
	}
	rej := &nethttp.Rejection{Outcome: nethttp.OutcomeDenied, Status: 429, Err: cause}
	if rej == nil || rej.Error() != "nethttp: rate limit exceeded: cause" {
		t.Errorf("rej: got %v, want %q", rej, "nethttp: rate limit exceeded: cause")
	}
	if !errors.Is(rej, cause) {
		t.Errorf("rej: got %v, want %v", rej, cause)
	}
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
				if err != nil {
					t.Error(err)
					return
				}
				_ = resp.Body.Close()
				mu.Lock()
				switch resp.StatusCode {
				case http.StatusOK:
					admitted++
				case http.StatusTooManyRequests:
					denied++
					if got := resp.Header.Get("Retry-After"); got != "60" {
						t.Errorf("Retry-After: got %q, want %q", got, "60")
					}
				default:
					other++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if got := admitted; got != limit {
		t.Errorf("admitted: got %v, want %v", got, limit)
	}
	if got := denied; got != clients*perClient-limit {
		t.Errorf("denied: got %v, want %v", got, clients*perClient-limit)
	}
	if got := other; got != 0 {
		t.Errorf("other: got %v, want zero", got)
	}
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
	if want := (map[string]string{
		"X-RateLimit-Limit":     "100",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     "6",
		"Retry-After":           "6",
		"RateLimit-Policy":      `"per-ip";q=100;w=60`,
		"RateLimit":             `"per-ip";r=0;t=6`,
	}); !reflect.DeepEqual(got, want) {
		t.Errorf("headers: got %v, want %v", got, want)
	}
}

// retryError is a store error that says when to retry, as the Redis
// store's do while its circuit breaker is open.
type retryError struct{ after time.Duration }

func (e retryError) Error() string             { return "store down" }
func (e retryError) RetryAfter() time.Duration { return e.after }

// TestEngineView: Check calls an adapter's view only when a function of the
// options or a handler of Respond is to see the request, at most once, and
// those functions and handlers get the view, never the request as it came.
func TestEngineView(t *testing.T) {
	type seen struct{ views, calls int } // views made; calls of functions, each given the view
	for _, c := range []struct {
		name string
		opts func(saw func(*http.Request)) []nethttp.Option
		// what Check does with the first request (admitted, but for a
		// key error) and the second (denied)
		first, second seen
	}{
		{"no option", func(func(*http.Request)) []nethttp.Option { return nil }, seen{0, 0}, seen{1, 1}},
		{"options that get no request", func(func(*http.Request)) []nethttp.Option {
			return []nethttp.Option{nethttp.WithHeaderStyle(nethttp.HeadersIETF), nethttp.WithResetAsUnixTime(), nethttp.WithFailClosed()}
		}, seen{0, 0}, seen{1, 1}},
		{"WithKeyFunc", func(saw func(*http.Request)) []nethttp.Option {
			return []nethttp.Option{nethttp.WithKeyFunc(func(r *http.Request) (string, error) { saw(r); return "k", nil })}
		}, seen{1, 1}, seen{1, 2}},
		{"WithKeyFallback, not needed", func(saw func(*http.Request)) []nethttp.Option {
			return []nethttp.Option{nethttp.WithKeyFallback(func(r *http.Request) (string, error) { saw(r); return "k", nil })}
		}, seen{1, 0}, seen{1, 1}},
		{"WithSkip", func(saw func(*http.Request)) []nethttp.Option {
			return []nethttp.Option{nethttp.WithSkip(func(r *http.Request) bool { saw(r); return false })}
		}, seen{1, 1}, seen{1, 2}},
		{"WithCostFunc", func(saw func(*http.Request)) []nethttp.Option {
			return []nethttp.Option{nethttp.WithCostFunc(func(r *http.Request) (int64, error) { saw(r); return 1, nil })}
		}, seen{1, 1}, seen{1, 2}},
		{"WithPolicyFunc", func(saw func(*http.Request)) []nethttp.Option {
			return []nethttp.Option{nethttp.WithPolicyFunc(func(r *http.Request, _ string) (core.Policy, error) {
				saw(r)
				return core.FixedWindow(1, time.Minute), nil
			})}
		}, seen{1, 1}, seen{1, 2}},
		{"WithHook", func(saw func(*http.Request)) []nethttp.Option {
			return []nethttp.Option{nethttp.WithHook(func(ev nethttp.Event) { saw(ev.Request) })}
		}, seen{1, 1}, seen{1, 2}},
		{"a key error", func(saw func(*http.Request)) []nethttp.Option {
			return []nethttp.Option{
				nethttp.WithKeyFunc(func(r *http.Request) (string, error) { saw(r); return "", keyfunc.ErrNoKey }),
				nethttp.WithKeyErrorHandler(func(w http.ResponseWriter, r *http.Request, _ error) { saw(r) }),
			}
		}, seen{1, 2}, seen{1, 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got seen
			view := httptest.NewRequest(http.MethodGet, "/view", nil)
			view.RemoteAddr = "192.0.2.1:1234"
			saw := func(r *http.Request) {
				if r != view {
					t.Errorf("a function got the request for %v, not the view", r.URL)
				}
				got.calls++
			}
			deny := nethttp.WithDenyHandler(func(w http.ResponseWriter, r *http.Request, _ core.Decision) {
				saw(r)
				w.WriteHeader(http.StatusTooManyRequests)
			})
			lim := newLimiter(t, core.FixedWindow(1, time.Minute), newClock(t0))
			e := nethttp.NewEngine(lim, append(c.opts(saw), deny)...)
			for i, want := range []seen{c.first, c.second} {
				got = seen{}
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.RemoteAddr = "192.0.2.1:1234"
				w := httptest.NewRecorder()
				if rej := e.Check(w, r, func() *http.Request { got.views++; return view }); rej != nil {
					e.Respond(w, rej)
				}
				if got != want {
					t.Errorf("request %d: got %+v, want %+v", i+1, got, want)
				}
			}
		})
	}
}

// TestRejectionIsTheEvent: a Rejection is the classification of its
// request's Event: the same outcome, decision and cause, and the status of
// that outcome.
func TestRejectionIsTheEvent(t *testing.T) {
	p := core.FixedWindow(1, time.Minute).WithName("per-ip")
	canceledCtx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name   string
		lim    core.Limiter
		opts   []nethttp.Option
		ctx    context.Context
		status int
	}{
		{"denied", newLimiter(t, p, newClock(t0)), nil, context.Background(), http.StatusTooManyRequests},
		{"key error", newLimiter(t, p, newClock(t0)), []nethttp.Option{nethttp.WithKeyFunc(func(*http.Request) (string, error) {
			return "", keyfunc.ErrNoKey
		})}, context.Background(), http.StatusBadRequest},
		{"cost error", newLimiter(t, p, newClock(t0)), []nethttp.Option{nethttp.WithCostFunc(func(*http.Request) (int64, error) {
			return 0, nil
		})}, context.Background(), http.StatusInternalServerError},
		{"failed closed", coretest.Failing{P: p, Err: errors.New("store down")}, []nethttp.Option{nethttp.WithFailClosed()},
			context.Background(), http.StatusServiceUnavailable},
		{"canceled", coretest.Failing{P: p, Err: context.Canceled}, nil, canceledCtx, http.StatusServiceUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			var last nethttp.Event
			e := nethttp.NewEngine(c.lim, append(c.opts, nethttp.WithHook(func(ev nethttp.Event) { last = ev }))...)
			var rej *nethttp.Rejection
			for range 2 { // the second request, for the denial
				r := httptest.NewRequestWithContext(c.ctx, http.MethodGet, "/", nil)
				rej = e.Check(httptest.NewRecorder(), r, nil)
			}
			if rej == nil {
				t.Fatalf("Check: got nil, want a rejection")
			}
			if rej.Outcome != last.Outcome || rej.Status != c.status || rej.Decision != last.Decision || rej.Err != last.Err {
				t.Errorf("rejection: got %v %d %+v %v, want the event's %v, status %d, %+v %v",
					rej.Outcome, rej.Status, rej.Decision, rej.Err, last.Outcome, c.status, last.Decision, last.Err)
			}
		})
	}
}
