package promhook_test

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/promhook"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// registered returns new Metrics registered on a pedantic registry, which
// also checks that Collect agrees with Describe.
func registered(t testing.TB, opts ...promhook.Option) (*promhook.Metrics, *prometheus.Registry) {
	t.Helper()
	m := promhook.New(opts...)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	return m, reg
}

// series gathers reg and returns the metrics of the family name, by their
// labels rendered as `a="x",b="y"` in label-name order.
func series(t testing.TB, reg prometheus.Gatherer, name string) map[string]*dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]*dto.Metric{}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+`"`+l.GetValue()+`"`)
			}
			out[strings.Join(labels, ",")] = m
		}
	}
	return out
}

// counts returns the value of every series of the counter or gauge name.
func counts(t testing.TB, reg prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for labels, m := range series(t, reg, name) {
		switch {
		case m.Counter != nil:
			out[labels] = m.GetCounter().GetValue()
		case m.Gauge != nil:
			out[labels] = m.GetGauge().GetValue()
		default:
			t.Fatalf("%s{%s} is neither a counter nor a gauge", name, labels)
		}
	}
	return out
}

// samples returns the sample count and sum of every series of the
// histogram name.
func samples(t testing.TB, reg prometheus.Gatherer, name string) (map[string]uint64, map[string]float64) {
	t.Helper()
	n, sum := map[string]uint64{}, map[string]float64{}
	for labels, m := range series(t, reg, name) {
		require.NotNil(t, m.Histogram, "%s{%s}", name, labels)
		n[labels] = m.GetHistogram().GetSampleCount()
		sum[labels] = m.GetHistogram().GetSampleSum()
	}
	return n, sum
}

var (
	perIP  = core.TokenBucket(10, time.Second).WithName("per-ip")
	perKey = core.FixedWindow(1000, time.Hour).WithName("per-api-key")
)

// memory returns an in-memory limiter of p, closed when the test ends.
func memory(t testing.TB, p core.Policy, opts ...core.Option) *core.MemoryLimiter {
	t.Helper()
	lim, err := core.New(p, append([]core.Option{core.WithSweepInterval(time.Hour)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, lim.Close()) })
	return lim
}

func event(p core.Policy, o nethttp.Outcome, src core.Source, latency time.Duration) nethttp.Event {
	return nethttp.Event{
		Key:      "203.0.113.7",
		Cost:     1,
		Outcome:  o,
		Decision: core.Decision{Allowed: o == nethttp.OutcomeAllowed, Limit: p.Limit, Policy: p, Source: src},
		Latency:  latency,
		// As the middleware sets it: for every decision, and for a
		// failure that took time (none: a failed WithPolicyFunc lookup).
		LimiterCalled: o == nethttp.OutcomeAllowed || o == nethttp.OutcomeDenied || o == nethttp.OutcomeDryRun || latency > 0,
	}
}

