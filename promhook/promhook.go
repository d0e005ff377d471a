package promhook

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// DefaultNamespace is the prefix of the metric names without WithNamespace.
const DefaultNamespace = "ratelimit"

// DefaultBuckets are the upper bounds, in seconds, of the latency
// histogram's buckets without WithBuckets: 10µs to 250ms.
var DefaultBuckets = []float64{
	.00001, .000025, .00005, .0001, .00025, .0005,
	.001, .0025, .005, .01, .025, .05, .1, .25,
}

// Option configures [New]. An option given an invalid value panics, naming
// itself: a mistake in the program, reported where it is made.
type Option func(*config)

type config struct {
	namespace string
	buckets   []float64
}

// WithNamespace sets the prefix of the metric names ("myapp" gives
// myapp_requests_total; "" none). An invalid prefix makes registering the
// Metrics fail.
func WithNamespace(ns string) Option {
	return func(c *config) { c.namespace = ns }
}

// WithBuckets sets the upper bounds, in seconds, of the latency
// histogram's buckets (prometheus.ExponentialBuckets builds them). It
// panics unless at least one is given and they are increasing.
func WithBuckets(upper ...float64) Option {
	if !increasing(upper) {
		panic(fmt.Errorf("promhook: WithBuckets(%v): the bounds must be increasing, at least one", upper))
	}
	upper = slices.Clone(upper)
	return func(c *config) { c.buckets = upper }
}

func increasing(upper []float64) bool {
	for i, b := range upper {
		if math.IsNaN(b) || i > 0 && b <= upper[i-1] {
			return false
		}
	}
	return len(upper) > 0
}

// Metrics is a prometheus.Collector of the metrics of the package
// documentation: register it once and pass m.Observe to nethttp.WithHook on
// every middleware it should count. It is safe for concurrent use.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	fallback *prometheus.GaugeVec
	keysDesc *prometheus.Desc

	// series maps a seriesKey to the *series of each policy seen.
	series sync.Map

	mu      sync.Mutex
	watched map[string]interface{ Len() int } // under mu
}

// seriesKey finds the series of a policy: a named policy by its name, so
// that policies of one name (a plan whose limits differ per client) share
// one entry, and an unnamed one by its value, whose label is derived from
// it.
type seriesKey struct {
	name    string
	unnamed core.Policy
}

// series holds the metrics of one policy, bound to its label values, so
// that Observe neither builds label values nor looks them up in the vectors.
type series struct {
	policy   string
	latency  atomic.Pointer[prometheus.Observer] // nil until observed
	counters [numOutcomes][noSource + 1]atomic.Pointer[prometheus.Counter]
}

const (
	numOutcomes = int(nethttp.OutcomeSettleFailed) + 1
	// noSource is the index, after the core.Source values, of the requests
	// the limiter was not called for (key and cost errors, a failed policy
	// lookup), labelled source="none".
	noSource = int(core.SourceFallback) + 1
)

// New returns Metrics with nothing counted yet. It panics on a nil Option.
func New(opts ...Option) *Metrics {
	c := config{namespace: DefaultNamespace, buckets: DefaultBuckets}
	for i, o := range opts {
		if o == nil {
			panic(fmt.Errorf("promhook: New: option %d is nil", i+1))
		}
		o(&c)
	}
	return &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: c.namespace,
			Name:      "requests_total",
			Help: "Requests decided by the rate limiter, by policy name, outcome (allowed, denied, dry-run, " +
				"failed-open, failed-closed, key-error, cost-error, canceled, settle-failed) and source of the decision " +
				"(store, deny-cache, fallback; none when the limiter was not called).",
		}, []string{"policy", "outcome", "source"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: c.namespace,
			Name:      "store_duration_seconds",
			Help:      "Time the limiter took to answer a request (the store's round trip), in seconds, by policy name.",
			Buckets:   c.buckets,
		}, []string{"policy"}),
		fallback: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: c.namespace,
			Name:      "fallback_active",
			Help:      "1 while a limiter's store is decided by its local fallback (circuit breaker open or half-open), 0 otherwise, by limiter.",
		}, []string{"limiter"}),
		keysDesc: prometheus.NewDesc(prometheus.BuildFQName(c.namespace, "", "keys"),
			"Keys held in memory by an in-memory limiter.", []string{"limiter"}, nil),
		watched: make(map[string]interface{ Len() int }),
	}
}

