package nethttp_test

import (
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Stacked limits as one mounts them on a route: a per-IP limit per second
// and a per-API-key quota per day, whose requests cost what X-Cost says
// (1 without it).

// stackDay is a day boundary, also a second boundary.
var stackDay = time.Unix(1_699_920_000, 0)

// xCost is the cost function of the stacked tests: X-Cost, or 1.
func xCost(r *http.Request) (int64, error) {
	if v := r.Header.Get("X-Cost"); v != "" {
		return strconv.ParseInt(v, 10, 64)
	}
	return 1, nil
}

// layer builds one middleware of a stack on clk and counts the requests it
// decides (its hook's events) in *calls.
func layer(t *testing.T, clk *coretest.Clock, p core.Policy, calls *int, opts ...nethttp.Option) func(http.Handler) http.Handler {
	t.Helper()
	opts = append([]nethttp.Option{nethttp.WithHook(func(nethttp.Event) { *calls++ })}, opts...)
	mw := nethttp.Middleware(newLimiter(t, p, clk), opts...)
	return mw
}

// perIPLayer is limit requests per second per peer address, at unit cost.
func perIPLayer(t *testing.T, clk *coretest.Clock, limit int64, calls *int, opts ...nethttp.Option) func(http.Handler) http.Handler {
	return layer(t, clk, core.FixedWindow(limit, time.Second).WithName("per-ip"), calls,
		append([]nethttp.Option{nethttp.WithHeaderStyle(nethttp.HeadersBoth)}, opts...)...)
}

// perKeyLayer is limit units per day per X-API-Key, each request costing
// X-Cost.
func perKeyLayer(t *testing.T, clk *coretest.Clock, limit int64, calls *int, opts ...nethttp.Option) func(http.Handler) http.Handler {
	return layer(t, clk, core.FixedWindow(limit, 24*time.Hour).WithName("per-key"), calls,
		append([]nethttp.Option{
			nethttp.WithHeaderStyle(nethttp.HeadersBoth),
			nethttp.WithKeyFunc(mustHeader(t, "X-API-Key")),
			nethttp.WithCostFunc(xCost),
		}, opts...)...)
}

// xOnly keeps the X-RateLimit-* fields and Retry-After of rateHeaders.
func xOnly(m map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{nethttp.HeaderLimit, nethttp.HeaderRemaining, nethttp.HeaderReset, nethttp.HeaderRetryAfter} {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

// The scenario of issue 8: the outer per-IP limit admits, the inner per-key
// quota denies a request of cost 5 while 2 units remain. However restrictive
// the outer limit's numbers look (Remaining below, equal to or above 2), the
// 429 describes the per-key limit that denied it, consistently with its
// Retry-After; the IETF fields still list both.
func TestStackedCostDenialShowsTheDenyingLimit(t *testing.T) {
	for _, perIP := range []int64{3, 4, 5, 100} {
		t.Run("per-ip limit "+strconv.FormatInt(perIP, 10), func(t *testing.T) {
			clk := newClock(stackDay)
			var ipCalls, keyCalls int
			h := perIPLayer(t, clk, perIP, &ipCalls)(perKeyLayer(t, clk, 10, &keyCalls)(ok))

			for i, cost := range []string{"4", "4"} {
				w := get(h, "", "X-API-Key", "k", "X-Cost", cost)
				if got := w.Code; got != http.StatusOK {
					t.Fatalf("request %d: got %v, want %v", i+1, got, http.StatusOK)
				}
			}
			w := get(h, "", "X-API-Key", "k", "X-Cost", "5")
			wantStatus(t, w, http.StatusTooManyRequests)
			outer := strconv.FormatInt(perIP-3, 10) // the per-IP Remaining after 3 requests
			wantHeaders(t, w, with(xHeaders("10", "2", "86400"), "Retry-After", "86400",
				"RateLimit-Policy", `"per-ip";q=`+strconv.FormatInt(perIP, 10)+`;w=1, "per-key";q=10;w=86400`,
				"RateLimit", `"per-ip";r=`+outer+`;t=1, "per-key";r=2;t=86400`))
			if got := w.Body.String(); got != "Too Many Requests\n" {
				t.Errorf("body: got %q, want %q", got, "Too Many Requests\n")
			}
			if got, want := []int{ipCalls, keyCalls}, ([]int{3, 3}); !reflect.DeepEqual(got, want) {
				t.Errorf("limiter calls (per-ip, per-key): got %v, want %v", got, want)
			}
		})
	}
}

// The mirror cases of the same rule, in X-RateLimit-* terms: on a 429 they
// and Retry-After describe the limit that denied the request, whichever it
// is and wherever it sits in the stack.
func TestStackedDenialShowsTheDenyingLimit(t *testing.T) {
	t.Run("the outer limit denies alone and the inner is not consulted", func(t *testing.T) {
		clk := newClock(stackDay)
		var ipCalls, keyCalls int
		h := perIPLayer(t, clk, 1, &ipCalls)(perKeyLayer(t, clk, 10, &keyCalls)(ok))
		if got := get(h, "", "X-API-Key", "k").Code; got != http.StatusOK {
			t.Fatalf("status: got %v, want %v", got, http.StatusOK)
		}
		w := get(h, "", "X-API-Key", "k", "X-Cost", "5")
		wantStatus(t, w, http.StatusTooManyRequests)
		wantHeaders(t, w, with(xHeaders("1", "0", "1"), "Retry-After", "1",
			"RateLimit-Policy", `"per-ip";q=1;w=1`, "RateLimit", `"per-ip";r=0;t=1`))
		if got, want := []int{ipCalls, keyCalls}, ([]int{2, 1}); !reflect.DeepEqual(got, want) {
			t.Errorf("limiter calls (per-ip, per-key): got %v, want %v", got, want)
		}
	})

	t.Run("when both would deny the outer answers and the inner is not charged", func(t *testing.T) {
		clk := newClock(stackDay)
		var ipCalls, keyCalls int
		h := perIPLayer(t, clk, 1, &ipCalls)(perKeyLayer(t, clk, 10, &keyCalls)(ok))
		if got := get(h, "", "X-API-Key", "k", "X-Cost", "8").Code; got != http.StatusOK {
			t.Fatalf("status: got %v, want %v", got, http.StatusOK)
		}
		w := get(h, "", "X-API-Key", "k", "X-Cost", "5") // per-key has 2 left: it would deny too
		wantStatus(t, w, http.StatusTooManyRequests)
		if got, want := xOnly(rateHeaders(t, w)), with(xHeaders("1", "0", "1"), "Retry-After", "1"); !reflect.DeepEqual(got, want) {
			t.Errorf("X-RateLimit headers: got %v, want %v", got, want)
		}
		if got, want := []int{ipCalls, keyCalls}, ([]int{2, 1}); !reflect.DeepEqual(got, want) {
			t.Errorf("limiter calls (per-ip, per-key): got %v, want %v", got, want)
		}

		clk.Set(stackDay.Add(time.Second))
		w = get(h, "", "X-API-Key", "k", "X-Cost", "2")
		if got := w.Code; got != http.StatusOK {
			t.Errorf("the per-key quota was not charged for the denied request: got %v, want %v", got, http.StatusOK)
		}
		if got, want := xOnly(rateHeaders(t, w)), xHeaders("10", "0", "86399"); !reflect.DeepEqual(got, want) {
			t.Errorf("X-RateLimit headers: got %v, want %v", got, want)
		}
	})

	t.Run("a dry-run denial outside does not outrank the inner denial", func(t *testing.T) {
		clk := newClock(stackDay)
		var ipCalls, keyCalls int
		h := perIPLayer(t, clk, 1, &ipCalls, nethttp.WithDryRun())(perKeyLayer(t, clk, 10, &keyCalls)(ok))
		if got := get(h, "", "X-API-Key", "k", "X-Cost", "8").Code; got != http.StatusOK {
			t.Fatalf("status: got %v, want %v", got, http.StatusOK)
		}
		w := get(h, "", "X-API-Key", "k", "X-Cost", "5") // per-ip denies in dry run (r=0), per-key for real (r=2)
		wantStatus(t, w, http.StatusTooManyRequests)
		wantHeaders(t, w, with(xHeaders("10", "2", "86400"), "Retry-After", "86400",
			"RateLimit-Policy", `"per-ip";q=1;w=1, "per-key";q=10;w=86400`,
			"RateLimit", `"per-ip";r=0;t=1, "per-key";r=2;t=86400`))
	})

	t.Run("a cost above the inner capacity shows its limit and no Retry-After", func(t *testing.T) {
		clk := newClock(stackDay)
		var ipCalls, keyCalls int
		h := perIPLayer(t, clk, 3, &ipCalls)(perKeyLayer(t, clk, 10, &keyCalls)(ok))
		if got := get(h, "", "X-API-Key", "k").Code; got != http.StatusOK {
			t.Fatalf("status: got %v, want %v", got, http.StatusOK)
		}
		w := get(h, "", "X-API-Key", "k", "X-Cost", "11")
		wantStatus(t, w, http.StatusTooManyRequests)
		wantHeaders(t, w, map[string]string{nethttp.HeaderLimit: "10",
			"RateLimit-Policy": `"per-ip";q=3;w=1, "per-key";q=10;w=86400`,
			"RateLimit":        `"per-ip";r=1;t=1`})
		if got := w.Body.String(); got != "Too Many Requests: the request costs more than the rate limit ever admits\n" {
			t.Errorf("body: got %q, want %q", got, "Too Many Requests: the request costs more than the rate limit ever admits\n")
		}
	})

	t.Run("a cost above the outer capacity shows its limit and no Retry-After", func(t *testing.T) {
		clk := newClock(stackDay)
		var ipCalls, keyCalls int
		h := perKeyLayer(t, clk, 10, &keyCalls)(perIPLayer(t, clk, 3, &ipCalls)(ok))
		w := get(h, "", "X-API-Key", "k", "X-Cost", "11")
		wantStatus(t, w, http.StatusTooManyRequests)
		if got, want := xOnly(rateHeaders(t, w)), map[string]string{nethttp.HeaderLimit: "10"}; !reflect.DeepEqual(got, want) {
			t.Errorf("X-RateLimit headers: got %v, want %v", got, want)
		}
		if got, want := []int{ipCalls, keyCalls}, ([]int{0, 1}); !reflect.DeepEqual(got, want) {
			t.Errorf("limiter calls (per-ip, per-key): got %v, want %v", got, want)
		}
	})

	// The cost denial of TestStackedCostDenialShowsTheDenyingLimit with the
	// middlewares in both orders: the same X-RateLimit-* and Retry-After.
	for _, order := range []string{"per-ip outside", "per-key outside"} {
		t.Run("a cost denial with "+order, func(t *testing.T) {
			clk := newClock(stackDay)
			var ipCalls, keyCalls int
			ip, key := perIPLayer(t, clk, 3, &ipCalls), perKeyLayer(t, clk, 10, &keyCalls)
			h := ip(key(ok))
			if order == "per-key outside" {
				h = key(ip(ok))
			}
			get(h, "", "X-API-Key", "k", "X-Cost", "4")
			get(h, "", "X-API-Key", "k", "X-Cost", "4")
			w := get(h, "", "X-API-Key", "k", "X-Cost", "5")
			wantStatus(t, w, http.StatusTooManyRequests)
			if got, want := xOnly(rateHeaders(t, w)), with(xHeaders("10", "2", "86400"), "Retry-After", "86400"); !reflect.DeepEqual(got, want) {
				t.Errorf("X-RateLimit headers: got %v, want %v", got, want)
			}
		})
	}

	// Unit costs: the outer per-key quota admits its last request (r=0 for
	// the rest of the day), the inner per-IP limit denies (r=0 for 1 s). The
	// tie in Remaining that the later reset breaks for admitted requests
	// does not keep the outer limit on the 429.
	t.Run("a unit-cost denial inside an exhausted outer limit", func(t *testing.T) {
		clk := newClock(stackDay)
		var ipCalls, keyCalls int
		h := perKeyLayer(t, clk, 3, &keyCalls)(perIPLayer(t, clk, 1, &ipCalls)(ok))
		if got := get(h, "", "X-API-Key", "k").Code; got != http.StatusOK {
			t.Fatalf("status: got %v, want %v", got, http.StatusOK)
		}
		clk.Set(stackDay.Add(time.Second))
		if got := get(h, "", "X-API-Key", "k").Code; got != http.StatusOK {
			t.Fatalf("status: got %v, want %v", got, http.StatusOK)
		}
		w := get(h, "", "X-API-Key", "k")
		wantStatus(t, w, http.StatusTooManyRequests)
		wantHeaders(t, w, with(xHeaders("1", "0", "1"), "Retry-After", "1",
			"RateLimit-Policy", `"per-key";q=3;w=86400, "per-ip";q=1;w=1`,
			"RateLimit", `"per-key";r=0;t=86399, "per-ip";r=0;t=1`))
	})
}

// WriteHeaders, for handlers that call limiters themselves, follows the same
// rule: a denial replaces the X-RateLimit-* fields whatever they say, and
// Retry-After is the denial's own (absent when waiting cannot help).
func TestWriteHeadersDenialReplacesTheFields(t *testing.T) {
	p := core.FixedWindow(10, time.Minute)
	allowed := core.Decision{Allowed: true, Limit: 5, Remaining: 0, ResetAfter: time.Hour, Policy: core.FixedWindow(5, time.Hour)}

	t.Run("a denial with Remaining above the fields", func(t *testing.T) {
		h := http.Header{}
		nethttp.WriteHeaders(h, allowed, nethttp.HeadersXRateLimit, false)
		nethttp.WriteHeaders(h, core.Decision{Limit: 10, Remaining: 2, ResetAfter: 30 * time.Second, RetryAfter: 30 * time.Second, Policy: p},
			nethttp.HeadersXRateLimit, false)
		if got, want := h, (http.Header{
			"X-Ratelimit-Limit": {"10"}, "X-Ratelimit-Remaining": {"2"}, "X-Ratelimit-Reset": {"30"}, "Retry-After": {"30"},
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("h: got %v, want %v", got, want)
		}
	})
	t.Run("a denial that waiting cannot end drops Retry-After", func(t *testing.T) {
		h := http.Header{}
		nethttp.WriteHeaders(h, allowed, nethttp.HeadersXRateLimit, false)
		h.Set("Retry-After", "3600")
		nethttp.WriteHeaders(h, core.Decision{Limit: 10, Remaining: 10, Policy: p}, nethttp.HeadersXRateLimit, false)
		if got, want := h, (http.Header{"X-Ratelimit-Limit": {"10"}}); !reflect.DeepEqual(got, want) {
			t.Errorf("h: got %v, want %v", got, want)
		}
	})
	t.Run("an admission still keeps more restrictive fields", func(t *testing.T) {
		h := http.Header{}
		nethttp.WriteHeaders(h, allowed, nethttp.HeadersXRateLimit, false)
		nethttp.WriteHeaders(h, core.Decision{Allowed: true, Limit: 10, Remaining: 2, ResetAfter: time.Minute, Policy: p},
			nethttp.HeadersXRateLimit, false)
		if got, want := h, (http.Header{
			"X-Ratelimit-Limit": {"5"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"3600"},
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("h: got %v, want %v", got, want)
		}
	})
}
