package nethttp_test

import (
	"net/http"
	"testing"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/nethttp/adaptertest"
)

// TestAdapterSuite runs the suite every adapter passes, on a ServeMux with
// the middleware around one registered handler (where Request.Pattern, and so
// keyfunc.Route, is set).
func TestAdapterSuite(t *testing.T) {
	adaptertest.Run(t, adaptertest.Adapter{Mount: onMux})
}

// BenchmarkServeMux is the adapters' benchmark for net/http: a ServeMux
// with and without the middleware on its route.
func BenchmarkServeMux(b *testing.B) { adaptertest.Benchmark(b, adaptertest.Adapter{Mount: onMux}) }

// onMux mounts the middleware around the suite's handler of GET
// /items/{id} (none for a nil lim).
func onMux(t testing.TB, lim core.Limiter, opts ...nethttp.Option) http.Handler {
	mux := http.NewServeMux()
	if lim == nil {
		mux.Handle("GET /items/{id}", adaptertest.Handler)
		return mux
	}
	mw := nethttp.Middleware(lim, opts...)
	mux.Handle("GET /items/{id}", mw(adaptertest.Handler))
	return mux
}
