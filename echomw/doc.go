// Package echomw is rate-limiting middleware for echo v4
// (github.com/labstack/echo/v4).
//
//	perIP, err := echomw.Limit(lim)                // key: the TCP peer address
//	e := echo.New()
//	e.Use(perIP)
//	e.POST("/login", login, strictLogin)           // a stricter per-route limit
//
// Limit is a thin layer over package nethttp: it takes the same options and
// decides with the same engine (see nethttp's package documentation:
// X-RateLimit-* or IETF fields, Retry-After, skip, cost, key fallback, fail
// open or closed, dry run, stacking several limits).
//
// # Errors, echo's way
//
// A rejected request is returned as an *echo.HTTPError (429 Too Many Requests,
// or 400, 500 or 503 for a key, cost or fail-closed limiter error), so it goes
// through echo's HTTPErrorHandler like any other error, and the rate-limit
// headers and Retry-After, already on the response, stay there. echo's
// default handler answers {"message":"Too Many Requests"}. A custom handler
// can get the decision:
//
//	var rej *nethttp.Rejection
//	if errors.As(err, &rej) && rej.Status == http.StatusTooManyRequests {
//		nethttp.ProblemJSON(c.Response(), c.Request(), rej.Decision)
//		return
//	}
//
// or pass nethttp.WithDenyHandler(nethttp.ProblemJSON) to Limit, which writes
// the answer itself; echo's handler then finds the response committed and
// leaves it. The HTTPError's internal error never carries the limiter's error
// text (echo's Debug mode would write it to the client); it unwraps to the
// *nethttp.Rejection, which does.
//
// # Route keys
//
// keyfunc.Route() keys on echo's route, c.Path() ("/users/:id", never the
// raw path). echo routes before running middleware registered with e.Use, a
// group or a route, so a route key works there; middleware registered with
// e.Pre runs before routing, sees no route, and keyfunc.Route then fails with
// keyfunc.ErrNoKey (400 by default).
//
// # Skipper
//
// WithSkipper takes echo's middleware.Skipper, as every echo middleware
// config does; it is nethttp.WithSkip given the echo context.
//
// # Client addresses
//
// The default key is the TCP peer address (keyfunc.IP()), not c.RealIP(),
// which believes X-Forwarded-For and X-Real-IP from any peer unless
// e.IPExtractor is set. Behind a proxy use
// keyfunc.IP(keyfunc.TrustProxies("10.0.0.0/8")), which reads forwarding
// headers only from the proxies you name.
package echomw
