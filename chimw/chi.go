package chimw

import (
	"cmp"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Limit returns chi middleware limiting requests with lim, for r.Use, r.With
// or r.Group, as the package documentation describes. It panics as
// [nethttp.NewEngine] does.
func Limit(lim core.Limiter, opts ...nethttp.Option) func(http.Handler) http.Handler {
	if lim == nil {
		panic(errors.New("chimw: Limit: nil limiter"))
	}
	e := nethttp.NewEngine(lim, opts...)
	// Finding the route before chi has routed is a second walk of its
	// tree: the engine asks for it only when a function of the options, or
	// a denial handler, is to see the request.
	return func(next http.Handler) http.Handler { return e.Handler(next, withRoute) }
}

// withRoute returns the request the engine decides: r itself when its
// Pattern is already chi's full route pattern, and otherwise a shallow copy
// carrying it, so that next gets r as it came.
func withRoute(r *http.Request) *http.Request {
	p := routePattern(r)
	if p == r.Pattern {
		return r
	}
	er := r.WithContext(r.Context())
	er.Pattern = p
	return er
}

// routePattern returns the full pattern of the route chi has matched for r
// or, in middleware that runs before chi routes (r.Use of a router or of a
// mounted sub-router), the one it will match: "" when no route matches.
func routePattern(r *http.Request) string {
	rc := chi.RouteContext(r.Context())
	if rc == nil {
		return r.Pattern // not under chi
	}
	n := len(rc.RoutePatterns)
	if (n > 0 && !strings.HasSuffix(rc.RoutePatterns[n-1], "/*")) || rc.Routes == nil {
		return rc.RoutePattern() // routed: r.With, r.Group
	}
	// Before routing, or past a mount point only ("/api/*"): look the
	// request up from the top router (rc.Routes) as chi's routeHTTP will,
	// on a scratch context, which collects the patterns of every level.
	method := cmp.Or(rc.RouteMethod, r.Method)
	path := rc.RoutePath // set by a middleware such as StripSlashes
	if path == "" || n > 0 {
		// Past a mount point RoutePath is the sub-router's; the top
		// router routes the URL's path.
		path = cmp.Or(r.URL.RawPath, r.URL.Path, "/")
	}
	scratch := scratchContexts.Get().(*chi.Context)
	defer scratchContexts.Put(scratch)
	scratch.Reset()
	if rc.Routes.Find(scratch, method, path) == "" {
		return ""
	}
	return scratch.RoutePattern()
}

// scratchContexts holds the routing contexts routePattern looks routes up
// with (chi pools its own the same way).
var scratchContexts = sync.Pool{New: func() any { return chi.NewRouteContext() }}
