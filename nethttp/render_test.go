package nethttp_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// TestRendererWritesWhatTheMiddlewareWrites: two limiters on one clock see
// the same traffic, one behind the middleware, one called directly and
// rendered with a Renderer; every response carries exactly the fields the
// Renderer writes, admitted, denied, dry-run and over capacity.
func TestRendererWritesWhatTheMiddlewareWrites(t *testing.T) {
	p := core.FixedWindow(2, time.Minute).WithName("per-ip")
	for _, style := range []nethttp.HeaderStyle{nethttp.HeadersXRateLimit, nethttp.HeadersIETF, nethttp.HeadersBoth, nethttp.HeadersNone} {
		for _, dryRun := range []bool{false, true} {
			clk := newClock(t0.Add(54 * time.Second))
			served, direct := newLimiter(t, p, clk), newLimiter(t, p, clk)
			opts := []nethttp.Option{nethttp.WithHeaderStyle(style), nethttp.WithCostFunc(costHeader)}
			if dryRun {
				opts = append(opts, nethttp.WithDryRun())
			}
			h := wrap(t, served, opts...)
			rd := nethttp.NewRenderer(p, style)
			for i, cost := range []string{"1", "1", "1", "5"} { // admitted twice, denied, over capacity
				w := get(h, "", "Cost", cost)
				d, err := direct.AllowN(context.Background(), "192.0.2.1", int64(cost[0]-'0'))
				if err != nil && !errors.Is(err, core.ErrCostExceedsCapacity) {
					t.Fatal(err)
				}
				want := http.Header{}
				rd.Write(want, d, !d.Allowed && !dryRun)
				got := w.Result().Header
				delete(got, "Content-Type") // the 429's body
				delete(got, "X-Content-Type-Options")
				if !maps.EqualFunc(got, want, func(a, b []string) bool { return len(a) == len(b) && (len(a) == 0 || a[0] == b[0]) }) {
					t.Errorf("style %v, dry run %v, request %d: middleware wrote %q, Renderer %q", style, dryRun, i+1, got, want)
				}
			}
		}
	}
}

func TestNewRendererPanics(t *testing.T) {
	for name, build := range map[string]func(){
		"an unknown style":         func() { nethttp.NewRenderer(core.FixedWindow(1, time.Second), nethttp.HeaderStyle(9)) },
		"a name that is not ASCII": func() { nethttp.NewRenderer(core.FixedWindow(1, time.Second).WithName("caf\u00e9"), 0) },
	} {
		t.Run("panics for "+name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			build()
		})
	}
}

// costHeader is a cost function reading the request's Cost header.
func costHeader(r *http.Request) (int64, error) {
	c := r.Header.Get("Cost")
	return int64(c[0] - '0'), nil
}
