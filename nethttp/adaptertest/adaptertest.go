// Package adaptertest is the behavioural suite every HTTP adapter passes
// through its real router: nethttp, chimw, ginmw and echomw here, and an
// adapter of another router built on [nethttp.Engine]. An adapter's test
// hands [Run] a function that mounts its middleware on a router
// ([Adapter]). The suite checks every header value exactly, on a test clock;
// it never sleeps. [Benchmark] measures the adapter's overhead against the
// bare router.
package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Adapter describes the adapter under test.
type Adapter struct {
	// Mount returns a router serving GET /items/{id} (in the router's own
	// syntax) with [Handler] through the adapter's middleware built from
	// lim and opts. With a nil lim (from Benchmark) it mounts the route
	// without the middleware.
	Mount func(t testing.TB, lim core.Limiter, opts ...nethttp.Option) http.Handler
	// Body returns the body and Content-Type the adapter answers a
	// rejection of the given status with, when no handler option replaces
	// it. Nil means nethttp's plain-text answers.
	Body func(status int) (body, contentType string)
}

// t0 starts a minute-long fixed window (windows are aligned to the Unix
// epoch): t0+54s is 6 s before the reset.
var t0 = time.Unix(1_699_999_980, 0)

// plainBody is nethttp's default answer to a rejection of status.
func plainBody(status int) (body, contentType string) {
	switch status {
	case http.StatusTooManyRequests:
		return "Too Many Requests\n", "text/plain; charset=utf-8"
	case http.StatusBadRequest:
		return "Bad Request: the request carries no rate-limit key\n", "text/plain; charset=utf-8"
	}
	return http.StatusText(status) + "\n", "text/plain; charset=utf-8"
}

type suite struct {
	Adapter
	t *testing.T
}

// Run runs the suite against a.
func Run(t *testing.T, a Adapter) {
	if a.Body == nil {
		a.Body = plainBody
	}
	s := suite{Adapter: a, t: t}
	t.Run("denies the 101st request in a window with exact headers", s.window)
	t.Run("writes each header style", s.styles)
	t.Run("skips requests", s.skip)
	t.Run("charges costs", s.cost)
	t.Run("describes the stacked limit that denied", s.stacked)
	t.Run("never blocks in dry-run mode", s.dryRun)
	t.Run("fails open by default and closed on request", s.failure)
	t.Run("writes no Remaining or Reset for an unknown state", s.unknownState)
	t.Run("describes each request's own policy", s.plans)
	t.Run("applies the key-error policy", s.keyErrors)
	t.Run("keys on the route pattern, not the path", s.route)
	t.Run("admits exactly the limit to concurrent clients over loopback", s.loopback)
	t.Run("describes each part of a composite limit", s.composite)
	t.Run("settles costs after the response", s.settle)
	t.Run("answers before a slow settlement is done", s.slowSettle)
	t.Run("reports a settlement the limiter refuses", s.settleFailed)
}

func (s suite) limiter(t *testing.T, p core.Policy) (*core.MemoryLimiter, *coretest.Clock) {
	clk := coretest.NewClock(t0)
	lim, err := core.New(p, core.WithClock(clk.Now))
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	t.Cleanup(func() { _ = lim.Close() })
	return lim, clk
}

