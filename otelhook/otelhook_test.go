package otelhook_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/otelhook"
)

// newMetrics returns Metrics on an SDK provider read by a ManualReader.
func newMetrics(t testing.TB, opts ...otelhook.Option) (*otelhook.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := otelhook.New(mp, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m, reader
}

// collect returns what reader holds, by instrument name, checking that every
// instrument is in the scope "github.com/go-ratelimit/ratelimit/otelhook".
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, "github.com/go-ratelimit/ratelimit/otelhook", sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// setKey renders an attribute set as "k=v,k=v" in the set's (sorted) order.
func setKey(s attribute.Set) string {
	var b []byte
	for i, kv := range s.ToSlice() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, kv.Key...)
		b = append(b, '=')
		b = append(b, kv.Value.String()...)
	}
	return string(b)
}

// requests returns the ratelimit.requests sums by attribute set, checking
// that it is a cumulative monotonic sum of {request}.
func requests(t *testing.T, got map[string]metricdata.Metrics) map[string]int64 {
	t.Helper()
	m, ok := got["ratelimit.requests"]
	require.True(t, ok, "no %s in %v", "ratelimit.requests", got)
	assert.Equal(t, "{request}", m.Unit)
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T", m.Name, m.Data)
	assert.True(t, sum.IsMonotonic)
	assert.Equal(t, metricdata.CumulativeTemporality, sum.Temporality)
	out := map[string]int64{}
	for _, dp := range sum.DataPoints {
		out[setKey(dp.Attributes)] = dp.Value
	}
	return out
}

// int64Points returns the data points of the non-monotonic int64 sum or the
// int64 gauge named name, by attribute set; nil when it was not reported.
func int64Points(t *testing.T, got map[string]metricdata.Metrics, name string) map[string]int64 {
	t.Helper()
	m, ok := got[name]
	if !ok {
		return nil
	}
	var points []metricdata.DataPoint[int64]
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		assert.False(t, d.IsMonotonic, "%s is monotonic", name)
		points = d.DataPoints
	case metricdata.Gauge[int64]:
		points = d.DataPoints
	default:
		t.Fatalf("%s is a %T", name, m.Data)
	}
	out := map[string]int64{}
	for _, dp := range points {
		out[setKey(dp.Attributes)] = dp.Value
	}
	return out
}

func request(t *testing.T) *http.Request {
	t.Helper()
	return httptest.NewRequest(http.MethodGet, "/", nil)
}

// called is LimiterCalled as the middleware sets it in these tests' events:
// for every decision, and for a failure that took time (a failure with no
// latency stands for a failed WithPolicyFunc lookup, before the call).
func called(o nethttp.Outcome, latency time.Duration) bool {
	switch o {
	case nethttp.OutcomeAllowed, nethttp.OutcomeDenied, nethttp.OutcomeDryRun:
		return true
	}
	return latency > 0
}

// event is an Event of a request decided under the token bucket named
// policy, or without a policy (as for a key error) when policy is "".
func event(policy string, o nethttp.Outcome, s core.Source, latency time.Duration) nethttp.Event {
	ev := nethttp.Event{Key: "203.0.113.7", Cost: 1, Outcome: o, Latency: latency, LimiterCalled: called(o, latency)}
	ev.Decision.Source = s
	if policy != "" {
		ev.Decision.Allowed = o == nethttp.OutcomeAllowed
		ev.Decision.Limit = 10
		ev.Decision.Policy = core.TokenBucket(10, time.Second).WithName(policy)
	}
	return ev
}

