// Package ginmw is rate-limiting middleware for gin
// (github.com/gin-gonic/gin).
//
//	perIP, err := ginmw.Limit(lim)                 // key: the TCP peer address
//	r := gin.New()
//	r.Use(perIP)
//	r.POST("/login", strictLogin, login)           // a stricter per-route limit
//
// Limit is a thin layer over package nethttp: it takes the same options and
// answers with the same headers, statuses and bodies (see nethttp's package
// documentation: X-RateLimit-* or IETF fields, 429 with Retry-After, skip,
// cost, key fallback, fail open or closed, dry run, stacking several limits).
// A rejected request is answered by the shared engine and the gin chain is
// aborted (c.Abort), so later handlers do not run and the headers stay on
// the response.
//
// # Route keys
//
// keyfunc.Route() keys on gin's route, c.FullPath() ("/users/:id", never the
// raw path). gin matches the route before running any handler, so a route key
// works in r.Use as well as on one route. A request that matched no route has
// no pattern: keyfunc.Route then fails with keyfunc.ErrNoKey and the
// key-error policy answers (400 by default).
//
// # Client addresses
//
// The default key is the TCP peer address (keyfunc.IP()), not c.ClientIP().
// gin's ClientIP believes X-Forwarded-For and X-Real-IP, and by default it
// trusts every peer to set them, so any client could pick its own key and
// escape its limit (CVE-2020-28483 was this kind of spoofing). To key on the
// client behind your proxies, either:
//   - tell gin which proxies to trust, engine.SetTrustedProxies([]string{
//     "10.0.0.0/8"}) (or engine.TrustedPlatform), and opt in with
//     nethttp.WithKeyFunc(ginmw.ClientIP()); or
//   - keep gin out of it with keyfunc.IP(keyfunc.TrustProxies("10.0.0.0/8")).
//
// # Gin-native options
//
// WithSkipper takes a gin.Skipper, as gin's logger does: it is
// nethttp.WithSkip given the gin context.
package ginmw
