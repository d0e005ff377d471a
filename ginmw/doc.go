// Package ginmw is rate-limiting middleware for gin
// (github.com/gin-gonic/gin).
//
//	lim := core.MustNew(core.TokenBucket(100, time.Minute))
//	r := gin.New()
//	r.Use(ginmw.Limit(lim))                        // key: the TCP peer address
//	r.POST("/login", ginmw.Limit(loginLim), login) // a stricter limit on one route
//
// [Limit] takes nethttp's options and answers with the same headers,
// statuses and bodies as [nethttp.Middleware] (see package nethttp). A
// rejected request is answered and the gin chain aborted (c.Abort), so later
// handlers do not run and the headers stay on the response. With
// nethttp.WithFinalCost the cost is settled on the status written when the
// chain inside Limit returns: the answer of a middleware registered
// before Limit, which answers c.Errors after Limit has returned, is not
// seen (register Limit first).
//
// # Route keys
//
// [keyfunc.Route] keys on gin's route, c.FullPath() ("/users/:id", never the
// raw path). gin matches the route before running any handler, so a route key
// works in r.Use as well as on one route. A request that matched no route has
// no pattern: keyfunc.Route then fails with [keyfunc.ErrNoKey] and the
// key-error policy answers (400 by default).
//
// # Client addresses
//
// The default key is the TCP peer address ([keyfunc.IP]), not c.ClientIP().
// gin's ClientIP believes X-Forwarded-For and X-Real-IP, and by default it
// trusts every peer to set them, so any client could pick its own key and
// escape its limit (CVE-2020-28483 was this kind of spoofing). To key on the
// client behind your proxies, either:
//   - tell gin which proxies to trust, engine.SetTrustedProxies([]string{
//     "10.0.0.0/8"}) (or engine.TrustedPlatform), and opt in with
//     nethttp.WithKeyFunc(ginmw.ClientIP()); or
//   - keep gin out of it with keyfunc.IP(keyfunc.TrustProxies("10.0.0.0/8")).
package ginmw