func TestObserveRequests(t *testing.T) {
	t.Run("counts each request once under its policy, outcome and source", func(t *testing.T) {
		m, reader := newMetrics(t)
		traffic := []struct {
			ev nethttp.Event
			n  int
		}{
			{event("api", nethttp.OutcomeAllowed, core.SourceStore, time.Millisecond), 5},
			{event("api", nethttp.OutcomeDenied, core.SourceStore, time.Millisecond), 3},
			{event("api", nethttp.OutcomeDenied, core.SourceDenyCache, time.Microsecond), 2},
			{event("api", nethttp.OutcomeAllowed, core.SourceFallback, time.Microsecond), 4},
			{event("login", nethttp.OutcomeDryRun, core.SourceStore, time.Millisecond), 1},
			{event("login", nethttp.OutcomeFailedOpen, core.SourceStore, 50*time.Millisecond), 2},
			{event("login", nethttp.OutcomeFailedClosed, core.SourceStore, 50*time.Millisecond), 1},
			{event("login", nethttp.OutcomeCanceled, core.SourceStore, time.Millisecond), 1},
			{event("login", nethttp.OutcomeSettleFailed, core.SourceStore, time.Millisecond), 2},
			{event("", nethttp.OutcomeKeyError, core.SourceStore, 0), 2},
			{event("", nethttp.OutcomeCostError, core.SourceStore, 0), 1},
		}
		for _, tr := range traffic {
			for range tr.n {
				ev := tr.ev
				ev.Request = request(t)
				m.Observe(ev)
			}
		}
		assert.Equal(t, map[string]int64{
			"ratelimit.outcome=allowed,ratelimit.policy=api,ratelimit.source=store":         5,
			"ratelimit.outcome=denied,ratelimit.policy=api,ratelimit.source=store":          3,
			"ratelimit.outcome=denied,ratelimit.policy=api,ratelimit.source=deny-cache":     2,
			"ratelimit.outcome=allowed,ratelimit.policy=api,ratelimit.source=fallback":      4,
			"ratelimit.outcome=dry-run,ratelimit.policy=login,ratelimit.source=store":       1,
			"ratelimit.outcome=failed-open,ratelimit.policy=login,ratelimit.source=store":   2,
			"ratelimit.outcome=failed-closed,ratelimit.policy=login,ratelimit.source=store": 1,
			"ratelimit.outcome=canceled,ratelimit.policy=login,ratelimit.source=store":      1,
			"ratelimit.outcome=settle-failed,ratelimit.policy=login,ratelimit.source=store": 2,
			"ratelimit.outcome=key-error,ratelimit.policy=,ratelimit.source=none":           2,
			"ratelimit.outcome=cost-error,ratelimit.policy=,ratelimit.source=none":          1,
		}, requests(t, collect(t, reader)))
	})

	t.Run("keeps counting across collections", func(t *testing.T) {
		m, reader := newMetrics(t)
		m.Observe(event("api", nethttp.OutcomeAllowed, core.SourceStore, time.Millisecond))
		assert.Equal(t, map[string]int64{"ratelimit.outcome=allowed,ratelimit.policy=api,ratelimit.source=store": 1},
			requests(t, collect(t, reader)))
		m.Observe(event("api", nethttp.OutcomeAllowed, core.SourceStore, time.Millisecond))
		assert.Equal(t, map[string]int64{"ratelimit.outcome=allowed,ratelimit.policy=api,ratelimit.source=store": 2},
			requests(t, collect(t, reader)))
	})

	t.Run("names a policy without a name as the RateLimit-Policy header does", func(t *testing.T) {
		m, reader := newMetrics(t)
		ev := event("", nethttp.OutcomeAllowed, core.SourceStore, time.Millisecond)
		ev.Decision.Policy = core.SlidingWindow(100, time.Minute)
		m.Observe(ev)
		ev.Decision.Policy = core.FixedWindow(5, 1500*time.Millisecond)
		m.Observe(ev)
		assert.Equal(t, map[string]int64{
			"ratelimit.outcome=allowed,ratelimit.policy=slidingwindow-100-per-60s,ratelimit.source=store": 1,
			"ratelimit.outcome=allowed,ratelimit.policy=fixedwindow-5-per-1.5s,ratelimit.source=store":    1,
		}, requests(t, collect(t, reader)))
	})

	t.Run("counts outcomes and sources added after it was written", func(t *testing.T) {
		m, reader := newMetrics(t)
		m.Observe(event("api", nethttp.Outcome(200), core.SourceStore, 0))
		m.Observe(event("api", nethttp.OutcomeDenied, core.Source(9), time.Millisecond))
		assert.Equal(t, map[string]int64{
			"ratelimit.outcome=Outcome(200),ratelimit.policy=api,ratelimit.source=none": 1, // not a call, by event's rule
			"ratelimit.outcome=denied,ratelimit.policy=api,ratelimit.source=Source(9)":  1,
		}, requests(t, collect(t, reader)))
	})

	t.Run("counts exactly beyond the cached policies", func(t *testing.T) {
		m, reader := newMetrics(t)
		const policies = 1100 // more than the cache holds
		for i := range policies {
			for range 1 + i%3 {
				m.Observe(event("p"+strconv.Itoa(i), nethttp.OutcomeAllowed, core.SourceStore, time.Millisecond))
			}
		}
		got := requests(t, collect(t, reader))
		require.Len(t, got, policies)
		for i := range policies {
			assert.Equal(t, int64(1+i%3), got["ratelimit.outcome=allowed,ratelimit.policy=p"+strconv.Itoa(i)+",ratelimit.source=store"], i)
		}
	})

	t.Run("never uses the request's key as an attribute", func(t *testing.T) {
		m, reader := newMetrics(t)
		m.WatchKeys("api", fakeLen(3))
		m.SetFallbackActive("redis", true)
		for o := range nethttp.OutcomeSettleFailed + 1 {
			m.Observe(event("api", o, core.SourceStore, time.Millisecond))
		}
		for name, md := range collect(t, reader) {
			for _, set := range attributeSets(t, md) {
				for _, kv := range set.ToSlice() {
					assert.NotEqual(t, "203.0.113.7", kv.Value.String(), "%s: %s", name, kv.Key)
				}
				assert.Subset(t, []attribute.Key{attribute.Key("ratelimit.policy"), attribute.Key("ratelimit.outcome"), attribute.Key("ratelimit.source"), attribute.Key("ratelimit.limiter")},
					keys(set), name)
			}
		}
	})
}

