package nethttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// fixedClock makes the examples' output exact: 54 s into a minute.
func fixedClock() time.Time { return time.Unix(1_700_000_034, 0) }

func hello(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "hello") }

// serve sends a GET for path from the client 192.0.2.1 and prints the answer.
func serve(h http.Handler, method, path string) {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = "192.0.2.1:1234"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Printf("%s %s: %d remaining=%s reset=%s retry-after=%q\n", method, path, w.Code,
		w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("X-RateLimit-Reset"), w.Header().Get("Retry-After"))
}

// One limit per client IP for every route of a mux: one expression around
// the mux.
func ExampleMiddleware() {
	lim := core.MustNew(core.FixedWindow(2, time.Minute), core.WithClock(fixedClock))
	defer lim.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", hello)
	h := nethttp.Middleware(lim)(mux) // keyed on the TCP peer address

	for range 3 {
		serve(h, http.MethodGet, "/hello")
	}
	// Output:
	// GET /hello: 200 remaining=1 reset=6 retry-after=""
	// GET /hello: 200 remaining=0 reset=6 retry-after=""
	// GET /hello: 429 remaining=0 reset=6 retry-after="6"
}

// A stricter limit on one route wraps that route's handler, where
// Request.Pattern, and so keyfunc.Route, is set.
func ExampleMiddleware_perRoute() {
	logins := core.MustNew(core.FixedWindow(1, time.Minute), core.WithClock(fixedClock))
	defer logins.Close()
	perRouteIP := nethttp.WithKeyFunc(keyfunc.Join(keyfunc.Route(), keyfunc.IP()))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", hello)
	mux.Handle("POST /login", nethttp.Middleware(logins, perRouteIP)(http.HandlerFunc(hello)))

	serve(mux, http.MethodPost, "/login")
	serve(mux, http.MethodPost, "/login")
	serve(mux, http.MethodGet, "/hello")
	// Output:
	// POST /login: 200 remaining=0 reset=6 retry-after=""
	// POST /login: 429 remaining=0 reset=6 retry-after="6"
	// GET /hello: 200 remaining= reset= retry-after=""
}

// Two limits on one route: per IP, and per API key. The X-RateLimit-* fields
// describe the tighter one; the IETF fields list both.
func ExampleMiddleware_stacked() {
	perIPLim := core.MustNew(core.FixedWindow(10, time.Minute).WithName("per-ip"), core.WithClock(fixedClock))
	defer perIPLim.Close()
	perKeyLim := core.MustNew(core.FixedWindow(1000, time.Hour).WithName("per-key"), core.WithClock(fixedClock))
	defer perKeyLim.Close()

	perIP := nethttp.Middleware(perIPLim, nethttp.WithHeaderStyle(nethttp.HeadersBoth))
	perKey := nethttp.Middleware(perKeyLim, nethttp.WithKeyFunc(keyfunc.Header("X-API-Key")),
		nethttp.WithHeaderStyle(nethttp.HeadersBoth))
	h := perIP(perKey(http.HandlerFunc(hello)))

	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	r.Header.Set("X-API-Key", "k-123")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	for _, name := range []string{nethttp.HeaderLimit, nethttp.HeaderRemaining, nethttp.HeaderRateLimitPolicy, nethttp.HeaderRateLimit} {
		fmt.Printf("%s: %s\n", name, w.Header().Get(name))
	}
	// Output:
	// X-RateLimit-Limit: 10
	// X-RateLimit-Remaining: 9
	// RateLimit-Policy: "per-ip";q=10;w=60, "per-key";q=1000;w=3600
	// RateLimit: "per-ip";r=9;t=6, "per-key";r=999;t=2766
}

func ExampleProblemJSON() {
	lim := core.MustNew(core.FixedWindow(1, time.Minute).WithName("per-ip"), core.WithClock(fixedClock))
	defer lim.Close()
	h := nethttp.Middleware(lim, nethttp.WithDenyHandler(nethttp.ProblemJSON))(http.HandlerFunc(hello))
	var w *httptest.ResponseRecorder
	for range 2 {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		w = httptest.NewRecorder()
		h.ServeHTTP(w, r)
	}
	fmt.Println(w.Code, w.Header().Get("Content-Type"))
	fmt.Print(w.Body.String())
	// Output:
	// 429 application/problem+json
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Request cannot be satisfied as assigned quota has been exceeded","status":429,"detail":"Retry later; see the Retry-After header.","violated-policies":["per-ip"]}
}