// get sends GET path from the peer 192.0.2.1 with header pairs.
func get(h http.Handler, path string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr = "192.0.2.1:1234"
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func rateHeaders(w *httptest.ResponseRecorder) map[string]string {
	out := map[string]string{}
	for _, k := range []string{
		nethttp.HeaderLimit, nethttp.HeaderRemaining, nethttp.HeaderReset,
		nethttp.HeaderRetryAfter, nethttp.HeaderRateLimitPolicy, nethttp.HeaderRateLimit,
	} {
		if v := w.Header().Values(k); len(v) > 0 {
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}

// headers builds the expected rateHeaders from name/value pairs.
func headers(kv ...string) map[string]string {
	out := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = "[" + kv[i+1] + "]"
	}
	return out
}

func x(limit, remaining, reset string, more ...string) map[string]string {
	return headers(append([]string{
		nethttp.HeaderLimit, limit, nethttp.HeaderRemaining, remaining, nethttp.HeaderReset, reset,
	}, more...)...)
}

func (s suite) assertRejected(t *testing.T, w *httptest.ResponseRecorder, status int) {
	t.Helper()
	body, ctype := s.Body(status)
	wantStatus(t, w, status)
	if got := w.Body.String(); got != body {
		t.Errorf("body: got %q, want %q", got, body)
	}
	if got := w.Header().Get("Content-Type"); got != ctype {
		t.Errorf("Content-Type: got %q, want %q", got, ctype)
	}
}

func (s suite) window(t *testing.T) {
	lim, clk := s.limiter(t, core.FixedWindow(100, time.Minute))
	h := s.Mount(t, lim)
	for i := 1; i <= 100; i++ {
		w := get(h, "/items/1")
		if got := w.Code; got != http.StatusOK {
			t.Fatalf("request %d: got %v, want %v", i, got, http.StatusOK)
		}
		if got := w.Body.String(); got != "ok" {
			t.Fatalf("body: got %q, want %q", got, "ok")
		}
		if got, want := rateHeaders(w), x("100", strconv.Itoa(100-i), "60"); !reflect.DeepEqual(got, want) {
			t.Fatalf("request %d: got %v, want %v", i, got, want)
		}
	}
	clk.Set(t0.Add(54 * time.Second))
	w := get(h, "/items/1")
	s.assertRejected(t, w, http.StatusTooManyRequests)
	wantHeaders(t, w, x("100", "0", "6", "Retry-After", "6"))

	clk.Set(t0.Add(time.Minute))
	w = get(h, "/items/1")
	if got := w.Code; got != http.StatusOK {
		t.Errorf("a new window admits again: got %v, want %v", got, http.StatusOK)
	}
	wantHeaders(t, w, x("100", "99", "60"))
}

func (s suite) styles(t *testing.T) {
	for _, tc := range []struct {
		style           nethttp.HeaderStyle
		allowed, denied map[string]string
	}{
		{nethttp.HeadersXRateLimit, x("1", "0", "60"), x("1", "0", "6", "Retry-After", "6")},
		{nethttp.HeadersIETF,
			headers("RateLimit-Policy", `"per-ip";q=1;w=60`, "RateLimit", `"per-ip";r=0;t=60`),
			headers("RateLimit-Policy", `"per-ip";q=1;w=60`, "RateLimit", `"per-ip";r=0;t=6`, "Retry-After", "6")},
		{nethttp.HeadersBoth,
			x("1", "0", "60", "RateLimit-Policy", `"per-ip";q=1;w=60`, "RateLimit", `"per-ip";r=0;t=60`),
			x("1", "0", "6", "RateLimit-Policy", `"per-ip";q=1;w=60`, "RateLimit", `"per-ip";r=0;t=6`, "Retry-After", "6")},
		{nethttp.HeadersNone, headers(), headers("Retry-After", "6")},
	} {
		t.Run(tc.style.String(), func(t *testing.T) {
			lim, clk := s.limiter(t, core.FixedWindow(1, time.Minute).WithName("per-ip"))
			h := s.Mount(t, lim, nethttp.WithHeaderStyle(tc.style))
			w := get(h, "/items/1")
			if got := w.Code; got != http.StatusOK {
				t.Fatalf("status: got %v, want %v", got, http.StatusOK)
			}
			wantHeaders(t, w, tc.allowed)
			clk.Set(t0.Add(54 * time.Second))
			w = get(h, "/items/1")
			if got := w.Code; got != http.StatusTooManyRequests {
				t.Fatalf("status: got %v, want %v", got, http.StatusTooManyRequests)
			}
			wantHeaders(t, w, tc.denied)
		})
	}
}

func (s suite) skip(t *testing.T) {
	lim, _ := s.limiter(t, core.FixedWindow(1, time.Minute))
	h := s.Mount(t, lim, nethttp.WithSkip(func(r *http.Request) bool { return r.Header.Get("X-Probe") == "1" }))
	for range 3 {
		w := get(h, "/items/1", "X-Probe", "1")
		if got := w.Code; got != http.StatusOK {
			t.Fatalf("status: got %v, want %v", got, http.StatusOK)
		}
		if got := rateHeaders(w); len(got) != 0 {
			t.Errorf("headers: got %v, want empty", got)
		}
	}
	if got := get(h, "/items/1").Code; got != http.StatusOK {
		t.Errorf("status: got %v, want %v", got, http.StatusOK)
	}
	if got := get(h, "/items/1").Code; got != http.StatusTooManyRequests {
		t.Errorf("status: got %v, want %v", got, http.StatusTooManyRequests)
	}
}

func (s suite) cost(t *testing.T) {
	lim, _ := s.limiter(t, core.FixedWindow(100, time.Minute))
	h := s.Mount(t, lim, nethttp.WithCostFunc(func(r *http.Request) (int64, error) {
		return strconv.ParseInt(r.Header.Get("X-Cost"), 10, 64)
	}))
	w := get(h, "/items/1", "X-Cost", "60")
	wantStatus(t, w, http.StatusOK)
	wantHeaders(t, w, x("100", "40", "60"))

	w = get(h, "/items/1", "X-Cost", "41")
	s.assertRejected(t, w, http.StatusTooManyRequests)
	wantHeaders(t, w, x("100", "40", "60", "Retry-After", "60"))

	w = get(h, "/items/1", "X-Cost", "101")
	if got := w.Code; got != http.StatusTooManyRequests {
		t.Errorf("a cost above capacity is denied: got %v, want %v", got, http.StatusTooManyRequests)
	}
	if got := w.Header().Get("Retry-After"); got != "" {
		t.Errorf("waiting cannot help: got %q, want empty", got)
	}

	w = get(h, "/items/1", "X-Cost", "x")
	s.assertRejected(t, w, http.StatusInternalServerError)
}

// stacked puts the adapter's middleware (a per-key quota charging X-Cost)
// inside a net/http one (per IP, unit cost) that admits with fewer requests
// remaining: the 429 describes the per-key limit that denied it, with its
// Retry-After, and the IETF fields list both.
func (s suite) stacked(t *testing.T) {
	clk := coretest.NewClock(t0)
	limiter := func(p core.Policy) core.Limiter {
		lim, err := core.New(p, core.WithClock(clk.Now))
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		t.Cleanup(func() { _ = lim.Close() })
		return lim
	}
	apiKey := keyfunc.Header("X-API-Key")
	perIP := nethttp.Middleware(limiter(core.FixedWindow(3, time.Second).WithName("per-ip")),
		nethttp.WithHeaderStyle(nethttp.HeadersBoth))
	h := perIP(s.Mount(t, limiter(core.FixedWindow(10, time.Minute).WithName("per-key")),
		nethttp.WithHeaderStyle(nethttp.HeadersBoth), nethttp.WithKeyFunc(apiKey),
		nethttp.WithCostFunc(func(r *http.Request) (int64, error) {
			return strconv.ParseInt(r.Header.Get("X-Cost"), 10, 64)
		})))

	if got := get(h, "/items/1", "X-API-Key", "k", "X-Cost", "4").Code; got != http.StatusOK {
		t.Fatalf("status: got %v, want %v", got, http.StatusOK)
	}
	if got := get(h, "/items/1", "X-API-Key", "k", "X-Cost", "4").Code; got != http.StatusOK {
		t.Fatalf("status: got %v, want %v", got, http.StatusOK)
	}
	w := get(h, "/items/1", "X-API-Key", "k", "X-Cost", "5")
	s.assertRejected(t, w, http.StatusTooManyRequests)
	if got, want := rateHeaders(w), x("10", "2", "60", "Retry-After", "60",
		"RateLimit-Policy", `"per-ip";q=3;w=1, "per-key";q=10;w=60`,
		"RateLimit", `"per-ip";r=0;t=1, "per-key";r=2;t=60`); !reflect.DeepEqual(got, want) {
		t.Errorf("per-key denied a cost of 5 with 2 remaining; per-ip admitted with 0: got %v, want %v", got, want)
	}

	clk.Set(t0.Add(time.Second))
	w = get(h, "/items/1", "X-API-Key", "k", "X-Cost", "11")
	if got := w.Code; got != http.StatusTooManyRequests {
		t.Errorf("a cost above the per-key capacity: got %v, want %v", got, http.StatusTooManyRequests)
	}
	if got, want := rateHeaders(w), headers("X-RateLimit-Limit", "10",
		"RateLimit-Policy", `"per-ip";q=3;w=1, "per-key";q=10;w=60`,
		"RateLimit", `"per-ip";r=2;t=1`); !reflect.DeepEqual(got, want) {
		t.Errorf("no Retry-After, nothing of the key's state: got %v, want %v", got, want)
	}
}

// recorder returns a WithHook option appending every Event to *events (not
// safe for concurrent requests).
func recorder(events *[]nethttp.Event) nethttp.Option {
	return nethttp.WithHook(func(ev nethttp.Event) { *events = append(*events, ev) })
}

// outcomes lists the events' outcomes.
func outcomes(events []nethttp.Event) []nethttp.Outcome {
	out := make([]nethttp.Outcome, len(events))
	for i, ev := range events {
		out[i] = ev.Outcome
	}
	return out
}

func (s suite) dryRun(t *testing.T) {
	lim, _ := s.limiter(t, core.FixedWindow(1, time.Minute))
	var events []nethttp.Event
	h := s.Mount(t, lim, nethttp.WithDryRun(), recorder(&events))
	for range 3 {
		w := get(h, "/items/1")
		if got := w.Code; got != http.StatusOK {
			t.Fatalf("status: got %v, want %v", got, http.StatusOK)
		}
		if got := w.Header().Get("Retry-After"); got != "" {
			t.Errorf("Retry-After: got %q, want empty", got)
		}
	}
	if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeAllowed, nethttp.OutcomeDryRun, nethttp.OutcomeDryRun}); !reflect.DeepEqual(got, want) {
		t.Errorf("outcomes: got %v, want %v", got, want)
	}
	if got, want := rateHeaders(get(h, "/items/1")), x("1", "0", "60"); !reflect.DeepEqual(got, want) {
		t.Errorf("headers: got %v, want %v", got, want)
	}
}