// Observe counts one request: pass it to nethttp.WithHook. It allocates only
// the first time a policy, outcome and source are seen together.
func (m *Metrics) Observe(e nethttp.Event) {
	s := m.seriesFor(e.Decision.Policy)
	src, label := int(e.Decision.Source), e.Decision.Source.String()
	if !e.LimiterCalled {
		src, label = noSource, "none"
	}
	m.counter(s, e.Outcome, src, label).Inc()
	if e.LimiterCalled {
		m.observer(s).Observe(e.Latency.Seconds())
	}
}

// seriesFor returns the metrics of policy p, creating them the first time.
func (m *Metrics) seriesFor(p core.Policy) *series {
	k := seriesKey{name: p.Name}
	if p.Name == "" {
		k.unnamed = p
	}
	if s, ok := m.series.Load(k); ok {
		return s.(*series)
	}
	s, _ := m.series.LoadOrStore(k, &series{policy: p.Label()})
	return s.(*series)
}

// counter returns the requests_total counter of s's policy, outcome o and
// source src (a core.Source, or noSource), labelled source.
func (m *Metrics) counter(s *series, o nethttp.Outcome, src int, source string) prometheus.Counter {
	if int(o) >= numOutcomes || src > noSource {
		return m.requests.WithLabelValues(s.policy, o.String(), source)
	}
	slot := &s.counters[o][src]
	if c := slot.Load(); c != nil {
		return *c
	}
	// Two goroutines may both get here: WithLabelValues returns the same
	// child to both.
	c := m.requests.WithLabelValues(s.policy, o.String(), source)
	slot.Store(&c)
	return c
}

// observer returns the latency histogram of s's policy. It is created on
// the first observation, so that a policy seen only in key errors has no
// empty histogram.
func (m *Metrics) observer(s *series) prometheus.Observer {
	if o := s.latency.Load(); o != nil {
		return *o
	}
	o := m.latency.WithLabelValues(s.policy)
	s.latency.Store(&o)
	return o
}

// WatchKeys reports lim.Len() (for a *core.MemoryLimiter, the keys it
// holds), read at every scrape, as ratelimit_keys{limiter=name}. Watching a
// name again replaces its limiter. It panics on a nil lim.
func (m *Metrics) WatchKeys(name string, lim interface{ Len() int }) {
	if lim == nil {
		panic(fmt.Errorf("promhook: WatchKeys(%q): nil limiter", name))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.watched[name] = lim
}

// UnwatchKeys stops reporting the limiter watched as name (one that is
// closed, say).
func (m *Metrics) UnwatchKeys(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.watched, name)
}

// SetFallbackActive sets ratelimit_fallback_active{limiter} to 1 while the
// store of the limiter named limiter is decided by its local fallback, else
// 0: one series per limiter, as each has its own breaker. promhook does not
// import redisstore: call it from each limiter's breaker hook, which names
// the limiter by its policy, and once at startup so that the series exists
// before the first change:
//
//	m.SetFallbackActive(policy.Label(), false)
//	lim, err := redisstore.New(rdb, policy, redisstore.WithBreakerHook(func(c redisstore.BreakerChange) {
//		m.SetFallbackActive(c.Policy.Label(), c.To != redisstore.BreakerClosed)
//	}))
func (m *Metrics) SetFallbackActive(limiter string, active bool) {
	v := 0.0
	if active {
		v = 1
	}
	m.fallback.WithLabelValues(limiter).Set(v)
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.requests.Describe(ch)
	m.latency.Describe(ch)
	m.fallback.Describe(ch)
	ch <- m.keysDesc
}

// Collect implements prometheus.Collector. It calls Len on every watched
// limiter.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.requests.Collect(ch)
	m.latency.Collect(ch)
	m.fallback.Collect(ch)

	m.mu.Lock()
	watched := maps.Clone(m.watched)
	m.mu.Unlock()
	for name, lim := range watched {
		ch <- prometheus.MustNewConstMetric(m.keysDesc, prometheus.GaugeValue, float64(lim.Len()), name)
	}
}

var _ prometheus.Collector = (*Metrics)(nil)
