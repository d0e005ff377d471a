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
	lim, err := core.New(BenchmarkPolicy)
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
			w := NewDiscardWriter()
			b.ReportAllocs()
			for b.Loop() {
				w.Reset()
				bc.h.ServeHTTP(w, r)
			}
			w.Check(b)
		})
	}
}

// BenchmarkPolicy is the policy benchmarks of the admitted path use: a token
// bucket refilling 1000 tokens every 50µs (20 million requests a second), so
// that no benchmark loop is ever denied, with numbers as small as a real
// policy.s (Remaining <= 1000, Reset 1 s).
var BenchmarkPolicy = core.TokenBucket(1000, 50*time.Microsecond).WithName("bench")

// DiscardWriter is a ResponseWriter for benchmarks: it keeps one header map,
// cleared by Reset, so that a benchmark measures the handler, not a
// recorder, and it counts statuses other than 200.
type DiscardWriter struct {
	h            http.Header
	total, other int
}

// NewDiscardWriter returns a DiscardWriter with an empty header map.
func NewDiscardWriter() *DiscardWriter { return &DiscardWriter{h: http.Header{}} }

// Reset clears the headers for the next request.
func (w *DiscardWriter) Reset() { clear(w.h) }

// Check fails b if more than 1% of the requests were answered with another
// status than 200: the benchmark left the path it meant to measure. (A
// parallel benchmark on a busy machine sees rare denials: a goroutine
// descheduled between reading the clock and deciding for longer than the
// bucket's 50µs of tolerance is denied. They do not move the average.)
func (w *DiscardWriter) Check(b *testing.B) {
	if w.other*100 > max(w.total, 100) {
		b.Fatalf("%d of %d responses were not 200: the benchmark measured another path", w.other, w.total)
	}
}

func (w *DiscardWriter) Header() http.Header         { return w.h }
func (w *DiscardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *DiscardWriter) WriteHeader(code int) {
	w.total++
	if code != http.StatusOK {
		w.other++
	}
}
