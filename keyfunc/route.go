package keyfunc

import (
	"fmt"
	"net/http"
)

var errNoRoute = fmt.Errorf("%w: no route pattern in Request.Pattern", ErrNoKey)

// Route returns a Func whose key is the pattern of the matched route,
// http.Request.Pattern ("GET /users/{id}", "/users/:id"), never the raw
// path, whose cardinality a client controls. An empty Pattern gives an error
// wrapping [ErrNoKey].
//
// net/http's ServeMux sets Pattern only on the requests it passes to the
// handlers registered on it, not in a middleware wrapping the whole mux. The
// chi, gin and echo adapters set it to their router's pattern; an adapter of
// another router sets it on a shallow copy of the request
// (nethttp.Engine's example).
func Route() Func {
	return func(r *http.Request) (string, error) {
		if r.Pattern != "" {
			return boundKey(r.Pattern), nil
		}
		return "", errNoRoute
	}
}
