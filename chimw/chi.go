package chimw

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Limit returns chi middleware limiting requests with lim, for r.Use,
// r.With or r.Group. It takes nethttp's options and behaves exactly as
// nethttp.Middleware, with chi's route pattern (chi.RouteContext's
// RoutePattern, "/users/{id}") available to keyfunc.Route. It returns an
// error for a nil limiter or an invalid option.
func Limit(lim core.Limiter, opts ...Option) (func(http.Handler) http.Handler, error) {
	e, err := nethttp.NewEngine(lim, opts...)
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		if next == nil {
			next = http.NotFoundHandler()
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			kr := withRoute(r)
			if rej := e.Check(w, kr); rej != nil {
				e.Respond(w, kr, rej)
				return
			}
			next.ServeHTTP(w, r)
		})
	}, nil
}

// withRoute sets chi's full route pattern in Request.Pattern, for
// keyfunc.Route, on a shallow copy. Only the engine sees the copy: next gets
// the request as it came. A pattern chi already put in Request.Pattern needs
// no copy.
func withRoute(r *http.Request) *http.Request {
	rc := chi.RouteContext(r.Context())
	if rc == nil {
		return r
	}
	p := rc.RoutePattern()
	if p == "" || p == r.Pattern {
		return r
	}
	kr := r.WithContext(r.Context())
	kr.Pattern = p
	return kr
}
