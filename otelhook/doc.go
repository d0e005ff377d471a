// Package otelhook records the rate-limiting middleware's decisions as
// OpenTelemetry metrics through the metrics API, for whatever SDK and
// exporter the program configures. It measures what promhook measures.
//
//	m, err := otelhook.New(meterProvider) // nil: otel.GetMeterProvider()
//	if err != nil {
//		log.Fatal(err)
//	}
//	m.WatchKeys("per-ip", lim) // an in-memory limiter's keys
//	h := nethttp.Middleware(lim, nethttp.WithHook(m.Observe))(mux)
//
// The instruments, on the meter named [ScopeName]:
//
//   - ratelimit.requests (counter, {request}): every request the middleware
//     did not skip, by ratelimit.policy, ratelimit.outcome
//     (nethttp.Outcome.String) and ratelimit.source (core.Source.String).
//   - ratelimit.store.duration (histogram, s): Event.Latency, by
//     ratelimit.policy, for every request where the limiter was called.
//   - ratelimit.keys (asynchronous up-down counter, {key}): the keys of the
//     limiters given to [Metrics.WatchKeys], by ratelimit.limiter.
//   - ratelimit.fallback.active (asynchronous gauge, 1): 1 while a store's
//     fallback decides in its place, by ratelimit.store, as set with
//     [Metrics.SetFallbackActive] from redisstore's WithBreakerHook hook.
//
// No semantic convention covers rate limiting but ASP.NET Core's own, so
// the names follow the general rules. ratelimit.policy is the policy's name
// (or the one the RateLimit-Policy header gives an unnamed policy): keep
// policies few, never one per client. The request's key (an IP address, an
// API key) is never an attribute.
package otelhook