func TestObserveCountsEachPolicyOutcomeAndSource(t *testing.T) {
	m, reg := registered(t)
	for range 5 {
		m.Observe(event(perIP, nethttp.OutcomeAllowed, core.SourceStore, time.Millisecond))
	}
	for range 3 {
		m.Observe(event(perIP, nethttp.OutcomeDenied, core.SourceStore, time.Millisecond))
	}
	for range 4 {
		m.Observe(event(perIP, nethttp.OutcomeDenied, core.SourceDenyCache, time.Microsecond))
	}
	m.Observe(event(perIP, nethttp.OutcomeAllowed, core.SourceFallback, 0))
	m.Observe(event(perKey, nethttp.OutcomeDryRun, core.SourceStore, time.Millisecond))
	failed := event(perKey, nethttp.OutcomeFailedOpen, core.SourceStore, 50*time.Millisecond)
	failed.Err = errors.New("redis down")
	m.Observe(failed)
	m.Observe(event(perKey, nethttp.OutcomeFailedClosed, core.SourceStore, 50*time.Millisecond))
	m.Observe(event(perKey, nethttp.OutcomeCanceled, core.SourceStore, 2*time.Millisecond))
	m.Observe(event(perKey, nethttp.OutcomeSettleFailed, core.SourceStore, 3*time.Millisecond))
	m.Observe(event(perKey, nethttp.OutcomeKeyError, core.SourceStore, 0))
	m.Observe(event(perKey, nethttp.OutcomeCostError, core.SourceStore, 0))

	assert.Equal(t, map[string]float64{
		`outcome="allowed",policy="per-ip",source="store"`:            5,
		`outcome="denied",policy="per-ip",source="store"`:             3,
		`outcome="denied",policy="per-ip",source="deny-cache"`:        4,
		`outcome="allowed",policy="per-ip",source="fallback"`:         1,
		`outcome="dry-run",policy="per-api-key",source="store"`:       1,
		`outcome="failed-open",policy="per-api-key",source="store"`:   1,
		`outcome="failed-closed",policy="per-api-key",source="store"`: 1,
		`outcome="canceled",policy="per-api-key",source="store"`:      1,
		`outcome="settle-failed",policy="per-api-key",source="store"`: 1,
		`outcome="key-error",policy="per-api-key",source="none"`:      1,
		`outcome="cost-error",policy="per-api-key",source="none"`:     1,
	}, counts(t, reg, "ratelimit_requests_total"))

	n, sum := samples(t, reg, "ratelimit_store_duration_seconds")
	assert.Equal(t, map[string]uint64{
		`policy="per-ip"`:      13, // every decision, the fallback's 0 included
		`policy="per-api-key"`: 5,  // dry-run, two failures, canceled, the settle call; not the key and cost errors
	}, n)
	assert.InDelta(t, 8*0.001+4*0.000001, sum[`policy="per-ip"`], 1e-12)
	assert.InDelta(t, 0.001+0.05+0.05+0.002+0.003, sum[`policy="per-api-key"`], 1e-12)
}

func TestObserveLabelsUnnamedPoliciesAsTheMiddlewareNamesThem(t *testing.T) {
	m, reg := registered(t)
	m.Observe(event(core.TokenBucket(100, time.Minute), nethttp.OutcomeAllowed, core.SourceStore, time.Microsecond))
	m.Observe(event(core.SlidingWindow(5, 1500*time.Millisecond), nethttp.OutcomeDenied, core.SourceStore, time.Microsecond))
	// The zero policy: nothing was known about the request's policy.
	m.Observe(nethttp.Event{Outcome: nethttp.OutcomeKeyError})

	assert.Equal(t, map[string]float64{
		`outcome="allowed",policy="tokenbucket-100-per-60s",source="store"`: 1,
		`outcome="denied",policy="slidingwindow-5-per-1.5s",source="store"`: 1,
		`outcome="key-error",policy="",source="none"`:                       1,
	}, counts(t, reg, "ratelimit_requests_total"))
	n, _ := samples(t, reg, "ratelimit_store_duration_seconds")
	assert.Equal(t, map[string]uint64{
		`policy="tokenbucket-100-per-60s"`:  1,
		`policy="slidingwindow-5-per-1.5s"`: 1,
	}, n, "no empty histogram for the key error's policy")
}

func TestObserveSharesSeriesBetweenPoliciesOfOneName(t *testing.T) {
	m, reg := registered(t)
	// Two policies of one plan, say before and after a configuration
	// change: one series.
	m.Observe(event(core.TokenBucket(100, time.Minute).WithName("free"), nethttp.OutcomeAllowed, core.SourceStore, time.Microsecond))
	m.Observe(event(core.TokenBucket(200, time.Minute).WithName("free"), nethttp.OutcomeAllowed, core.SourceStore, time.Microsecond))

	assert.Equal(t, map[string]float64{`outcome="allowed",policy="free",source="store"`: 2},
		counts(t, reg, "ratelimit_requests_total"))
	n, _ := samples(t, reg, "ratelimit_store_duration_seconds")
	assert.Equal(t, map[string]uint64{`policy="free"`: 2}, n)
}

