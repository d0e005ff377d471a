package adaptertest

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/internal/httpbench"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Benchmark measures an adapter's overhead on the admitted path: the router
// with the middleware (router=limited) against the same router without it
// (router=bare), in the same run, for the default IP key and for a route
// key. a.Mount is called with a nil limiter for the bare router and must then
// mount the route without the middleware.
func Benchmark(b *testing.B, a Adapter) {
	lim, err := core.New(httpbench.Policy)
	if err != nil {
		b.Fatalf("unexpected error: %v", err)
	}
	b.Cleanup(func() { _ = lim.Close() })

	for _, bc := range []struct {
		name string
		h    http.Handler
	}{
		{"router=bare", a.Mount(b, nil)},
		{"router=limited/key=ip", a.Mount(b, lim)},
		{"router=limited/key=route", a.Mount(b, lim, nethttp.WithKeyFunc(keyfunc.Route()))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "/items/1", nil)
			r.RemoteAddr = "192.0.2.1:1234"
			w := httpbench.NewDiscardWriter()
			b.ReportAllocs()
			for b.Loop() {
				w.Reset()
				bc.h.ServeHTTP(w, r)
			}
			w.Check(b)
		})
	}
}
