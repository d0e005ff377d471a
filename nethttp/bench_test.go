package nethttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/internal/httpbench"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// BenchmarkMiddleware measures the middleware's overhead on the admitted path
// against the bare handler, in the same run: compare handler=bare with the
// others (ns/op and allocs/op).
//
//	go test -run=NONE -bench=BenchmarkMiddleware -benchmem ./nethttp/
func BenchmarkMiddleware(b *testing.B) {
	bare := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	// Every request admitted: the allowed path, with a key already in the
	// registry after the first request.
	lim, err := core.New(httpbench.Policy)
	if err != nil {
		b.Fatalf("unexpected error: %v", err)
	}
	b.Cleanup(func() { _ = lim.Close() })

	limited := func(opts ...nethttp.Option) http.Handler {
		mw := nethttp.Middleware(lim, opts...)
		return mw(bare)
	}
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{
		{"handler=bare", bare},
		{"handler=limited/key=ip/headers=xratelimit", limited()},
		{"handler=limited/key=static/headers=xratelimit", limited(nethttp.WithKeyFunc(keyfunc.Static("k")))},
		{"handler=limited/key=ip/headers=ietf", limited(nethttp.WithHeaderStyle(nethttp.HeadersIETF))},
		{"handler=limited/key=ip/headers=both", limited(nethttp.WithHeaderStyle(nethttp.HeadersBoth))},
		{"handler=limited/key=ip/headers=none", limited(nethttp.WithHeaderStyle(nethttp.HeadersNone))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = "192.0.2.1:1234"
			w := httpbench.NewDiscardWriter()
			b.ReportAllocs()
			for b.Loop() {
				w.Reset()
				bc.h.ServeHTTP(w, r)
			}
			w.Check(b)
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.RemoteAddr = "192.0.2.1:1234"
				w := httpbench.NewDiscardWriter()
				for pb.Next() {
					w.Reset()
					bc.h.ServeHTTP(w, r)
				}
				w.Check(b)
			})
		})
	}
}

// constLimiter answers every request with the same admission, without a
// clock or a map: BenchmarkEngine measures the engine alone.
type constLimiter struct{ d core.Decision }

func (c constLimiter) AllowN(context.Context, string, int64) (core.Decision, error) { return c.d, nil }
func (c constLimiter) Peek(context.Context, string) (core.Decision, error)          { return c.d, nil }
func (c constLimiter) Reset(context.Context, string) error                          { return nil }
func (c constLimiter) Policy() core.Policy                                          { return c.d.Policy }

// BenchmarkEngine is the engine's own share of BenchmarkMiddleware: a static
// key and a limiter that costs nothing, so what remains is rendering the
// headers (the difference with headers=none).
func BenchmarkEngine(b *testing.B) {
	p := core.TokenBucket(100, time.Minute).WithName("per-ip")
	lim := constLimiter{core.Decision{Allowed: true, Limit: 100, Remaining: 57, ResetAfter: 25 * time.Second, Policy: p}}
	bare := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	for _, style := range []nethttp.HeaderStyle{nethttp.HeadersNone, nethttp.HeadersXRateLimit, nethttp.HeadersIETF, nethttp.HeadersBoth} {
		mw := nethttp.Middleware(lim, nethttp.WithKeyFunc(keyfunc.Static("k")), nethttp.WithHeaderStyle(style))
		h := mw(bare)
		b.Run("headers="+style.String(), func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			w := httpbench.NewDiscardWriter()
			b.ReportAllocs()
			for b.Loop() {
				w.Reset()
				h.ServeHTTP(w, r)
			}
			w.Check(b)
		})
	}
}

// BenchmarkPolicyFunc measures what choosing the policy per request costs
// through the whole middleware: 1,000 API keys on three plans of one
// algorithm, the plan looked up in a map (policy=per-request), against the
// same keys under the limiter's one policy (policy=fixed).
func BenchmarkPolicyFunc(b *testing.B) {
	own := core.TokenBucket(1<<30, time.Hour)
	plans := []core.Policy{own.WithName("free"), own.WithName("pro"), own.WithName("team")}
	const nkeys = 1000
	reqs := make([]*http.Request, nkeys)
	planOf := make(map[string]core.Policy, nkeys)
	for i := range reqs {
		key := "key-" + strconv.Itoa(i)
		reqs[i] = httptest.NewRequest(http.MethodGet, "/", nil)
		reqs[i].Header.Set("X-API-Key", key)
		planOf[key] = plans[i%len(plans)]
	}
	lookup := func(_ *http.Request, key string) (core.Policy, error) { return planOf[key], nil }
	bare := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	for _, mode := range []string{"fixed", "per-request"} {
		lim := core.MustNew(own)
		opts := []nethttp.Option{nethttp.WithKeyFunc(keyfunc.Header("X-API-Key"))}
		if mode == "per-request" {
			opts = append(opts, nethttp.WithPolicyFunc(lookup))
		}
		h := nethttp.Middleware(lim, opts...)(bare)
		b.Run("policy="+mode, func(b *testing.B) {
			w := httpbench.NewDiscardWriter()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				w.Reset()
				h.ServeHTTP(w, reqs[i])
				if i++; i == nkeys {
					i = 0
				}
			}
			w.Check(b)
		})
		_ = lim.Close()
	}
}