// failure: a limiter that fails is served (fail open) or answered 503
// (WithFailClosed), either way with the limit it was to apply and nothing
// else: Remaining and Reset are unknown.
func (s suite) failure(t *testing.T) {
	secret := errors.New("secret-store-detail")
	var events []nethttp.Event
	broken := coretest.Failing{Err: secret, P: core.FixedWindow(7, time.Second).WithName("per-ip")}
	both := nethttp.WithHeaderStyle(nethttp.HeadersBoth)
	known := headers(nethttp.HeaderLimit, "7", nethttp.HeaderRateLimitPolicy, `"per-ip";q=7;w=1`)

	w := get(s.Mount(t, broken, recorder(&events), both), "/items/1")
	wantStatus(t, w, http.StatusOK)
	if got := w.Body.String(); got != "ok" {
		t.Errorf("body: got %q, want %q", got, "ok")
	}
	wantHeaders(t, w, known)

	w = get(s.Mount(t, broken, recorder(&events), both, nethttp.WithFailClosed()), "/items/1")
	s.assertRejected(t, w, http.StatusServiceUnavailable)
	wantHeaders(t, w, known)
	if got := w.Body.String(); strings.Contains(got, "secret") {
		t.Errorf("body: got %q, want it not to contain %q", got, "secret")
	}
	if got := fmt.Sprint(w.Header()); strings.Contains(got, "secret") {
		t.Errorf("headers: got %q, want none to contain %q", got, "secret")
	}

	if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeFailedOpen, nethttp.OutcomeFailedClosed}); !reflect.DeepEqual(got, want) {
		t.Fatalf("outcomes(events): got %v, want %v", got, want)
	}
	for _, ev := range events {
		if err := ev.Err; !errors.Is(err, secret) {
			t.Errorf("ev.Err: got %v, want %v", err, secret)
		}
		if got := ev.Key; got != "192.0.2.1" {
			t.Errorf("ev.Key: got %q, want %q", got, "192.0.2.1")
		}
		if got, want := ev.Decision, (core.Decision{Limit: 7, Policy: broken.P}); got != want {
			t.Errorf("ev.Decision: got %v, want %v", got, want)
		}
	}
}

