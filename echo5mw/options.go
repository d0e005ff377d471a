package echo5mw

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/go-ratelimit/ratelimit/nethttp"
)

// WithSkipper exempts the requests for which s, an echo middleware.Skipper,
// returns true: [nethttp.WithSkip] for conditions on the echo context.
// Several add up. It panics for a nil s. In [Store.Allow], which has no echo
// context, it exempts nothing (echo's RateLimiterConfig has a Skipper of its
// own).
func WithSkipper(s func(*echo.Context) bool) nethttp.Option {
	if s == nil {
		panic(errors.New("echo5mw: WithSkipper: nil function"))
	}
	return nethttp.WithSkip(func(r *http.Request) bool {
		rc := fromRequest(r)
		return rc != nil && rc.c != nil && s(rc.c)
	})
}