func keys(s attribute.Set) []attribute.Key {
	var out []attribute.Key
	for _, kv := range s.ToSlice() {
		out = append(out, kv.Key)
	}
	return out
}

func attributeSets(t *testing.T, md metricdata.Metrics) []attribute.Set {
	t.Helper()
	var out []attribute.Set
	switch d := md.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	default:
		t.Fatalf("%s is a %T", md.Name, md.Data)
	}
	return out
}

func TestObserveStoreDuration(t *testing.T) {
	t.Run("records the latency in seconds only when the limiter was called", func(t *testing.T) {
		m, reader := newMetrics(t)
		for _, ev := range []nethttp.Event{
			event("api", nethttp.OutcomeAllowed, core.SourceStore, 20*time.Microsecond),
			event("api", nethttp.OutcomeDenied, core.SourceStore, 300*time.Microsecond),
			event("api", nethttp.OutcomeDenied, core.SourceDenyCache, 300*time.Microsecond),
			event("api", nethttp.OutcomeFailedOpen, core.SourceStore, 40*time.Millisecond),
			event("api", nethttp.OutcomeKeyError, core.SourceStore, 0),  // not called
			event("api", nethttp.OutcomeCostError, core.SourceStore, 0), // not called
			event("login", nethttp.OutcomeAllowed, core.SourceStore, 2*time.Second),
		} {
			m.Observe(ev)
		}
		md := collect(t, reader)["ratelimit.store.duration"]
		assert.Equal(t, "s", md.Unit)
		h, ok := md.Data.(metricdata.Histogram[float64])
		require.True(t, ok, "%s is a %T", md.Name, md.Data)
		assert.Equal(t, metricdata.CumulativeTemporality, h.Temporality)
		require.Len(t, h.DataPoints, 2)
		points := map[string]metricdata.HistogramDataPoint[float64]{}
		for _, dp := range h.DataPoints {
			assert.Equal(t, otelhook.DefaultDurationBoundaries, dp.Bounds)
			points[setKey(dp.Attributes)] = dp
		}

		api := points["ratelimit.policy=api"]
		assert.Equal(t, uint64(4), api.Count)
		//                     ≤10µs 25µs 50µs .1ms .25ms .5ms 1ms 2.5ms 5ms 10ms 25ms 50ms .1s .25s +Inf
		assert.Equal(t, []uint64{0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0, 0, 0}, api.BucketCounts)
		assert.InDelta(t, 0.04062, api.Sum, 1e-12)
		assertExtrema(t, 20e-6, api.Min)
		assertExtrema(t, 0.04, api.Max)

		login := points["ratelimit.policy=login"]
		assert.Equal(t, uint64(1), login.Count)
		assert.Equal(t, []uint64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, login.BucketCounts)
		assert.InDelta(t, 2.0, login.Sum, 1e-12)
	})

	t.Run("records a zero latency of a decision, as promhook does", func(t *testing.T) {
		m, reader := newMetrics(t)
		m.Observe(event("api", nethttp.OutcomeAllowed, core.SourceStore, 0)) // a coarse clock
		m.Observe(event("api", nethttp.OutcomeFailedOpen, core.SourceStore, 0))
		h := collect(t, reader)["ratelimit.store.duration"].Data.(metricdata.Histogram[float64])
		require.Len(t, h.DataPoints, 1)
		assert.Equal(t, uint64(1), h.DataPoints[0].Count)
	})

	t.Run("uses the boundaries of WithDurationBoundaries", func(t *testing.T) {
		m, reader := newMetrics(t, otelhook.WithDurationBoundaries(0.001, 0.01))
		m.Observe(event("api", nethttp.OutcomeAllowed, core.SourceStore, 5*time.Millisecond))
		h := collect(t, reader)["ratelimit.store.duration"].Data.(metricdata.Histogram[float64])
		require.Len(t, h.DataPoints, 1)
		assert.Equal(t, []float64{0.001, 0.01}, h.DataPoints[0].Bounds)
		assert.Equal(t, []uint64{0, 1, 0}, h.DataPoints[0].BucketCounts)
	})
}

