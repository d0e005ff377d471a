package benchmarks

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// BenchmarkComposeHTTP (issue 26): nethttp.Middleware on the in-memory
// limiter, one client, every request admitted. policy= compares a policy
// of two parts (core.AllOf) with a single policy and with the baseline it
// replaces, two stacked middlewares; settle= compares a request settled
// after its response (WithFinalCost, refunded) with one not settled, and
// with one whose final cost is the charge (no call to Settle).
func BenchmarkComposeHTTP(b *testing.B) {
	const big = 100_000_000 // never binds
	perSecond := core.FixedWindow(big, time.Second).WithName("per-second")
	perDay := core.FixedWindow(big, 24*time.Hour).WithName("per-day")
	keep := nethttp.WithFinalCost(func(_ int, _ http.Header, charged int64) int64 { return charged })
	refund := nethttp.WithFinalCost(func(int, http.Header, int64) int64 { return 0 })
	for _, bc := range []struct {
		name string
		h    func(b *testing.B) http.Handler
	}{
		{"policy=single", func(b *testing.B) http.Handler { return mw(b, perSecond)(composeOK) }},
		{"policy=composite-2", func(b *testing.B) http.Handler { return mw(b, core.AllOf(perSecond, perDay))(composeOK) }},
		{"policy=stacked-2", func(b *testing.B) http.Handler { return mw(b, perSecond)(mw(b, perDay)(composeOK)) }},
		{"settle=off", func(b *testing.B) http.Handler { return mw(b, perSecond)(composeOK) }},
		{"settle=same-cost", func(b *testing.B) http.Handler { return mw(b, perSecond, keep)(composeOK) }},
		{"settle=refund", func(b *testing.B) http.Handler { return mw(b, perSecond, refund)(composeOK) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := bc.h(b)
			r := newRequest()
			w := newDiscardWriter()
			wrong := 0
			b.ReportAllocs()
			for b.Loop() {
				w.reset()
				h.ServeHTTP(w, r)
				if w.status != http.StatusOK {
					wrong++
				}
			}
			if wrong > 0 {
				b.Fatalf("%d of %d responses were not 200", wrong, b.N)
			}
		})
	}
}

// BenchmarkComposeMemory (issue 26) is BenchmarkComposeHTTP's policy=
// rows without the middleware: the in-memory limiter's AllowN alone, one
// key, every request admitted. stacked-2 is two limiters asked in turn;
// plan-single the limiter of composite-2 asked under perSecond alone
// (AllowPolicy: a plan of one part).
func BenchmarkComposeMemory(b *testing.B) {
	const big = 100_000_000 // never binds
	perSecond := core.FixedWindow(big, time.Second).WithName("per-second")
	perDay := core.FixedWindow(big, 24*time.Hour).WithName("per-day")
	for _, bc := range []struct {
		name     string
		policies []core.Policy
		plan     *core.Policy // asked with AllowPolicy when set
	}{
		{"policy=single", []core.Policy{perSecond}, nil},
		{"policy=composite-2", []core.Policy{core.AllOf(perSecond, perDay)}, nil},
		{"policy=stacked-2", []core.Policy{perSecond, perDay}, nil},
		{"policy=plan-single", []core.Policy{core.AllOf(perSecond, perDay)}, &perSecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var lims []*core.MemoryLimiter
			for _, p := range bc.policies {
				lim := core.MustNew(p)
				b.Cleanup(func() { _ = lim.Close() })
				lims = append(lims, lim)
			}
			ctx := context.Background()
			wrong := 0
			b.ReportAllocs()
			for b.Loop() {
				for _, lim := range lims {
					var d core.Decision
					var err error
					if bc.plan != nil {
						d, err = lim.AllowPolicy(ctx, *bc.plan, oneKey, 1)
					} else {
						d, err = lim.AllowN(ctx, oneKey, 1)
					}
					if !d.Allowed || err != nil {
						wrong++
					}
				}
			}
			if wrong > 0 {
				b.Fatalf("%d of %d decisions were not admissions", wrong, b.N)
			}
		})
	}
}

// mw is nethttp.Middleware on an in-memory limiter of p, closed at the end
// of the benchmark.
func mw(b *testing.B, p core.Policy, opts ...nethttp.Option) func(http.Handler) http.Handler {
	lim := core.MustNew(p)
	b.Cleanup(func() { _ = lim.Close() })
	return nethttp.Middleware(lim, opts...)
}

var composeOK = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusOK) // discardWriter records only this
	_, _ = w.Write([]byte("ok"))
})
