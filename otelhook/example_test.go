package otelhook_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/otelhook"
)

// fixedClock makes the output exact: 34 s into a minute.
func fixedClock() time.Time { return time.Unix(1_700_000_034, 0) }

// A per-IP limit whose decisions, keys and fallback state are metrics. A
// ManualReader stands in for the exporter a program configures (OTLP,
// Prometheus).
func ExampleNew() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	m, err := otelhook.New(mp)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	lim := core.MustNew(core.FixedWindow(2, time.Minute).WithName("per-ip"), core.WithClock(fixedClock))
	defer lim.Close()
	m.WatchKeys(lim.Policy().Name, lim)
	// A Redis limiter reports its fallback from its breaker hook (otelhook
	// does not import redisstore), one series per limiter:
	//
	//	redisstore.WithBreakerHook(func(c redisstore.BreakerChange) {
	//		m.SetFallbackActive(c.Policy.Label(), c.To != redisstore.BreakerClosed)
	//	})
	//
	// and once at startup, for a series that starts at 0:
	m.SetFallbackActive(lim.Policy().Label(), false)

	h := nethttp.Middleware(lim, nethttp.WithHook(m.Observe))(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "hello")
	}))
	for range 3 {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = "192.0.2.1:1234"
		h.ServeHTTP(httptest.NewRecorder(), req)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	var lines []string
	enc := attribute.DefaultEncoder() // k=v,k=v
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			switch d := md.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s {%s} = %d", md.Name, dp.Attributes.Encoded(enc), dp.Value))
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s {%s} = %d", md.Name, dp.Attributes.Encoded(enc), dp.Value))
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s {%s}: %d calls", md.Name, dp.Attributes.Encoded(enc), dp.Count))
				}
			}
		}
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// ratelimit.fallback.active {ratelimit.limiter=per-ip} = 0
	// ratelimit.keys {ratelimit.limiter=per-ip} = 1
	// ratelimit.requests {ratelimit.outcome=allowed,ratelimit.policy=per-ip,ratelimit.source=store} = 2
	// ratelimit.requests {ratelimit.outcome=denied,ratelimit.policy=per-ip,ratelimit.source=store} = 1
	// ratelimit.store.duration {ratelimit.policy=per-ip}: 3 calls
}
