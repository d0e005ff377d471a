package otelhook

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// The scope, instruments and attributes, as the package documentation
// lists them.
const (
	scopeName          = "github.com/go-ratelimit/ratelimit/otelhook"
	requestsName       = "ratelimit.requests"
	storeDurationName  = "ratelimit.store.duration"
	keysName           = "ratelimit.keys"
	fallbackActiveName = "ratelimit.fallback.active"

	policyKey  = attribute.Key("ratelimit.policy")
	outcomeKey = attribute.Key("ratelimit.outcome")
	sourceKey  = attribute.Key("ratelimit.source")
	limiterKey = attribute.Key("ratelimit.limiter")
)

// DefaultDurationBoundaries are the bucket boundaries, in seconds, of the
// ratelimit.store.duration histogram: promhook's DefaultBuckets, 10 µs to
// 250 ms.
var DefaultDurationBoundaries = []float64{
	.00001, .000025, .00005, .0001, .00025, .0005,
	.001, .0025, .005, .01, .025, .05, .1, .25,
}

const (
	numOutcomes = int(nethttp.OutcomeSettleFailed) + 1
	// noSource is the index, after the core.Source values, of the requests
	// the limiter was not called for (key and cost errors, a failed policy
	// lookup), whose ratelimit.source is "none".
	noSource = int(core.SourceFallback) + 1
	// maxCachedPolicies bounds the cache of attribute sets: policies are
	// meant to be few (a plan, a route), but a WithPolicyFunc that builds
	// policies per client must not grow memory without bound. Beyond it,
	// sets are built per call (allocating).
	maxCachedPolicies = 1000
)

// Metrics records the middleware's events ([nethttp.Event]) as OpenTelemetry
// metrics: add [Metrics.Observe] to any number of middlewares with
// nethttp.WithHook. It is safe for concurrent use.
type Metrics struct {
	requests metric.Int64Counter
	duration metric.Float64Histogram
	keys     metric.Int64ObservableUpDownCounter
	fallback metric.Int64ObservableGauge
	reg      metric.Registration

	// attrs maps a policy to its *policyAttrs; nattrs counts them, at
	// most maxCachedPolicies.
	attrs  sync.Map
	nattrs atomic.Int64

	mu       sync.Mutex
	watched  map[string]watch
	limiters map[string]fallbackState // SetFallbackActive's, by limiter
	closed   bool
	closeErr error
}

// policyAttrs are the measurement options of one policy, built once so that
// Observe allocates nothing for them.
type policyAttrs struct {
	add [numOutcomes][noSource + 1][]metric.AddOption
	rec []metric.RecordOption
}

type watch struct {
	lim interface{ Len() int }
	opt []metric.ObserveOption
}

type fallbackState struct {
	active bool
	opt    []metric.ObserveOption
}

// New creates the instruments on a meter of mp named after this package; a
// nil mp means the global provider, even one set later with
// otel.SetMeterProvider. It returns an error if an instrument cannot be
// created, and panics on a nil Option.
func New(mp metric.MeterProvider, opts ...Option) (*Metrics, error) {
	c := config{bounds: DefaultDurationBoundaries}
	for i, o := range opts {
		if o == nil {
			panic(fmt.Errorf("otelhook: New: option %d is nil", i+1))
		}
		o(&c)
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(scopeName)
	m := &Metrics{watched: map[string]watch{}, limiters: map[string]fallbackState{}}
	var errs [5]error
	m.requests, errs[0] = meter.Int64Counter(requestsName,
		metric.WithUnit("{request}"),
		metric.WithDescription("Requests decided by the rate-limiting middleware, by policy, outcome and decision source."))
	m.duration, errs[1] = meter.Float64Histogram(storeDurationName,
		metric.WithUnit("s"),
		metric.WithDescription("Duration of the rate limiter's calls (the store's round trip), by policy."),
		metric.WithExplicitBucketBoundaries(c.bounds...))
	m.keys, errs[2] = meter.Int64ObservableUpDownCounter(keysName,
		metric.WithUnit("{key}"),
		metric.WithDescription("Keys held by the watched in-memory rate limiters."))
	m.fallback, errs[3] = meter.Int64ObservableGauge(fallbackActiveName,
		metric.WithUnit("1"),
		metric.WithDescription("1 while a rate limiter's store is decided by its local fallback, 0 otherwise, by limiter."))
	if err := errors.Join(errs[:4]...); err != nil {
		return nil, err
	}
	m.reg, errs[4] = meter.RegisterCallback(m.observe, m.keys, m.fallback)
	if errs[4] != nil {
		return nil, errs[4]
	}
	return m, nil
}

// Observe records ev, with the request's context (exemplars link the
// measurements to its trace). For a policy seen before it allocates nothing
// of its own.
func (m *Metrics) Observe(ev nethttp.Event) {
	ctx := context.Background()
	if ev.Request != nil {
		ctx = ev.Request.Context()
	}
	p := ev.Decision.Policy
	pa := m.policy(p)
	o, s := int(ev.Outcome), int(ev.Decision.Source)
	if !ev.LimiterCalled {
		s = noSource
	}
	if pa != nil && o < numOutcomes && s <= noSource {
		m.requests.Add(ctx, 1, pa.add[o][s]...)
	} else {
		m.requests.Add(ctx, 1, metric.WithAttributeSet(requestSet(p.Label(), ev.Outcome, sourceName(s))))
	}
	if ev.LimiterCalled {
		if pa != nil {
			m.duration.Record(ctx, ev.Latency.Seconds(), pa.rec...)
		} else {
			m.duration.Record(ctx, ev.Latency.Seconds(), metric.WithAttributeSet(attribute.NewSet(policyKey.String(p.Label()))))
		}
	}
}

// policy returns the options of p, building them on first use; nil once
// maxCachedPolicies other policies are cached.
func (m *Metrics) policy(p core.Policy) *policyAttrs {
	if pa, ok := m.attrs.Load(p); ok {
		return pa.(*policyAttrs)
	}
	if m.nattrs.Add(1) > maxCachedPolicies {
		return nil // full: the count stays above the bound
	}
	name := p.Label()
	pa := &policyAttrs{rec: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(policyKey.String(name)))}}
	for o := range numOutcomes {
		for s := range noSource + 1 {
			set := requestSet(name, nethttp.Outcome(o), sourceName(s))
			pa.add[o][s] = []metric.AddOption{metric.WithAttributeSet(set)}
		}
	}
	kept, loaded := m.attrs.LoadOrStore(p, pa)
	if loaded {
		m.nattrs.Add(-1)
	}
	return kept.(*policyAttrs)
}

