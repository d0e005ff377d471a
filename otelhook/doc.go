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
// The instruments, on the meter named after this package's import path,
// github.com/go-ratelimit/ratelimit/otelhook:
//
//   - ratelimit.requests (counter, {request}): every request the middleware
//     did not skip, by ratelimit.policy, ratelimit.outcome
//     ([nethttp.Outcome.String]) and ratelimit.source ([core.Source.String];
//     "none" when the limiter was not called, [nethttp.Event].LimiterCalled
//     false: key and cost errors, a failed policy lookup).
//   - ratelimit.store.duration (histogram, s): Event.Latency, by
//     ratelimit.policy, for every request where the limiter was called.
//   - ratelimit.keys (asynchronous up-down counter, {key}, so that the keys
//     of several limiters or servers add up): [Metrics.WatchKeys], by
//     ratelimit.limiter.
//   - ratelimit.fallback.active (asynchronous gauge, 1):
//     [Metrics.SetFallbackActive], one series per limiter, by
//     ratelimit.limiter.
//
// ratelimit.policy is as promhook's policy label: [core.Policy].Name, or for
// an unnamed policy the one the RateLimit-Policy header gives it
// ("tokenbucket-100-per-60s"); "" when no policy was known (a failed
// WithPolicyFunc lookup, or a key or cost error under it). Keep policies
// few, never one per client. The request's key is never an attribute.
package otelhook
