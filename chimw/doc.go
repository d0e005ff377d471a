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
// the raw path). chi completes the pattern only once it has routed the
// request, so use a route key on r.With(...) or inside r.Group(...), whose
// middleware runs after routing. A middleware given to r.Use runs before its
// router has routed: it sees no pattern (or only the mount point of a
// sub-router), and keyfunc.Route then fails with keyfunc.ErrNoKey, which
// the key-error policy answers (400 by default). Keys that do not depend on
// the route (IP, API key) work anywhere.
//
// # Client addresses
//
// The default key is the TCP peer address. chi's middleware.RealIP rewrites
// RemoteAddr from headers any client can send: behind a proxy, prefer
// keyfunc.IP(keyfunc.TrustProxies(...)), which reads forwarding headers only
// from the proxies you name, and do not mount RealIP in front of a limit.
package chimw