// unknownStore denies every request as a cost above capacity whose state
// it cannot tell, as redisstore does while Redis is down.
type unknownStore struct{ coretest.Failing }

func (u unknownStore) AllowN(context.Context, string, int64) (core.Decision, error) {
	return core.Decision{Limit: u.P.Limit, Policy: u.P}, u.Err
}

// unknownState: a denial whose state is unknown is a 429 with the limit
// and the policy, and nothing guessed.
func (s suite) unknownState(t *testing.T) {
	p := core.FixedWindow(7, time.Second).WithName("per-ip")
	lim := unknownStore{coretest.Failing{Err: fmt.Errorf("store: %w (key state unknown)", core.ErrCostExceedsCapacity), P: p}}
	w := get(s.Mount(t, lim, nethttp.WithHeaderStyle(nethttp.HeadersBoth)), "/items/1")
	wantStatus(t, w, http.StatusTooManyRequests)
	wantHeaders(t, w, headers(nethttp.HeaderLimit, "7", nethttp.HeaderRateLimitPolicy, `"per-ip";q=7;w=1`))
}

// plans: one limiter, a policy per API key (WithPolicyFunc). Each answer
// describes the plan it was decided under.
func (s suite) plans(t *testing.T) {
	free := core.FixedWindow(2, time.Minute).WithName("free")
	pro := core.FixedWindow(50, time.Minute).WithName("pro")
	lim, _ := s.limiter(t, free)
	var events []nethttp.Event
	h := s.Mount(t, lim, recorder(&events),
		nethttp.WithHeaderStyle(nethttp.HeadersBoth),
		nethttp.WithKeyFunc(keyfunc.Header("X-API-Key")),
		nethttp.WithPolicyFunc(func(_ *http.Request, key string) (core.Policy, error) {
			if key == "k-pro" {
				return pro, nil
			}
			return free, nil
		}))

	w := get(h, "/items/1", "X-API-Key", "k-free")
	wantStatus(t, w, http.StatusOK)
	wantHeaders(t, w, x("2", "1", "60", "RateLimit-Policy", `"free";q=2;w=60`, "RateLimit", `"free";r=1;t=60`))
	w = get(h, "/items/1", "X-API-Key", "k-pro")
	wantStatus(t, w, http.StatusOK)
	wantHeaders(t, w, x("50", "49", "60", "RateLimit-Policy", `"pro";q=50;w=60`, "RateLimit", `"pro";r=49;t=60`))

	get(h, "/items/1", "X-API-Key", "k-free")
	w = get(h, "/items/1", "X-API-Key", "k-free")
	s.assertRejected(t, w, http.StatusTooManyRequests)
	wantHeaders(t, w, x("2", "0", "60", "Retry-After", "60",
		"RateLimit-Policy", `"free";q=2;w=60`, "RateLimit", `"free";r=0;t=60`))
	w = get(h, "/items/1", "X-API-Key", "k-pro")
	if got := w.Code; got != http.StatusOK {
		t.Errorf("the pro key has its own, larger quota: got %v, want %v", got, http.StatusOK)
	}
	wantHeaders(t, w, x("50", "48", "60", "RateLimit-Policy", `"pro";q=50;w=60`, "RateLimit", `"pro";r=48;t=60`))

	if got := len(events); got != 5 {
		t.Fatalf("len(events): got %d, want %d", got, 5)
	}
	if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeAllowed, nethttp.OutcomeAllowed, nethttp.OutcomeAllowed,
		nethttp.OutcomeDenied, nethttp.OutcomeAllowed}); !reflect.DeepEqual(got, want) {
		t.Errorf("outcomes: got %v, want %v", got, want)
	}
	if got := events[1].Decision.Policy; got != pro {
		t.Errorf("events[1].Decision.Policy: got %v, want %v", got, pro)
	}
	if got := events[3].Decision.Policy; got != free {
		t.Errorf("events[3].Decision.Policy: got %v, want %v", got, free)
	}
}

