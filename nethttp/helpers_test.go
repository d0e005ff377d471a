package nethttp_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// t0 starts a fixed window of a minute (windows are aligned to the Unix
// epoch), so that t0+54s is 6 s before the window resets.
var t0 = time.Unix(1_699_999_980, 0)

// newClock returns a settable clock for core.WithClock.
func newClock(t time.Time) *coretest.Clock { return coretest.NewClock(t) }

// newLimiter returns an in-memory limiter on clk, closed at the end of the
// test.
func newLimiter(t testing.TB, p core.Policy, clk *coretest.Clock) *core.MemoryLimiter {
	t.Helper()
	lim, err := core.New(p, core.WithClock(clk.Now))
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	t.Cleanup(func() { _ = lim.Close() })
	return lim
}

// ok is the protected handler: 200 "ok".
var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	_, _ = io.WriteString(w, "ok")
})

// wrap builds the middleware around ok, failing the test on a constructor
// error.
func wrap(t testing.TB, lim core.Limiter, opts ...nethttp.Option) http.Handler {
	t.Helper()
	mw := nethttp.Middleware(lim, opts...)
	return mw(ok)
}

// get sends one GET from the peer 192.0.2.1 (or the given RemoteAddr) with
// the given header lines ("Name: value") and returns the recorded response.
func get(h http.Handler, remote string, header ...string) *httptest.ResponseRecorder {
	return send(h, httptest.NewRequest(http.MethodGet, "/", nil), remote, header...)
}

func send(h http.Handler, r *http.Request, remote string, header ...string) *httptest.ResponseRecorder {
	if remote == "" {
		remote = "192.0.2.1:1234"
	}
	r.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// rateHeaders extracts the rate-limit fields of a response, absent ones
// as "".
func rateHeaders(t testing.TB, w *httptest.ResponseRecorder) map[string]string {
	t.Helper()
	h := w.Result().Header
	out := map[string]string{}
	for _, k := range []string{
		nethttp.HeaderLimit, nethttp.HeaderRemaining, nethttp.HeaderReset,
		nethttp.HeaderRetryAfter, nethttp.HeaderRateLimitPolicy, nethttp.HeaderRateLimit,
	} {
		if v := h.Values(k); len(v) > 0 {
			if got := len(v); got != 1 {
				t.Fatalf("header %s appears on more than one line: got %d, want %d", k, got, 1)
			}
			out[k] = v[0]
		}
	}
	return out
}

// xHeaders is the expected X-RateLimit-* set.
func xHeaders(limit, remaining, reset string) map[string]string {
	return map[string]string{
		nethttp.HeaderLimit: limit, nethttp.HeaderRemaining: remaining, nethttp.HeaderReset: reset,
	}
}

// with returns m plus the given key/value pairs.
func with(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
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

// The plans of the WithPolicyFunc tests: free (the limiter's own policy)
// and pro, chosen by the X-Plan header.
var (
	freePlan = core.FixedWindow(2, time.Minute).WithName("free")
	proPlan  = core.FixedWindow(50, time.Minute).WithName("pro")
)

// plans is a WithPolicyFunc function: proPlan for X-Plan: pro, an error for
// X-Plan: broken, freePlan otherwise.
func plans(r *http.Request, _ string) (core.Policy, error) {
	switch r.Header.Get("X-Plan") {
	case "pro":
		return proPlan, nil
	case "broken":
		return core.Policy{}, errPlanLookup
	}
	return freePlan, nil
}

var errPlanLookup = errors.New("plan lookup failed")

// wantHeaders reports an error unless the rate-limit fields of w are want
// (see rateHeaders).
func wantHeaders(t testing.TB, w *httptest.ResponseRecorder, want map[string]string) {
	t.Helper()
	if got := rateHeaders(t, w); !reflect.DeepEqual(got, want) {
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