func assertExtrema(t *testing.T, want float64, e metricdata.Extrema[float64]) {
	t.Helper()
	v, ok := e.Value()
	require.True(t, ok)
	assert.InDelta(t, want, v, 1e-12)
}

// fakeLen is a limiter's Len.
type fakeLen int

func (n fakeLen) Len() int { return int(n) }

func TestWatchKeys(t *testing.T) {
	t.Run("reports the keys an in-memory limiter holds at each collection", func(t *testing.T) {
		m, reader := newMetrics(t)
		now := time.Unix(1_700_000_000, 0)
		lim, err := core.New(core.FixedWindow(10, time.Minute).WithName("api"), core.WithClock(func() time.Time { return now }))
		require.NoError(t, err)
		defer lim.Close()
		m.WatchKeys(lim.Policy().Name, lim)

		got := collect(t, reader)
		assert.Equal(t, "{key}", got["ratelimit.keys"].Unit)
		assert.Equal(t, map[string]int64{"ratelimit.limiter=api": 0}, int64Points(t, got, "ratelimit.keys"))

		ctx := context.Background()
		for _, key := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.1"} {
			_, err := lim.Allow(ctx, key)
			require.NoError(t, err)
		}
		assert.Equal(t, map[string]int64{"ratelimit.limiter=api": 3},
			int64Points(t, collect(t, reader), "ratelimit.keys"))

		for i := range 5 {
			_, err := lim.Allow(ctx, "198.51.100."+strconv.Itoa(i))
			require.NoError(t, err)
		}
		assert.Equal(t, map[string]int64{"ratelimit.limiter=api": 8},
			int64Points(t, collect(t, reader), "ratelimit.keys"))
	})

	t.Run("reports each name, replaces a name's limiter and forgets it on UnwatchKeys", func(t *testing.T) {
		m, reader := newMetrics(t)
		m.WatchKeys("api", fakeLen(7))
		m.WatchKeys("login", fakeLen(2))
		assert.Equal(t, map[string]int64{"ratelimit.limiter=api": 7, "ratelimit.limiter=login": 2},
			int64Points(t, collect(t, reader), "ratelimit.keys"))

		m.WatchKeys("api", fakeLen(9))
		m.UnwatchKeys("login")
		assert.Equal(t, map[string]int64{"ratelimit.limiter=api": 9},
			int64Points(t, collect(t, reader), "ratelimit.keys"))
	})

	t.Run("panics on a nil limiter", func(t *testing.T) {
		m, _ := newMetrics(t)
		assert.PanicsWithError(t, `otelhook: WatchKeys("api"): nil limiter`, func() { m.WatchKeys("api", nil) })
	})
}