func (s suite) keyErrors(t *testing.T) {
	apiKey := keyfunc.Header("X-API-Key")

	lim, _ := s.limiter(t, core.FixedWindow(1, time.Minute))
	h := s.Mount(t, lim, nethttp.WithKeyFunc(apiKey))
	s.assertRejected(t, get(h, "/items/1"), http.StatusBadRequest)
	if got := get(h, "/items/1", "X-API-Key", "a").Code; got != http.StatusOK {
		t.Errorf("status: got %v, want %v", got, http.StatusOK)
	}
	if got := get(h, "/items/1", "X-API-Key", "a").Code; got != http.StatusTooManyRequests {
		t.Errorf("status: got %v, want %v", got, http.StatusTooManyRequests)
	}
	if got := get(h, "/items/1", "X-API-Key", "b").Code; got != http.StatusOK {
		t.Errorf("status: got %v, want %v", got, http.StatusOK)
	}

	lim, _ = s.limiter(t, core.FixedWindow(1, time.Minute))
	h = s.Mount(t, lim, nethttp.WithKeyFunc(apiKey), nethttp.WithKeyFallback(keyfunc.IP()))
	if got := get(h, "/items/1").Code; got != http.StatusOK {
		t.Errorf("the fallback counts by IP: got %v, want %v", got, http.StatusOK)
	}
	if got := get(h, "/items/1").Code; got != http.StatusTooManyRequests {
		t.Errorf("status: got %v, want %v", got, http.StatusTooManyRequests)
	}

	lim, _ = s.limiter(t, core.FixedWindow(1, time.Minute))
	h = s.Mount(t, lim, nethttp.WithKeyFunc(apiKey),
		nethttp.WithKeyErrorHandler(func(w http.ResponseWriter, _ *http.Request, _ error) {
			http.Error(w, "key required", http.StatusUnauthorized)
		}))
	w := get(h, "/items/1")
	wantStatus(t, w, http.StatusUnauthorized)
	if got := w.Body.String(); got != "key required\n" {
		t.Errorf("body: got %q, want %q", got, "key required\n")
	}
}

