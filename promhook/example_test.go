package promhook_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/promhook"
)

// Count the decisions of a middleware, and the keys of its limiter, and
// serve them to Prometheus.
func Example() {
	m := promhook.New()
	reg := prometheus.NewRegistry() // or prometheus.MustRegister(m)
	reg.MustRegister(m)

	lim := core.MustNew(core.TokenBucket(2, time.Minute).WithName("per-ip"))
	defer lim.Close()
	m.WatchKeys("per-ip", lim)
	// A Redis limiter reports its fallback from its breaker hook (promhook
	// does not import redisstore), one series per limiter:
	//
	//	redisstore.WithBreakerHook(func(c redisstore.BreakerChange) {
	//		m.SetFallbackActive(c.Policy.Label(), c.To != redisstore.BreakerClosed)
	//	})
	//
	// and once at startup, so that the series exists before a change:
	m.SetFallbackActive(lim.Policy().Label(), false)

	mux := http.NewServeMux()
	mux.Handle("/", nethttp.Middleware(lim, nethttp.WithHook(m.Observe))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	for range 3 { // one client, three requests: the third is denied
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}

	// What Prometheus scrapes (the histogram's buckets and sum left out).
	scrape := httptest.NewRecorder()
	mux.ServeHTTP(scrape, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.Lines(scrape.Body.String()) {
		if !strings.HasPrefix(line, "#") && !strings.Contains(line, "_bucket") && !strings.Contains(line, "_sum") {
			fmt.Print(line)
		}
	}
	// Output:
	// ratelimit_fallback_active{limiter="per-ip"} 0
	// ratelimit_keys{limiter="per-ip"} 1
	// ratelimit_requests_total{outcome="allowed",policy="per-ip",source="store"} 2
	// ratelimit_requests_total{outcome="denied",policy="per-ip",source="store"} 1
	// ratelimit_store_duration_seconds_count{policy="per-ip"} 3
}