func TestSetFallbackActive(t *testing.T) {
	t.Run("is 1 while a limiter's fallback decides and 0 otherwise, per limiter", func(t *testing.T) {
		m, reader := newMetrics(t)
		assert.Empty(t, int64Points(t, collect(t, reader), "ratelimit.fallback.active"), "nothing before the first call")

		// Three limiters on one Redis, each with its own breaker.
		for _, name := range []string{"per-ip", "per-route", "per-api-key"} {
			m.SetFallbackActive(name, false)
		}
		got := collect(t, reader)
		assert.Equal(t, "1", got["ratelimit.fallback.active"].Unit)
		_, isGauge := got["ratelimit.fallback.active"].Data.(metricdata.Gauge[int64])
		assert.True(t, isGauge)
		assert.Equal(t, map[string]int64{"ratelimit.limiter=per-ip": 0, "ratelimit.limiter=per-route": 0, "ratelimit.limiter=per-api-key": 0},
			int64Points(t, got, "ratelimit.fallback.active"))

		m.SetFallbackActive("per-ip", true)
		m.SetFallbackActive("per-route", true)
		assert.Equal(t, map[string]int64{"ratelimit.limiter=per-ip": 1, "ratelimit.limiter=per-route": 1, "ratelimit.limiter=per-api-key": 0},
			int64Points(t, collect(t, reader), "ratelimit.fallback.active"))
		m.SetFallbackActive("per-ip", false)
		assert.Equal(t, map[string]int64{"ratelimit.limiter=per-ip": 0, "ratelimit.limiter=per-route": 1, "ratelimit.limiter=per-api-key": 0},
			int64Points(t, collect(t, reader), "ratelimit.fallback.active"), "one limiter's breaker still open shows")
		assert.Equal(t, map[string]int64{"ratelimit.limiter=per-ip": 0, "ratelimit.limiter=per-route": 1, "ratelimit.limiter=per-api-key": 0},
			int64Points(t, collect(t, reader), "ratelimit.fallback.active"), "the state stays until it changes")
	})
}

func TestNew(t *testing.T) {
	t.Run("panics on boundaries that are not increasing and finite", func(t *testing.T) {
		for _, tc := range []struct {
			bounds []float64
			want   string
		}{
			{nil, "[]"},
			{[]float64{0.1, 0.1}, "[0.1 0.1]"},
			{[]float64{0.2, 0.1}, "[0.2 0.1]"},
			{[]float64{0.1, math.Inf(1)}, "[0.1 +Inf]"},
			{[]float64{math.NaN()}, "[NaN]"},
		} {
			assert.PanicsWithError(t, "otelhook: WithDurationBoundaries("+tc.want+"): the boundaries must be finite and increasing, at least one",
				func() { otelhook.WithDurationBoundaries(tc.bounds...) })
		}
	})

	t.Run("panics on a nil Option", func(t *testing.T) {
		assert.PanicsWithError(t, "otelhook: New: option 1 is nil", func() { _, _ = otelhook.New(sdkmetric.NewMeterProvider(), nil) })
	})

	t.Run("uses the global provider when given nil", func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer func() { _ = mp.Shutdown(context.Background()) }()
		prev := otel.GetMeterProvider()
		otel.SetMeterProvider(mp)
		defer otel.SetMeterProvider(prev)

		m, err := otelhook.New(nil)
		require.NoError(t, err)
		defer func() { _ = m.Close() }()
		m.Observe(event("api", nethttp.OutcomeDenied, core.SourceStore, time.Millisecond))
		assert.Equal(t, map[string]int64{"ratelimit.outcome=denied,ratelimit.policy=api,ratelimit.source=store": 1},
			requests(t, collect(t, reader)))
	})
}

