package chimw_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/go-ratelimit/ratelimit/chimw"
	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// fixedClock makes the output exact: 54 s into a minute.
func fixedClock() time.Time { return time.Unix(1_700_000_034, 0) }

// A per-IP limit for the whole router, and a stricter one per route and
// client on the login route.
func ExampleLimit() {
	lim := core.MustNew(core.FixedWindow(100, time.Minute), core.WithClock(fixedClock))
	defer lim.Close()
	logins := core.MustNew(core.FixedWindow(2, time.Minute), core.WithClock(fixedClock))
	defer logins.Close()

	r := chi.NewRouter()
	r.Use(chimw.Limit(lim))
	strict := chimw.Limit(logins, nethttp.WithKeyFunc(keyfunc.Join(keyfunc.Route(), keyfunc.IP())))
	r.With(strict).Post("/login", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "welcome") })

	for range 3 {
		req := httptest.NewRequest(http.MethodPost, "/login", nil)
		req.RemoteAddr = "192.0.2.1:1234"
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		fmt.Printf("%d limit=%s remaining=%s retry-after=%q\n", w.Code, w.Header().Get("X-RateLimit-Limit"),
			w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 limit=2 remaining=1 retry-after=""
	// 200 limit=2 remaining=0 retry-after=""
	// 429 limit=2 remaining=0 retry-after="6"
}

// Every route its own quota per client, from one r.Use: Limit finds the route
// chi is about to match.
func ExampleLimit_perRoute() {
	lim := core.MustNew(core.FixedWindow(1, time.Minute), core.WithClock(fixedClock))
	defer lim.Close()

	r := chi.NewRouter()
	r.Use(chimw.Limit(lim, nethttp.WithKeyFunc(keyfunc.Join(keyfunc.Route(), keyfunc.IP()))))
	r.Get("/users/{id}", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "a user") })
	r.Get("/orders/{id}", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "an order") })

	for _, path := range []string{"/users/1", "/orders/1", "/users/2", "/nowhere"} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.RemoteAddr = "192.0.2.1:1234"
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		fmt.Println(path, w.Code)
	}
	// Output:
	// /users/1 200
	// /orders/1 200
	// /users/2 429
	// /nowhere 400
}