func requestSet(policy string, o nethttp.Outcome, source string) attribute.Set {
	return attribute.NewSet(policyKey.String(policy), outcomeKey.String(o.String()), sourceKey.String(source))
}

// sourceName is the ratelimit.source of s, a core.Source or noSource.
func sourceName(s int) string {
	if s == noSource {
		return "none"
	}
	return core.Source(s).String()
}

// WatchKeys reports lim.Len() (for a *core.MemoryLimiter, the keys it
// holds) at every collection as ratelimit.keys{ratelimit.limiter=name}.
// Watching a name again replaces its limiter. It panics on a nil lim.
func (m *Metrics) WatchKeys(name string, lim interface{ Len() int }) {
	if lim == nil {
		panic(fmt.Errorf("otelhook: WatchKeys(%q): nil limiter", name))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.watched[name] = watch{lim: lim, opt: []metric.ObserveOption{
		metric.WithAttributeSet(attribute.NewSet(limiterKey.String(name))),
	}}
}

// UnwatchKeys stops reporting the limiter watched as name (one that is
// closed, say).
func (m *Metrics) UnwatchKeys(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.watched, name)
}

// SetFallbackActive sets ratelimit.fallback.active{ratelimit.limiter=limiter}
// to 1 while the store of the limiter named limiter is decided by its local
// fallback, else 0: one series per limiter, as each has its own breaker.
// otelhook does not import redisstore: call it from each limiter's breaker
// hook, which names the limiter by its policy:
//
//	redisstore.WithBreakerHook(func(c redisstore.BreakerChange) {
//		m.SetFallbackActive(c.Policy.Label(), c.To != redisstore.BreakerClosed)
//	})
//
// A limiter is reported from its first call on: call it with false at
// startup (m.SetFallbackActive(policy.Label(), false)) for a series that
// starts at 0.
func (m *Metrics) SetFallbackActive(limiter string, active bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.limiters[limiter]
	if !ok {
		st.opt = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(limiterKey.String(limiter)))}
	}
	st.active = active
	m.limiters[limiter] = st
}

// observe is the callback of the asynchronous instruments. It copies what
// it reports under the lock and calls Len outside it.
func (m *Metrics) observe(_ context.Context, obs metric.Observer) error {
	m.mu.Lock()
	watched := slices.Collect(maps.Values(m.watched))
	limiters := slices.Collect(maps.Values(m.limiters))
	m.mu.Unlock()
	for _, w := range watched {
		obs.ObserveInt64(m.keys, int64(w.lim.Len()), w.opt...)
	}
	for _, st := range limiters {
		v := int64(0)
		if st.active {
			v = 1
		}
		obs.ObserveInt64(m.fallback, v, st.opt...)
	}
	return nil
}

// Close stops the asynchronous instruments' callback: ratelimit.keys and
// ratelimit.fallback.active are no longer reported, and the watched
// limiters are released. Observe still records. Calling Close again
// returns the first call's result.
func (m *Metrics) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.closed = true
		m.closeErr = m.reg.Unregister()
		clear(m.watched)
	}
	return m.closeErr
}
