// Package promhook is a ready-made Prometheus collector for the rate-limiting
// middleware: it counts what nethttp's hooks report, and the keys and
// fallback state of the limiters you show it.
//
//	m := promhook.New()
//	prometheus.MustRegister(m) // or reg.MustRegister(m) on a registry of your own
//	m.WatchKeys("per-ip", lim) // ratelimit_keys{limiter="per-ip"}
//	mux.Handle("/", nethttp.Middleware(lim, nethttp.WithHook(m.Observe))(app))
//
// The router adapters take the same option. One Metrics serves every
// middleware of a program; their policies tell them apart.
//
// # Metrics
//
// With the default namespace "ratelimit" ([WithNamespace] changes it):
//
//	ratelimit_requests_total{policy, outcome, source}   counter
//	ratelimit_store_duration_seconds{policy}            histogram
//	ratelimit_keys{limiter}                             gauge
//	ratelimit_fallback_active{limiter}                  gauge
//
// ratelimit_requests_total counts every request the middleware did not skip,
// by [nethttp.Outcome] and [core.Source] (as their String methods spell
// them). The source is "none" for the requests the limiter was not called
// for ([nethttp.Event].LimiterCalled is false: a key or cost error, a failed
// policy lookup); a store failure has the source the store gave, store by
// default. Denials redisstore repeated from its local cache are
// source="deny-cache":
//
//	sum by (policy) (rate(ratelimit_requests_total{source="deny-cache"}[5m]))
//
// ratelimit_store_duration_seconds is [nethttp.Event].Latency, the time the
// limiter call took (fast answers of the deny cache and of the fallback
// included), for every request where the limiter was called: not for a key
// error, a failed cost function or a failed policy lookup.
//
// ratelimit_keys is read at every scrape ([Metrics.WatchKeys]), and
// ratelimit_fallback_active, one series per limiter, is set by
// [Metrics.SetFallbackActive] from each limiter's breaker hook.
//
// # Labels and cardinality
//
// The policy label is [core.Policy].Name, or for a policy without a name the
// one the middleware gives it in the RateLimit-Policy header
// ("tokenbucket-100-per-60s"); for key-error and cost-error, the limiter's
// own policy. It is "" when the middleware knew no policy: a failed
// nethttp.WithPolicyFunc lookup, and key and cost errors under it. Policy
// names come from the program, never from the request. A WithPolicyFunc
// that builds a policy per client should name the policies after the plan,
// not the client, or every client becomes a series: Metrics keeps one small
// entry per policy name it has seen (per distinct unnamed policy), for the
// life of the process.
//
// The limiter label of ratelimit_fallback_active is the name given to
// SetFallbackActive: a limiter's policy label, as the breaker hook's
// recipe gives it, so give each limiter's policy its own name.
//
// The key (a client address, an API key) is personal data and is never a
// label, and nothing from the request is read.
//
// Two Metrics with the same namespace cannot be registered on one registry;
// use [WithNamespace] or prometheus.WrapRegistererWith.
package promhook
