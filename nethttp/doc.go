// Package nethttp is rate-limiting middleware for net/http, and the one HTTP
// engine behind the chi, gin and echo adapters: every header, status, body,
// delay and failure rule below lives here once.
//
//	lim := core.MustNew(core.TokenBucket(100, time.Minute))
//	http.ListenAndServe(addr, nethttp.Middleware(lim)(mux))
//
// # Admitted requests
//
// The response carries X-RateLimit-Limit (the quota), X-RateLimit-Remaining
// (unit-cost requests left now) and X-RateLimit-Reset (whole seconds until the
// full quota is back, rounded up), then the next handler runs. A
// leaky-bucket limiter may ask an admitted request to wait
// ([core.Decision].Delay): the middleware holds it first. If the request's
// context ends during the wait, the next handler is not called and the
// answer is 503 Service Unavailable.
//
// # Denied requests
//
// 429 Too Many Requests, with the same X-RateLimit-* fields and Retry-After
// in whole seconds, rounded up and at least 1, so that a client waiting
// exactly that long succeeds. The body is "Too Many Requests" as text/plain
// ([WithDenyHandler] replaces it). A request whose cost is more than the
// policy can ever admit ([core.ErrCostExceedsCapacity]) is denied with 429
// and no Retry-After.
//
// Nothing guessed is written: for a cost above capacity, as for a limiter
// failure, only X-RateLimit-Limit and the RateLimit-Policy member are, never
// Remaining, Reset or the RateLimit field.
//
// [WithHeaderStyle] chooses X-RateLimit-* (the default), the IETF fields of
// draft-ietf-httpapi-ratelimit-headers-11, both, or none:
//
//	RateLimit-Policy: "per-ip";q=100;w=60
//	RateLimit: "per-ip";r=0;t=6
//
// The policy is named by [core.Policy].Name, or by a name derived from the
// policy ("fixedwindow-100-per-60s"), never by anything the client sent. The
// draft's w is whole seconds: a Window that is not is advertised rounded up,
// with the same q ("per-ip";q=3;w=1 for 3 per 250ms), so a client pacing
// itself by q/w may go slower than allowed, never faster.
//
// # Limits made of several policies
//
// A policy made with [core.AllOf] (10 per second and 1,000 per day) is
// decided at once, and a denial charges none of its parts. The IETF fields
// list each part, RateLimit with each part's own r and t:
//
//	RateLimit-Policy: "per-second";q=10;w=1, "per-day";q=1000;w=86400
//	RateLimit: "per-second";r=9;t=1, "per-day";r=999;t=86400
//
// The X-RateLimit-* fields describe the part that binds, the one with the
// fewest requests remaining (X-RateLimit-Reset is when that part is full
// again), Retry-After is when every part would admit, and [ProblemJSON]
// names the parts that denied. A limiter failure writes the parts'
// policies and the first part's limit.
//
// # Costs known after the response
//
// [WithFinalCost] charges an estimate before the handler and settles the
// difference once the response is written: from the handler
// ([SetFinalCost]: the tokens a completion used) or from the response's
// status and header (a 5xx not charged, only failed logins counted). The
// limiter must be a [core.Settler]; the settlement never delays the
// response, and one the limiter refuses is reported as
// [OutcomeSettleFailed], never retried.
//
// # Stacking limits
//
// Several limits on one route are several middlewares, one inside the other.
// On an admitted request the X-RateLimit-* fields describe the most
// restrictive decision (the lowest Remaining; on a tie, the later reset). On
// a 429 they describe the limit that denied, with its Retry-After: the first
// middleware that denies answers, and those inside it are neither consulted
// nor charged. The IETF fields list every policy consulted, outermost first.
// An outer limit has already counted a request that an inner one denies, so
// put the limit most likely to deny outermost, and give stacked middlewares
// the same header style and reset format.
//
// # Keys, failures and hooks
//
// The key defaults to [keyfunc.IP], the TCP peer address. A request without
// a key is answered 400 ([WithKeyFallback], [WithKeyErrorHandler]): a
// missing key never means "not limited". A limiter that fails (a Redis store
// that cannot be reached and has no local fallback) fails open by default
// ([WithFailClosed]); no response carries error text or anything the client
// sent. A request whose own context ends while the limiter decides is
// answered 503 and not served ([OutcomeCanceled]). [WithCostFunc] weighs
// requests, [WithSkip] exempts them and [WithPolicyFunc] picks each one's
// policy. Hooks ([WithHook]) get one [Event] per request not skipped;
// [WithDryRun] decides and reports without blocking.
//
// # Adapters
//
// An adapter for a router whose middleware has another shape builds an
// [Engine] from the same options (see the Engine example). Package
// adaptertest is the behavioural suite every adapter passes.
package nethttp
