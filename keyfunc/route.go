package keyfunc

import (
	"fmt"
	"net/http"
)

var errNoRoute = fmt.Errorf("%w: no route pattern in Request.Pattern", ErrNoKey)

// Route returns a Func whose key is the pattern of the matched route,
// http.Request.Pattern ("GET /users/{id}", "/users/:id"), never the raw
// path, whose cardinality a client controls.
//
// net/http's ServeMux sets Pattern only on the requests it passes to the
// handlers registered on it: a middleware wrapping the whole mux sees no
// pattern. The chi, gin and echo adapters set it to their router's pattern
// on the request their middleware decides. An adapter of another router does
// the same, on a shallow copy, never on the caller's request:
//
//	kr := r.WithContext(r.Context())
//	kr.Pattern = route // the router's pattern for the matched route
//
// An empty Pattern gives an error wrapping ErrNoKey. The key is the pattern
// string itself: Route allocates nothing.
func Route() Func {
	return routeKey
}

func routeKey(r *http.Request) (string, error) {
	if r.Pattern != "" {
		return r.Pattern, nil
	}
	return "", errNoRoute
}
