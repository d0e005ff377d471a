package echomw

import (
	"cmp"
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Limit returns echo middleware limiting requests with lim, for e.Use, a
// group or one route (not e.Pre), as the package documentation describes. It
// panics as [nethttp.Middleware] does.
func Limit(lim core.Limiter, opts ...nethttp.Option) echo.MiddlewareFunc {
	if lim == nil {
		panic(errors.New("echomw: Limit: nil limiter"))
	}
	// Echo renders the default answers through its HTTPErrorHandler: these
	// handlers, which write nothing, stand in for nethttp's plain-text ones,
	// and a handler option in opts replaces them.
	e := nethttp.NewEngine(lim, append([]nethttp.Option{
		nethttp.WithDenyHandler(func(http.ResponseWriter, *http.Request, core.Decision) {}),
		nethttp.WithKeyErrorHandler(func(http.ResponseWriter, *http.Request, error) {}),
	}, opts...)...)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			w, req := c.Response(), c.Request()
			r, rej := e.Admit(w, req, func() *http.Request { return engineRequest(c) })
			if rej == nil {
				c.SetRequest(r) // req itself, unless its cost is settled
				err := next(c)
				if r != req {
					settle(e, r, w, err)
				}
				return err
			}
			if rej.Outcome == nethttp.OutcomeDenied || rej.Outcome == nethttp.OutcomeKeyError {
				e.Respond(w, rej) // a handler option's answer, if there is one
			}
			return echo.NewHTTPError(rej.Status, http.StatusText(rej.Status)).SetInternal(&rejectionError{rej})
		}
	}
}

// settle settles the cost of r, a request Admit returned, once the handler
// chain returned err: at once when the response is written, or when nothing
// is to answer (200, as net/http sends), and otherwise when the answer to
// err is written, by echo's HTTPErrorHandler after Limit has returned or by
// a middleware before Limit. Only that answer says the status the client
// gets: an HTTPErrorHandler of the application may send 401 for its own
// error, where echo's default one would send 500.
func settle(e *nethttp.Engine, r *http.Request, w *echo.Response, err error) {
	if err == nil || w.Committed {
		e.Settle(r, cmp.Or(w.Status, http.StatusOK), w.Header()) // 0 only before echo's reset
		return
	}
	w.Before(func() { e.Settle(r, w.Status, w.Header()) })
}

// rejectionError is the internal error of the *echo.HTTPError Limit
// returns. Its message is the rejection's kind only, never its cause: echo's
// Debug mode writes error messages into responses, and a limiter error must
// not reach the client. It unwraps to the *nethttp.Rejection, with the cause
// and the decision, for an HTTPErrorHandler or a logger (errors.As).
type rejectionError struct{ rej *nethttp.Rejection }

func (e *rejectionError) Error() string {
	return "echomw: " + http.StatusText(e.rej.Status)
}

func (e *rejectionError) Unwrap() error { return e.rej }

// engineRequest is the request the options' functions see (the view of
// Engine.Check): a shallow copy of c.Request() carrying the echo context
// (for WithSkipper) and echo's route, c.Path(), in Pattern, which
// keyfunc.Route reads. The handlers after this middleware get c.Request()
// unchanged.
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
