package echomw

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Limit returns echo middleware limiting requests with lim, for e.Use, a
// group or one route (not e.Pre: see the package documentation). It takes
// nethttp's options (and this package's WithSkipper) and decides exactly as
// nethttp.Middleware. An admitted request gets the rate-limit headers and
// goes on. A rejected one gets its headers too, and Limit returns an
// *echo.HTTPError with the status (429, or 400, 500, 503 for a key, cost or
// fail-closed limiter error), which echo's HTTPErrorHandler renders: the
// headers already set stay on the response. When an option supplies the
// response (nethttp.WithDenyHandler, nethttp.WithKeyErrorHandler), it is
// written first and echo's handler, finding the response committed, leaves
// it alone. Limit returns an error for a nil limiter or an invalid option.
func Limit(lim core.Limiter, opts ...Option) (echo.MiddlewareFunc, error) {
	e, err := nethttp.NewEngine(lim, opts...)
	if err != nil {
		return nil, err
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := engineRequest(c)
			w := c.Response()
			rej := e.Check(w, r)
			if rej == nil {
				return next(c)
			}
			if rej.UserHandler {
				e.Respond(w, r, rej)
			}
			return echo.NewHTTPError(rej.Status, http.StatusText(rej.Status)).SetInternal(&Error{rej})
		}
	}, nil
}

// Error is the internal error of the *echo.HTTPError Limit returns. Its
// message is the rejection's kind only, never its cause: echo's Debug mode
// writes error messages into responses, and a limiter error must not reach
// the client. Unwrap gives the *nethttp.Rejection, with the cause and the
// decision, for an HTTPErrorHandler or a logger:
//
//	var rej *nethttp.Rejection
//	if errors.As(err, &rej) && rej.Status == http.StatusTooManyRequests { ... rej.Decision ... }
type Error struct{ rej *nethttp.Rejection }

func (e *Error) Error() string {
	return "echomw: " + http.StatusText(e.rej.Status)
}

// Unwrap returns the *nethttp.Rejection.
func (e *Error) Unwrap() error { return e.rej }

// engineRequest is the request the engine and the key functions see: a
// shallow copy of c.Request() carrying the echo context (for WithSkipper) and
// echo's route, c.Path(), in Pattern, which keyfunc.Route reads. The
// handlers after this middleware get c.Request() unchanged.
func engineRequest(c echo.Context) *http.Request {
	r := c.Request()
	r = r.WithContext(&echoContext{Context: r.Context(), c: c})
	r.Pattern = c.Path()
	return r
}

type echoCtxKey struct{}

// echoContext is one context layer holding the echo context: a struct
// instead of context.WithValue, which would allocate again.
type echoContext struct {
	context.Context
	c echo.Context
}

func (e *echoContext) Value(key any) any {
	if _, ok := key.(echoCtxKey); ok {
		return e.c
	}
	return e.Context.Value(key)
}

func fromRequest(r *http.Request) (echo.Context, bool) {
	c, ok := r.Context().Value(echoCtxKey{}).(echo.Context)
	return c, ok
}
