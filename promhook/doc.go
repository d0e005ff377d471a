// Package promhook is a ready-made Prometheus collector for the rate-limiting
// middleware: it counts what nethttp's hooks report, and the keys and
// fallback state of the limiters you show it.
//
//	m := promhook.New()
//	prometheus.MustRegister(m) // or reg.MustRegister(m) on a registry of your own
//
//	lim := core.MustNew(core.TokenBucket(100, time.Minute).WithName("per-ip"))
//	m.WatchKeys("per-ip", lim) // ratelimit_keys{limiter="per-ip"}
//	mux.Handle("/", nethttp.Middleware(lim, nethttp.WithHook(m.Observe))(app))
//	mux.Handle("GET /metrics", promhttp.Handler())
//
// The router adapters take the same option: chimw.Limit(lim,
// nethttp.WithHook(m.Observe)). One Metrics serves every middleware of a
// program; their policies tell them apart.
//
// # Metrics
//
// With the default namespace "ratelimit" (WithNamespace changes it):
//
//	ratelimit_requests_total{policy, outcome, source}   counter
//	ratelimit_store_duration_seconds{policy}            histogram
//	ratelimit_keys{limiter}                             gauge
//	ratelimit_fallback_active{store}                    gauge
//
// ratelimit_requests_total counts every request the middleware did not skip. outcome
// is nethttp.Outcome's String: allowed, denied, dry-run, failed-open,
// failed-closed, key-error, cost-error or canceled. source is
// core.Decision.Source's String: store (the store itself, and always the
// in-memory limiter), deny-cache or fallback. Requests the limiter did not
// decide (a key error, a store failure) have the zero source, store, unless
// the store said otherwise.
//
// Deny-cache hits, the denials redisstore repeated from its local cache
// without a round trip to Redis, have no metric of their own: they are
// ratelimit_requests_total{source="deny-cache"} (outcome denied, or
// dry-run). In PromQL:
//
//	sum by (policy) (rate(ratelimit_requests_total{source="deny-cache"}[5m]))
//
// ratelimit_store_duration_seconds is Event.Latency, the time the limiter
// call took (for redisstore a round trip to Redis, or the time until it
// failed or timed out), observed for every request where the limiter was
// called: not for a key error, a failed cost function or a failed policy
// lookup. It includes the fast answers of the deny cache and of the
// fallback. The buckets are [DefaultBuckets], or [WithBuckets].
//
// ratelimit_keys is read at every scrape from the limiters given to
// [Metrics.WatchKeys], under the name you give each.
//
// ratelimit_fallback_active is 1 while a store's local fallback decides in its place,
// 0 otherwise, as set by SetFallbackActive. promhook does not import
// redisstore: call it from the breaker's hook, and once at startup so that
// the series exists before the first change:
//
//	m.SetFallbackActive("redis", false)
//	lim, err := redisstore.New(rdb, core.SlidingWindow(100, time.Minute),
//		redisstore.WithBreakerHook(func(c redisstore.BreakerChange) {
//			m.SetFallbackActive("redis", c.To != redisstore.BreakerClosed)
//		}))
//
// # Labels and cardinality
//
// The policy label is [core.Policy].Name, or, for a policy without a name,
// the name the middleware gives it in the IETF RateLimit-Policy header
// ("tokenbucket-100-per-60s"); for key-error and cost-error, the limiter's
// own policy. It is "" when the middleware knew no policy: a failed
// nethttp.WithPolicyFunc lookup, and key and cost errors under it. Policy
// names come from the program, never from the request, so the number of
// series is bounded by the number of policies the program uses. A
// WithPolicyFunc that builds a policy per client should name the policies
// after the plan, not the client, or every client becomes a series: Metrics
// keeps one small entry per policy name it has seen (per distinct policy
// for unnamed ones), for the life of the process.
//
// The key (Event.Key: a client address, an API key) is personal data and is
// never a label, and nothing from the request is read.
//
// Two Metrics with the same namespace cannot be registered on one registry;
// use [WithNamespace] or prometheus.WrapRegistererWith.
package promhook
