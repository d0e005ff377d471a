// Package chimw is rate-limiting middleware for the chi router
// (github.com/go-chi/chi/v5).
//
//	perIP, err := chimw.Limit(lim)                  // key: the TCP peer address
//	r := chi.NewRouter()
//	r.Use(perIP)
//	r.With(strictLogin).Post("/login", login)       // a stricter per-route limit
//
// Limit is a thin layer over package nethttp: it takes the same options and
// answers with the same headers, statuses and bodies (see nethttp's package
// documentation for all of them: X-RateLimit-* or IETF fields, 429 with
// Retry-After, skip, cost, key fallback, fail open or closed, dry run,
// stacking several limits). Its only addition is chi's route pattern.
//
// # Route keys
//
// keyfunc.Route() keys on chi's route pattern ("/users/{id}", never the raw
// path). chi completes the pattern only once it has routed the request, so
// use a route key on r.With(...) or inside r.Group(...), whose middleware runs
// after routing. A middleware given to r.Use on a router runs before that
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
