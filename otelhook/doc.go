// Package otelhook records the rate-limiting middleware's decisions as
// OpenTelemetry metrics, through the metrics API: any SDK or exporter the
// program configures receives them.
//
//	m, err := otelhook.New(meterProvider) // nil: otel.GetMeterProvider()
//	if err != nil {
//		log.Fatal(err)
//	}
//	mux := nethttp.Middleware(lim, nethttp.WithHook(m.Observe))(handler)
//	m.WatchKeys(lim.Policy().Name, lim) // an in-memory limiter's keys
//
// The instruments, on the meter named [ScopeName]:
//
//   - ratelimit.requests (counter, {request}): every request decided, by
//     ratelimit.policy, ratelimit.outcome and ratelimit.source.
//   - ratelimit.store.duration (histogram, s): the limiter's call, by
//     ratelimit.policy, when the limiter was called.
//   - ratelimit.keys (asynchronous up-down counter, {key}): the keys of the
//     limiters given to [Metrics.WatchKeys].
//   - ratelimit.fallback.active (asynchronous gauge, 1): 1 while a store is
//     decided by its fallback, as reported by [Metrics.SetFallbackActive].
//
// The request's key (a client's IP address, an API key) is never an
// attribute; policy names are, so keep them few (a plan, a route, never one
// per client).
package otelhook
