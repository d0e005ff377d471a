// Package nethttp is rate-limiting middleware for net/http, and the one HTTP
// engine behind the chi, gin and echo adapters (chimw, ginmw, echomw): every
// header, status, body, delay and failure rule below lives here once.
//
//	lim, err := core.New(core.FixedWindow(100, time.Minute).WithName("per-ip"))
//	perIP, err := nethttp.Middleware(lim)          // key: the TCP peer address
//	http.ListenAndServe("127.0.0.1:8080", perIP(mux))
//
// Middleware has the standard signature func(http.Handler) http.Handler, so it
// works with every net/http router. Wrap one handler for a per-route limit
// (mux.Handle("POST /login", strict(login))). Note that http.Request.Pattern,
// and so keyfunc.Route, is only set for handlers registered on a ServeMux,
// not for middleware wrapping the whole mux.
//
// # Admitted requests
//
// The response carries X-RateLimit-Limit (the quota), X-RateLimit-Remaining
// (unit-cost requests left now) and X-RateLimit-Reset (whole seconds until the
// full quota is back, rounded up; WithResetAsUnixTime makes it a Unix time),
// then the next handler runs. A leaky-bucket limiter may ask an admitted
// request to wait (core.Decision.Delay): the middleware holds it on a timer
// first. If the request's context ends during the wait (client gone, server
// timeout) the next handler is not called and the answer is 503 Service
// Unavailable, since returning without writing would send an empty 200.
//
// # Denied requests
//
// 429 Too Many Requests, with the same X-RateLimit-* fields (those of the
// limit that denied the request, when several are stacked) and Retry-After
// in whole seconds, rounded up and at least 1, so that a client waiting
// exactly that long succeeds. The body is "Too Many Requests" as
// text/plain; pass WithDenyHandler(ProblemJSON) for RFC 9457 problem
// details, or any handler, which receives the core.Decision.
//
// A request whose cost is more than the policy can ever admit
// (core.ErrCostExceedsCapacity) is denied with 429 and no Retry-After, since
// waiting cannot help. It is never treated as a limiter failure.
//
// # Header styles
//
// WithHeaderStyle chooses X-RateLimit-* (the default), the IETF fields of
// draft-ietf-httpapi-ratelimit-headers-11, both, or none:
//
//	RateLimit-Policy: "per-ip";q=100;w=60
//	RateLimit: "per-ip";r=0;t=6
//
// The policy is named by core.Policy.Name, or else by a name derived from the
// policy ("fixedwindow-100-per-60s"), never by anything the client sent; a
// name that is not printable ASCII is a constructor error. w is the window in
// whole seconds, rounded up. Retry-After goes on denials in every style.
//
// # Stacking limits
//
// Several limits on one route (per IP per second, and per API key per day)
// are several middlewares, one inside the other. Each renders its decision
// into the response headers the outer ones already set, so the response
// describes them together:
//   - On a 429 the X-RateLimit-* fields describe the limit that denied the
//     request, together with its Retry-After (none for a cost above its
//     capacity), whatever the limits outside it that admitted the request
//     show: a request of cost 5 denied with 2 remaining reports that limit
//     with Remaining 2, even if an outer one has fewer left. Only one limit
//     can deny a request: the first middleware that denies answers, and the
//     ones inside it are neither consulted nor charged. A dry-run denial is
//     not a denial here: it is served, and counts as an admission.
//   - On an admitted request they describe the most restrictive decision:
//     the lowest Remaining, and on a tie the later reset. A middleware
//     compares its numbers with the fields already present and replaces them
//     only if it is more restrictive. The state lives in the response
//     headers themselves: no context value, no allocation.
//   - The IETF fields list every policy consulted, in order from the
//     outermost: each middleware appends its member to the lists, so a 429
//     still shows the state of the limits outside the one that denied.
//   - An outer limit has already counted a request that an inner one
//     denies, so put the limit most likely to deny outermost.
//
// Stacked middlewares should use the same header style and reset format.
//
// # Keys, costs and skipping
//
// The key defaults to keyfunc.IP(): the TCP peer address, never a header; see
// package keyfunc for proxies, API keys, routes and combinations. When the key
// function fails (typically a missing API key, keyfunc.ErrNoKey), the
// request is counted under the WithKeyFallback key if there is one, and
// otherwise rejected with 400 Bad Request (WithKeyErrorHandler replaces that
// answer, e.g. with a 401 challenge). A missing key never means "not
// limited".
//
// WithCostFunc weights requests. A cost function that fails or returns a cost
// <= 0 (core.ErrInvalidCost) is a server bug: the request is answered 500
// Internal Server Error and the error hook called, so the bug is seen instead
// of silently disabling the limit.
//
// WithSkip exempts requests (health checks, allowlists) entirely: no headers,
// no hooks, nothing counted.
//
// # Failures, hooks and dry runs
//
// Any other limiter error (a Redis store that cannot be reached, a closed
// limiter) fails open by default: the request is served without rate-limit
// headers. WithFailClosed answers 503 Service Unavailable instead. Either way
// the error goes to WithErrorHook and never to the client: no response
// carries error text or anything the client sent.
//
// WithDecisionHook sees every decision (for metrics and logs). WithDryRun
// computes decisions, calls the hooks and writes the headers but never blocks:
// denied requests are served without Retry-After, delays are skipped, and
// key, cost and limiter errors only reach the error hook.
//
// # Performance
//
// On the admitted path the engine itself allocates once: the slice backing
// the header values. The policy's name, quota and IETF member are rendered
// once at construction, and so are the decimal strings of the numbers its
// headers carry (up to 1024), so Remaining and Reset are looked up, not
// formatted; larger numbers and the IETF RateLimit member share one more
// allocation. Headers are set by canonical key, without http.Header.Set's
// canonicalisation, and no fmt runs per request. With the default IP key
// (one allocation, in keyfunc) and the in-memory limiter (none), a request
// costs 2 allocations in X-RateLimit style. BenchmarkMiddleware compares the
// middleware with a bare handler in the same run; BenchmarkEngine isolates
// the engine from the key function and the limiter.
//
// # Adapters
//
// Engine is the middleware without its net/http shape: Check decides a
// request and sets its headers, Respond writes the answer to a Rejection.
// chimw, ginmw and echomw are thin layers over it that take the same Options,
// and WriteHeaders is the renderer they all share.
package nethttp
