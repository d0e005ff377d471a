package echo5mw

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Limit returns echo middleware limiting requests with lim, for e.Use, a
// group or one route (not e.Pre), as the package documentation describes. It
// panics as [nethttp.Middleware] does.
func Limit(lim core.Limiter, opts ...nethttp.Option) echo.MiddlewareFunc {
	if lim == nil {
		panic(errors.New("echo5mw: Limit: nil limiter"))
	}
	// Echo renders the default answers through its HTTPErrorHandler: these
	// handlers, which write nothing, stand in for nethttp's plain-text ones,
	// and a handler option in opts replaces them.
	e := nethttp.NewEngine(lim, append([]nethttp.Option{
		nethttp.WithDenyHandler(func(http.ResponseWriter, *http.Request, core.Decision) {}),
		nethttp.WithKeyErrorHandler(func(http.ResponseWriter, *http.Request, error) {}),
	}, opts...)...)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			// The copy costs two allocations: the engine makes it only
			// when a function of the options, or a handler, is to see it.
			w, req := c.Response(), c.Request()
			r, rej := e.Admit(w, req, func() *http.Request { return engineRequest(c, "") })
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
			return httpError(rej)
		}
	}
}

// settle settles the cost of r, a request Admit returned, once the handler
// chain returned err: at once when the response is written, or when nothing
// is to answer (echo.ResolveResponseStatus's status), and otherwise when the
// answer to err is written, by echo's HTTPErrorHandler after Limit has
// returned or by a middleware before Limit. Only that answer says the status
// the client gets: an HTTPErrorHandler of the application may send 401 for
// its own error, where ResolveResponseStatus says 500.
func settle(e *nethttp.Engine, r *http.Request, w http.ResponseWriter, err error) {
	resp, status := echo.ResolveResponseStatus(w, err)
	if err == nil || resp == nil || resp.Committed {
		e.Settle(r, status, w.Header())
		return
	}
	resp.Before(func() { e.Settle(r, resp.Status, resp.Header()) })
}

// httpError is the error Limit returns for rej, and a Store's Allow: an
// *echo.HTTPError with rej's status, which echo's HTTPErrorHandler answers,
// wrapping a rejectionError.
func httpError(rej *nethttp.Rejection) error {
	return echo.HTTPError{Code: rej.Status, Message: http.StatusText(rej.Status)}.Wrap(&rejectionError{rej})
}

// rejectionError is the error an *echo.HTTPError of this package wraps. Its
// message is the rejection's kind only, never its cause: echo's
// DefaultHTTPErrorHandler(true) writes the wrapped error's message into the
// response, and a limiter error must not reach the client. It unwraps to the
// *nethttp.Rejection, with the cause and the decision, for an
// HTTPErrorHandler or a logger (errors.As).
type rejectionError struct{ rej *nethttp.Rejection }

func (e *rejectionError) Error() string {
	return "echo5mw: " + http.StatusText(e.rej.Status)
}

func (e *rejectionError) Unwrap() error { return e.rej }

// engineRequest is the request the engine and the functions of the options
// see: a shallow copy of c.Request() carrying the echo context (for
// WithSkipper) and identifier (for a Store) in its context, and echo's
// route, c.Path(), in Pattern, which keyfunc.Route reads. The handlers after
// the middleware get c.Request() unchanged.
func engineRequest(c *echo.Context, identifier string) *http.Request {
	r := c.Request()
	r = r.WithContext(&requestContext{Context: r.Context(), c: c, id: identifier})
	r.Pattern = c.Path()
	return r
}

type ctxKey struct{}

// requestContext is one context layer holding what this package's functions
// read of the echo request: a struct instead of context.WithValue, which
// would allocate again for each value.
type requestContext struct {
	context.Context
	c  *echo.Context // nil in Store.Allow, which has no echo context
	id string        // the identifier echo's rate limiter gave a Store
}

func (rc *requestContext) Value(key any) any {
	if _, ok := key.(ctxKey); ok {
		return rc
	}
	return rc.Context.Value(key)
}

// fromRequest returns the innermost requestContext of r, or nil.
func fromRequest(r *http.Request) *requestContext {
	rc, _ := r.Context().Value(ctxKey{}).(*requestContext)
	return rc
}
