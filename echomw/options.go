package echomw

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/go-ratelimit/ratelimit/nethttp"
)

// WithSkipper exempts the requests for which s, an echo middleware.Skipper,
// returns true: [nethttp.WithSkip] for conditions on the echo context.
// Several add up. It panics for a nil s.
func WithSkipper(s func(echo.Context) bool) nethttp.Option {
	if s == nil {
		panic(errors.New("echomw: WithSkipper: nil function"))
	}
	return nethttp.WithSkip(func(r *http.Request) bool {
		c, ok := r.Context().Value(echoCtxKey{}).(echo.Context) // attached by Limit
		return ok && s(c)
	})
}
