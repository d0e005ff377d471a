package chimw

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Limit returns chi middleware limiting requests with lim, for r.Use, r.With
// or r.Group, as the package documentation describes. It panics as
// [nethttp.Middleware] does.
func Limit(lim core.Limiter, opts ...nethttp.Option) func(http.Handler) http.Handler {
	if lim == nil {
		panic(errors.New("chimw: Limit: nil limiter"))
	}
	mw := nethttp.Middleware(lim, opts...)
	return func(next http.Handler) http.Handler {
		if next == nil {
			next = http.NotFoundHandler()
		}
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, callerRequest(r))
		}))
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, withRoute(r))
		})
	}
}

// withRoute returns the request the middleware decides: r itself when chi
// has already put the full pattern in Request.Pattern (or knows none yet),
// and otherwise a shallow copy with the full pattern, which remembers r so
// that next gets the request as it came.
func withRoute(r *http.Request) *http.Request {
	rc := chi.RouteContext(r.Context())
	if rc == nil {
		return r
	}
	p := rc.RoutePattern()
	if p == "" || p == r.Pattern {
		return r
	}
	kr := r.WithContext(&routeContext{Context: r.Context(), caller: r})
	kr.Pattern = p
	return kr
}

// callerRequest undoes withRoute.
func callerRequest(r *http.Request) *http.Request {
	if rc, ok := r.Context().(*routeContext); ok {
		return rc.caller
	}
	return r
}

// routeContext is the context of withRoute's copy: the caller's context,
// and the caller's request to hand on.
type routeContext struct {
	context.Context
	caller *http.Request
}