func TestObserveNeverLabelsTheKey(t *testing.T) {
	m, reg := registered(t)
	m.WatchKeys("per-ip", memory(t, perIP))
	m.SetFallbackActive("redis", true)
	for _, o := range []nethttp.Outcome{nethttp.OutcomeAllowed, nethttp.OutcomeDenied, nethttp.OutcomeFailedOpen} {
		e := event(perIP, o, core.SourceStore, time.Millisecond)
		e.Key = "secret-api-key"
		m.Observe(e)
	}
	families, err := reg.Gather()
	require.NoError(t, err)
	labels := map[string][]string{}
	for _, mf := range families {
		for _, mt := range mf.GetMetric() {
			var names []string
			for _, l := range mt.GetLabel() {
				names = append(names, l.GetName())
				assert.NotContains(t, l.GetValue(), "secret", "%s{%s}", mf.GetName(), l.GetName())
			}
			labels[mf.GetName()] = names
		}
	}
	assert.Equal(t, map[string][]string{
		"ratelimit_requests_total":         {"outcome", "policy", "source"},
		"ratelimit_store_duration_seconds": {"policy"},
		"ratelimit_keys":                   {"limiter"},
		"ratelimit_fallback_active":        {"limiter"},
	}, labels)
}

// TestObserveOutOfRangeValues: an Outcome or Source added to nethttp or
// core after this package is still counted, under its String.
func TestObserveOutOfRangeValues(t *testing.T) {
	m, reg := registered(t)
	m.Observe(event(perIP, nethttp.Outcome(200), core.SourceStore, time.Millisecond))
	m.Observe(event(perIP, nethttp.OutcomeAllowed, core.Source(9), time.Millisecond))
	m.Observe(event(perIP, nethttp.OutcomeAllowed, core.Source(9), time.Millisecond))
	assert.Equal(t, map[string]float64{
		`outcome="Outcome(200)",policy="per-ip",source="store"`: 1,
		`outcome="allowed",policy="per-ip",source="Source(9)"`:  2,
	}, counts(t, reg, "ratelimit_requests_total"))
}

func TestObserveConcurrently(t *testing.T) {
	m, reg := registered(t)
	const goroutines, each = 8, 1000
	policies := []core.Policy{perIP, perKey, core.LeakyBucket(10, time.Second)}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				p := policies[(g+i)%len(policies)]
				m.Observe(event(p, nethttp.Outcome(i%2), core.Source(i%3), time.Microsecond))
			}
		})
	}
	// Scrapes and registrations meanwhile.
	lims := []*core.MemoryLimiter{memory(t, perIP), memory(t, perKey)}
	wg.Go(func() {
		for i := range 20 {
			m.WatchKeys("k", lims[i%2])
			m.SetFallbackActive("redis", i%2 == 0)
			_, err := reg.Gather()
			assert.NoError(t, err)
		}
	})
	wg.Wait()

	var total float64
	for _, v := range counts(t, reg, "ratelimit_requests_total") {
		total += v
	}
	assert.Equal(t, float64(goroutines*each), total)
	n, _ := samples(t, reg, "ratelimit_store_duration_seconds")
	var observed uint64
	for _, v := range n {
		observed += v
	}
	assert.Equal(t, uint64(goroutines*each), observed)
	assert.Len(t, n, len(policies))
}

func TestWatchKeysReadsTheLimiterAtEachScrape(t *testing.T) {
	m, reg := registered(t)
	now := time.Unix(1_700_000_000, 0)
	lim := memory(t, perIP, core.WithClock(func() time.Time { return now }))
	other := memory(t, perKey, core.WithClock(func() time.Time { return now }))

	m.WatchKeys("per-ip", lim)
	assert.Equal(t, map[string]float64{`limiter="per-ip"`: 0}, counts(t, reg, "ratelimit_keys"))

	ctx := t.Context()
	for _, key := range []string{"a", "b", "c", "a"} {
		_, err := lim.Allow(ctx, key)
		require.NoError(t, err)
	}
	_, err := other.Allow(ctx, "x")
	require.NoError(t, err)
	m.WatchKeys("per-api-key", other)
	assert.Equal(t, map[string]float64{`limiter="per-ip"`: 3, `limiter="per-api-key"`: 1},
		counts(t, reg, "ratelimit_keys"))

	require.NoError(t, lim.Reset(ctx, "b"))
	assert.Equal(t, map[string]float64{`limiter="per-ip"`: 2, `limiter="per-api-key"`: 1},
		counts(t, reg, "ratelimit_keys"))

	// Watching a name again replaces the limiter; UnwatchKeys removes it.
	m.WatchKeys("per-ip", other)
	m.UnwatchKeys("per-api-key")
	m.UnwatchKeys("never-watched")
	assert.Equal(t, map[string]float64{`limiter="per-ip"`: 1}, counts(t, reg, "ratelimit_keys"))

	assert.PanicsWithError(t, `promhook: WatchKeys("nil"): nil limiter`, func() { m.WatchKeys("nil", nil) })
}

