package nethttp_test

import (
	"fmt"
	"log"
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

func Example() {
	lim, err := core.New(core.FixedWindow(2, time.Minute), core.WithClock(fixedClock))
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	perIP, err := nethttp.Middleware(lim) // keyed on the TCP peer address
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", hello)
	h := perIP(mux)

	for range 3 {
		r := httptest.NewRequest(http.MethodGet, "/hello", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d remaining=%s reset=%s retry-after=%q\n", w.Code, w.Header().Get("X-RateLimit-Remaining"),
			w.Header().Get("X-RateLimit-Reset"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 remaining=1 reset=6 retry-after=""
	// 200 remaining=0 reset=6 retry-after=""
	// 429 remaining=0 reset=6 retry-after="6"
}

// Two limits on one route: per IP, and per API key. The X-RateLimit-* fields
// describe the tighter one; the IETF fields list both.
func Example_stacked() {
	perIPLim, _ := core.New(core.FixedWindow(10, time.Minute).WithName("per-ip"), core.WithClock(fixedClock))
	defer perIPLim.Close()
	perKeyLim, _ := core.New(core.FixedWindow(1000, time.Hour).WithName("per-key"), core.WithClock(fixedClock))
	defer perKeyLim.Close()

	perIP, err := nethttp.Middleware(perIPLim, nethttp.WithHeaderStyle(nethttp.HeadersBoth))
	if err != nil {
		log.Fatal(err)
	}
	perKey, err := nethttp.Middleware(perKeyLim, nethttp.WithKeyFunc(keyfunc.Header("X-API-Key")),
		nethttp.WithHeaderStyle(nethttp.HeadersBoth))
	if err != nil {
		log.Fatal(err)
	}
	h := perIP(perKey(http.HandlerFunc(hello)))

	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	r.Header.Set("X-API-Key", "k-123")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	for _, name := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "RateLimit-Policy", "RateLimit"} {
		fmt.Printf("%s: %s\n", name, w.Header().Get(name))
	}
	// Output:
	// X-RateLimit-Limit: 10
	// X-RateLimit-Remaining: 9
	// RateLimit-Policy: "per-ip";q=10;w=60, "per-key";q=1000;w=3600
	// RateLimit: "per-ip";r=9;t=6, "per-key";r=999;t=2766
}

func ExampleProblemJSON() {
	lim, _ := core.New(core.FixedWindow(1, time.Minute).WithName("per-ip"), core.WithClock(fixedClock))
	defer lim.Close()
	mw, err := nethttp.Middleware(lim, nethttp.WithDenyHandler(nethttp.ProblemJSON))
	if err != nil {
		log.Fatal(err)
	}
	h := mw(http.HandlerFunc(hello))
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

// A handler that calls a limiter itself renders the decision with the same
// code as the middleware.
func ExampleWriteHeaders() {
	h := http.Header{}
	nethttp.WriteHeaders(h, core.Decision{
		Allowed: false, Limit: 100, Remaining: 0,
		ResetAfter: 5200 * time.Millisecond, RetryAfter: 5200 * time.Millisecond,
		Policy: core.FixedWindow(100, time.Minute).WithName("per-ip"),
	}, nethttp.HeadersBoth, false)
	for _, name := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After", "RateLimit-Policy", "RateLimit"} {
		fmt.Printf("%s: %s\n", name, h.Get(name))
	}
	// Output:
	// X-RateLimit-Limit: 100
	// X-RateLimit-Remaining: 0
	// X-RateLimit-Reset: 6
	// Retry-After: 6
	// RateLimit-Policy: "per-ip";q=100;w=60
	// RateLimit: "per-ip";r=0;t=6
}
