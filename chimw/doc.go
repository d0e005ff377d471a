// Package chimw is rate-limiting middleware for the chi router
// (github.com/go-chi/chi/v5).
//
//	lim := core.MustNew(core.TokenBucket(100, time.Minute))
//	r := chi.NewRouter()
//	r.Use(chimw.Limit(lim))                              // key: the TCP peer address
//	r.With(chimw.Limit(loginLim)).Post("/login", login) // a stricter limit on one route
//
// [Limit] is [nethttp.Middleware] with chi's route pattern: it takes
// nethttp's options and answers with the same headers, statuses and bodies
// (see package nethttp).
//
// # Route keys
//
// keyfunc.Route keys on chi's full route pattern ("/api/users/{id}", never
// the raw path), wherever Limit is mounted. On r.With and in r.Group chi has
// matched the route before the middleware runs. Middleware given to r.Use
// runs before its router routes, so there Limit looks the route up in chi's
// tree itself, as chi is about to (a second lookup, made only when a
// function of the options or a denial handler is to see the request). A
// request that matches no route (chi's 404 or 405) has no pattern:
// keyfunc.Route then fails with keyfunc.ErrNoKey and the key-error policy
// answers (400 by default; nethttp.WithKeyFallback(keyfunc.IP()) limits such
// requests per client and lets chi answer them).
//
// # Client addresses
//
// The default key is the TCP peer address. chi's middleware.RealIP rewrites
// RemoteAddr from headers any client can send: behind a proxy, prefer
// keyfunc.IP(keyfunc.TrustProxies(...)), which reads forwarding headers only
// from the proxies you name, and do not mount RealIP in front of a limit.
package chimw