func TestClose(t *testing.T) {
	t.Run("stops the callback and keeps counting requests", func(t *testing.T) {
		m, reader := newMetrics(t)
		m.WatchKeys("api", fakeLen(4))
		m.SetFallbackActive("redis", true)
		require.NoError(t, m.Close())
		require.NoError(t, m.Close(), "a second Close")
		m.Observe(event("api", nethttp.OutcomeAllowed, core.SourceStore, time.Millisecond))

		got := collect(t, reader)
		assert.Empty(t, int64Points(t, got, "ratelimit.keys"))
		assert.Empty(t, int64Points(t, got, "ratelimit.fallback.active"))
		assert.Equal(t, map[string]int64{"ratelimit.outcome=allowed,ratelimit.policy=api,ratelimit.source=store": 1},
			requests(t, got))
	})
}

func TestConcurrentUse(t *testing.T) {
	t.Run("counts exactly with many goroutines on new and known policies", func(t *testing.T) {
		m, reader := newMetrics(t)
		const goroutines, perG = 8, 500
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range perG {
					policy := "p" + strconv.Itoa(i%10)
					o := nethttp.Outcome(i % 2) // allowed, denied
					m.Observe(event(policy, o, core.SourceStore, time.Duration(1+i)*time.Microsecond))
					if i%50 == 0 {
						m.WatchKeys("g"+strconv.Itoa(g), fakeLen(i))
						m.SetFallbackActive("redis", i%100 == 0)
					}
				}
			})
		}
		wg.Go(func() {
			for range 20 {
				var rm metricdata.ResourceMetrics
				assert.NoError(t, reader.Collect(context.Background(), &rm))
			}
		})
		wg.Wait()

		got := requests(t, collect(t, reader))
		require.Len(t, got, 10)
		for p := range 10 {
			for _, o := range []string{"allowed", "denied"} {
				k := fmt.Sprintf("ratelimit.outcome=%s,ratelimit.policy=p%d,ratelimit.source=store", o, p)
				// Policy p gets i%10 == p; its outcome is i%2, which is p%2.
				want := int64(0)
				if (o == "allowed") == (p%2 == 0) {
					want = goroutines * perG / 10
				}
				if want == 0 {
					assert.NotContains(t, got, k)
				} else {
					assert.Equal(t, want, got[k], k)
				}
			}
		}
	})
}

// TestMiddleware runs requests through nethttp.Middleware with the hook.
func TestMiddleware(t *testing.T) {
	t.Run("counts what the middleware did with each request", func(t *testing.T) {
		m, reader := newMetrics(t)
		now := time.Unix(1_700_000_034, 0)
		lim, err := core.New(core.FixedWindow(2, time.Minute).WithName("per-ip"), core.WithClock(func() time.Time { return now }))
		require.NoError(t, err)
		defer lim.Close()
		m.WatchKeys(lim.Policy().Name, lim)
		h := nethttp.Middleware(lim, nethttp.WithHook(m.Observe))(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("ok"))
		}))

		serve := func(remote string) int {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.RemoteAddr = remote
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			return w.Code
		}
		codes := []int{
			serve("192.0.2.1:1000"), serve("192.0.2.1:1001"), serve("192.0.2.1:1002"), // 2 allowed, 1 denied
			serve("192.0.2.2:1000"), // another client
			serve("not an address"), // no key
		}
		assert.Equal(t, []int{200, 200, 429, 200, 400}, codes)

		got := collect(t, reader)
		assert.Equal(t, map[string]int64{
			"ratelimit.outcome=allowed,ratelimit.policy=per-ip,ratelimit.source=store":  3,
			"ratelimit.outcome=denied,ratelimit.policy=per-ip,ratelimit.source=store":   1,
			"ratelimit.outcome=key-error,ratelimit.policy=per-ip,ratelimit.source=none": 1, // no store asked
		}, requests(t, got))
		h4 := got["ratelimit.store.duration"].Data.(metricdata.Histogram[float64])
		require.Len(t, h4.DataPoints, 1)
		assert.Equal(t, uint64(4), h4.DataPoints[0].Count, "one latency per limiter call, none for the key error")
		assert.Equal(t, map[string]int64{"ratelimit.limiter=per-ip": 2}, int64Points(t, got, "ratelimit.keys"))
	})
}

// stubLimiter answers every call with its decision and error after a
// millisecond, as a remote store with a fallback would.
type stubLimiter struct {
	d   core.Decision
	err error
}

