package adaptertest

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Benchmark measures an adapter's overhead on the admitted path: the router
// with the middleware (router=limited) against the same router without it
// (router=bare), in the same run, for the default IP key and for a route
// key. a.Mount is called with a nil limiter for the bare router and must then
// mount the route without the middleware.
func Benchmark(b *testing.B, a Adapter) {
	// So generous that every request is admitted.
	lim, err := core.New(core.TokenBucket(1_000_000_000, time.Second))
	require.NoError(b, err)
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
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				bc.h.ServeHTTP(w, r)
			}
		})
	}
}

// discardWriter keeps one header map, cleared per request, so that the
// benchmark measures the router and the middleware, not a recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}