func (s suite) route(t *testing.T) {
	lim, _ := s.limiter(t, core.FixedWindow(2, time.Minute))
	h := s.Mount(t, lim, nethttp.WithKeyFunc(keyfunc.Route()))
	if got := get(h, "/items/1").Code; got != http.StatusOK {
		t.Errorf("status: got %v, want %v", got, http.StatusOK)
	}
	if got := get(h, "/items/2").Code; got != http.StatusOK {
		t.Errorf("status: got %v, want %v", got, http.StatusOK)
	}
	if got := get(h, "/items/3").Code; got != http.StatusTooManyRequests {
		t.Errorf("/items/1, /items/2 and /items/3 are one route: got %v, want %v", got, http.StatusTooManyRequests)
	}
}

func (s suite) loopback(t *testing.T) {
	const limit, clients, perClient = 50, 10, 10
	lim, _ := s.limiter(t, core.FixedWindow(limit, time.Minute))
	srv := httptest.NewServer(s.Mount(t, lim))
	defer srv.Close()

	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for range perClient {
				resp, err := srv.Client().Get(srv.URL + "/items/1")
				if err != nil {
					t.Error(err)
					return
				}
				_ = resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if got, want := codes, (map[int]int{http.StatusOK: limit, http.StatusTooManyRequests: clients*perClient - limit}); !reflect.DeepEqual(got, want) {
		t.Errorf("codes: got %v, want %v", got, want)
	}
}

// wantHeaders reports an error unless the rate-limit fields of w are want
// (see rateHeaders).
func wantHeaders(t testing.TB, w *httptest.ResponseRecorder, want map[string]string) {
	t.Helper()
	if got := rateHeaders(w); !reflect.DeepEqual(got, want) {
		t.Errorf("headers: got %v, want %v", got, want)
	}
}

// wantStatus reports an error unless w's status is want.
func wantStatus(t testing.TB, w *httptest.ResponseRecorder, want int) {
	t.Helper()
	if w.Code != want {
		t.Errorf("status: got %d, want %d", w.Code, want)
	}
}