func (l stubLimiter) AllowN(context.Context, string, int64) (core.Decision, error) {
	time.Sleep(time.Millisecond)
	return l.d, l.err
}
func (l stubLimiter) Peek(context.Context, string) (core.Decision, error) { return l.d, l.err }
func (l stubLimiter) Reset(context.Context, string) error                 { return l.err }
func (l stubLimiter) Policy() core.Policy                                 { return l.d.Policy }

func TestMiddlewareFailuresAndSources(t *testing.T) {
	p := core.SlidingWindow(100, time.Minute).WithName("shared")
	serve := func(h http.Handler) int {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = "192.0.2.1:1000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

	t.Run("counts a store failure as failed-open or failed-closed with its latency", func(t *testing.T) {
		m, reader := newMetrics(t)
		down := stubLimiter{d: core.Decision{Limit: p.Limit, Policy: p}, err: errors.New("redis: connection refused")}
		assert.Equal(t, 200, serve(nethttp.Middleware(down, nethttp.WithHook(m.Observe))(ok)))
		assert.Equal(t, 503, serve(nethttp.Middleware(down, nethttp.WithHook(m.Observe), nethttp.WithFailClosed())(ok)))

		got := collect(t, reader)
		assert.Equal(t, map[string]int64{
			"ratelimit.outcome=failed-open,ratelimit.policy=shared,ratelimit.source=store":   1,
			"ratelimit.outcome=failed-closed,ratelimit.policy=shared,ratelimit.source=store": 1,
		}, requests(t, got))
		h := got["ratelimit.store.duration"].Data.(metricdata.Histogram[float64])
		require.Len(t, h.DataPoints, 1)
		assert.Equal(t, uint64(2), h.DataPoints[0].Count)
		assertAtLeast(t, 0.001, h.DataPoints[0].Min)
	})

	t.Run("counts a fallback's decisions under source fallback", func(t *testing.T) {
		m, reader := newMetrics(t)
		fb := stubLimiter{d: core.Decision{Allowed: true, Limit: p.Limit, Remaining: 7, Policy: p, Source: core.SourceFallback}}
		assert.Equal(t, 200, serve(nethttp.Middleware(fb, nethttp.WithHook(m.Observe))(ok)))
		assert.Equal(t, map[string]int64{
			"ratelimit.outcome=allowed,ratelimit.policy=shared,ratelimit.source=fallback": 1,
		}, requests(t, collect(t, reader)))
	})

	t.Run("counts denials served under WithDryRun as dry-run", func(t *testing.T) {
		m, reader := newMetrics(t)
		now := time.Unix(1_700_000_034, 0)
		lim, err := core.New(core.FixedWindow(1, time.Minute).WithName("dry"), core.WithClock(func() time.Time { return now }))
		require.NoError(t, err)
		defer lim.Close()
		h := nethttp.Middleware(lim, nethttp.WithHook(m.Observe), nethttp.WithDryRun())(ok)
		assert.Equal(t, []int{200, 200, 200}, []int{serve(h), serve(h), serve(h)})
		assert.Equal(t, map[string]int64{
			"ratelimit.outcome=allowed,ratelimit.policy=dry,ratelimit.source=store": 1,
			"ratelimit.outcome=dry-run,ratelimit.policy=dry,ratelimit.source=store": 2,
		}, requests(t, collect(t, reader)))
	})
}

func assertAtLeast(t *testing.T, least float64, e metricdata.Extrema[float64]) {
	t.Helper()
	v, ok := e.Value()
	require.True(t, ok)
	assert.GreaterOrEqual(t, v, least)
}

func BenchmarkObserve(b *testing.B) {
	ev := event("api", nethttp.OutcomeAllowed, core.SourceStore, 150*time.Microsecond)
	ev.Request = httptest.NewRequest(http.MethodGet, "/", nil)
	b.Run("provider=sdk", func(b *testing.B) {
		m, _ := newMetrics(b)
		b.ReportAllocs()
		for b.Loop() {
			m.Observe(ev)
		}
	})
	b.Run("provider=sdk/parallel", func(b *testing.B) {
		m, _ := newMetrics(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Observe(ev)
			}
		})
	})
	b.Run("provider=noop", func(b *testing.B) {
		m, err := otelhook.New(noop.NewMeterProvider())
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			m.Observe(ev)
		}
	})
}
