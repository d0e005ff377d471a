// Package echomw is rate-limiting middleware for echo v4
// (github.com/labstack/echo/v4).
//
//	lim := core.MustNew(core.TokenBucket(100, time.Minute))
//	e := echo.New()
//	e.Use(echomw.Limit(lim))                        // key: the TCP peer address
//	e.POST("/login", login, echomw.Limit(loginLim)) // a stricter limit on one route
//
// [Limit] takes nethttp's options (and [WithSkipper]) and decides exactly
// as [nethttp.Middleware].
//
// # Errors, echo's way
//
// A rejected request is returned as an *echo.HTTPError with the status
// nethttp would answer, so it goes through echo's HTTPErrorHandler like any
// other error, and the rate-limit headers and Retry-After already on the
// response stay there. echo's default handler answers {"message":"Too Many Requests"}. A
// custom handler gets the *[nethttp.Rejection] with errors.As (see the Limit
// example). A handler given with nethttp.WithDenyHandler or
// nethttp.WithKeyErrorHandler writes its answer itself, and echo's handler
// leaves the committed response. The HTTPError's message never carries the
// limiter's error text (echo's Debug mode would show it); only the
// Rejection it unwraps to does.
//
// With nethttp.WithFinalCost, the status and header given to its function
// are those of the answer the client gets. An error the handler returns is
// answered after Limit has returned (by echo's HTTPErrorHandler, or a
// middleware before Limit), so its cost is settled when that answer's
// header is written: an application's handler that sends 401 for its own
// error is seen as 401, not the 500 echo's default handler would send. An
// error that nothing answers (the client gets net/http's empty 200) is not
// settled: its charge stays.
//
// # Route keys
//
// keyfunc.Route keys on echo's route, c.Path() ("/users/:id", never the raw
// path). echo routes before running middleware registered with e.Use, a
// group or a route, so a route key works there; middleware registered with
// e.Pre runs before routing, sees no route, and keyfunc.Route then fails with
// keyfunc.ErrNoKey (400 by default).
//
// # Client addresses
//
// The default key is the TCP peer address (keyfunc.IP), not c.RealIP(),
// which believes X-Forwarded-For and X-Real-IP from any peer unless
// e.IPExtractor is set. Behind a proxy use
// keyfunc.IP(keyfunc.TrustProxies("10.0.0.0/8")), which reads forwarding
// headers only from the proxies you name.
package echomw
