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

// toyContext is the request context of a router whose handlers do not have
// net/http's shape: it carries the writer, the request and the route the
// router matched, in the router's own syntax.
type toyContext struct {
	W     http.ResponseWriter
	R     *http.Request
	Route string
}

type toyHandler func(c *toyContext) error

// toyLimit is the adapter: the router's middleware, built on nethttp's
// engine, so that it takes nethttp's options and answers exactly as
// nethttp.Middleware does.
func toyLimit(lim core.Limiter, opts ...nethttp.Option) func(next toyHandler) toyHandler {
	e := nethttp.NewEngine(lim, opts...)
	return func(next toyHandler) toyHandler {
		return func(c *toyContext) error {
			// The options' functions see a shallow copy carrying the
			// route, for keyfunc.Route; the caller's request is not
			// modified. The engine makes it only if a function is to
			// see it.
			view := func() *http.Request {
				r := c.R.WithContext(c.R.Context())
				r.Pattern = c.Route
				return r
			}
			if rej := e.Check(c.W, c.R, view); rej != nil {
				e.Respond(c.W, rej) // the headers are set; this writes the status and body
				return nil          // and the chain stops here
			}
			return next(c)
		}
	}
}

// An adapter for another router reuses the engine: Check, then Respond or
// the next handler.
func ExampleEngine() {
	lim := core.MustNew(core.FixedWindow(1, time.Minute), core.WithClock(func() time.Time { return time.Unix(1_700_000_034, 0) }))
	defer lim.Close()
	h := toyLimit(lim, nethttp.WithKeyFunc(keyfunc.Route()))(func(c *toyContext) error {
		_, err := fmt.Fprintln(c.W, "hello")
		return err
	})

	for _, path := range []string{"/users/1", "/users/2"} {
		w := httptest.NewRecorder()
		_ = h(&toyContext{W: w, R: httptest.NewRequest(http.MethodGet, path, nil), Route: "/users/:id"})
		fmt.Printf("%s %d retry-after=%q\n", path, w.Code, w.Header().Get("Retry-After"))
	}
	// Output:
	// /users/1 200 retry-after=""
	// /users/2 429 retry-after="6"
}
