package keyfunc

import (
	"context"
	"fmt"
	"net/http"
)

var errNoRoute = fmt.Errorf("%w: no route pattern (call WithRoute in the adapter, or register the handler on a ServeMux)", ErrNoKey)

// Route returns a Func whose key is the pattern of the matched route
// ("/users/{id}", "GET /users/{id}"), never the raw path, whose
// cardinality a client controls.
//
// The pattern comes from WithRoute, which the chi, gin and echo adapters
// call with their router's pattern, and otherwise from
// http.Request.Pattern, which net/http's ServeMux sets only on requests
// passed to handlers registered on it: a middleware wrapping the whole mux
// sees no pattern. No pattern gives an error wrapping ErrNoKey.
//
// The key is the pattern string itself: Route allocates nothing.
func Route() Func {
	return routeKey
}

func routeKey(r *http.Request) (string, error) {
	if rc, ok := r.Context().Value(routeCtxKey{}).(*routeContext); ok && rc.pattern != "" {
		return rc.pattern, nil
	}
	if r.Pattern != "" {
		return r.Pattern, nil
	}
	return "", errNoRoute
}

// WithRoute returns a shallow copy of r that carries the route pattern the
// router matched, for Route to read before http.Request.Pattern. Adapters
// call it with their framework's pattern (chi's RoutePattern, gin's
// FullPath, echo's Path). The latest call wins; an empty pattern leaves
// Route to r.Pattern. r itself is not modified.
func WithRoute(r *http.Request, pattern string) *http.Request {
	return r.WithContext(&routeContext{Context: r.Context(), pattern: pattern})
}

type routeCtxKey struct{}

// routeContext is one context layer holding the pattern. It replaces
// context.WithValue, which would box the string in an interface: one
// allocation fewer on every request of a per-route limit.
type routeContext struct {
	context.Context
	pattern string
}

func (c *routeContext) Value(key any) any {
	if _, ok := key.(routeCtxKey); ok {
		return c
	}
	return c.Context.Value(key)
}

func (c *routeContext) String() string {
	return fmt.Sprintf("%v.WithRoute(%q)", c.Context, c.pattern)
}