func TestSetFallbackActive(t *testing.T) {
	m, reg := registered(t)
	assert.Empty(t, counts(t, reg, "ratelimit_fallback_active"))

	// Three limiters on one Redis, each with its own breaker: one series
	// each, so that one still open shows while the others have closed.
	for _, name := range []string{"per-ip", "per-route", "per-api-key"} {
		m.SetFallbackActive(name, false)
	}
	assert.Equal(t, map[string]float64{`limiter="per-ip"`: 0, `limiter="per-route"`: 0, `limiter="per-api-key"`: 0},
		counts(t, reg, "ratelimit_fallback_active"))
	m.SetFallbackActive("per-ip", true)
	m.SetFallbackActive("per-route", true)
	m.SetFallbackActive("per-ip", false)
	assert.Equal(t, map[string]float64{`limiter="per-ip"`: 0, `limiter="per-route"`: 1, `limiter="per-api-key"`: 0},
		counts(t, reg, "ratelimit_fallback_active"))
}

func TestOptions(t *testing.T) {
	m, reg := registered(t, promhook.WithNamespace("myapp"), promhook.WithBuckets(0.001, 0.01))
	m.Observe(event(perIP, nethttp.OutcomeAllowed, core.SourceStore, 5*time.Millisecond))
	m.Observe(event(perIP, nethttp.OutcomeAllowed, core.SourceStore, 50*time.Millisecond))
	m.SetFallbackActive("redis", false)
	m.WatchKeys("per-ip", memory(t, perIP))

	assert.Equal(t, map[string]float64{`outcome="allowed",policy="per-ip",source="store"`: 2},
		counts(t, reg, "myapp_requests_total"))
	assert.Len(t, counts(t, reg, "myapp_keys"), 1)
	assert.Len(t, counts(t, reg, "myapp_fallback_active"), 1)
	h := series(t, reg, "myapp_store_duration_seconds")[`policy="per-ip"`].GetHistogram()
	require.Len(t, h.GetBucket(), 2)
	assert.Equal(t, 0.001, h.GetBucket()[0].GetUpperBound())
	assert.Equal(t, uint64(0), h.GetBucket()[0].GetCumulativeCount())
	assert.Equal(t, 0.01, h.GetBucket()[1].GetUpperBound())
	assert.Equal(t, uint64(1), h.GetBucket()[1].GetCumulativeCount())
	assert.Equal(t, uint64(2), h.GetSampleCount())

	// Two Metrics of one namespace collide on one registry; another
	// namespace does not.
	require.Error(t, reg.Register(promhook.New(promhook.WithNamespace("myapp"))))
	require.NoError(t, reg.Register(promhook.New()))

	_, reg = registered(t, promhook.WithNamespace(""))
	assert.Empty(t, counts(t, reg, "requests_total"))

	assert.PanicsWithError(t, "promhook: WithBuckets([]): the bounds must be increasing, at least one", func() { promhook.WithBuckets() })
	assert.PanicsWithError(t, "promhook: WithBuckets([0.1 0.1]): the bounds must be increasing, at least one", func() { promhook.WithBuckets(0.1, 0.1) })
	assert.PanicsWithError(t, "promhook: WithBuckets([0.2 0.1]): the bounds must be increasing, at least one", func() { promhook.WithBuckets(0.2, 0.1) })
	assert.PanicsWithError(t, "promhook: WithBuckets([NaN]): the bounds must be increasing, at least one", func() { promhook.WithBuckets(math.NaN()) })
	assert.PanicsWithError(t, "promhook: New: option 2 is nil", func() { promhook.New(promhook.WithNamespace("x"), nil) })
}

// TestMetricNamesFollowConventions runs Prometheus's own linter (promlint)
// on every family.
func TestMetricNamesFollowConventions(t *testing.T) {
	m, reg := registered(t)
	m.Observe(event(perIP, nethttp.OutcomeDenied, core.SourceDenyCache, time.Microsecond))
	m.WatchKeys("per-ip", memory(t, perIP))
	m.SetFallbackActive("redis", false)
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
	assert.Equal(t, 4, testutil.CollectAndCount(m))
}
