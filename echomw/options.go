package echomw

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Option is nethttp's Option: every adapter takes the same options
// (nethttp.WithKeyFunc, nethttp.WithCostFunc, nethttp.WithSkip,
// nethttp.WithHeaderStyle, ...), with the same meaning.
type Option = nethttp.Option

// WithSkipper exempts the requests for which s returns true, echo's way: it
// takes a middleware.Skipper (func(echo.Context) bool), as every echo
// middleware config does, and is nethttp.WithSkip given the echo context.
// Like WithSkip, several add up.
func WithSkipper(s func(echo.Context) bool) Option {
	if s == nil {
		return nethttp.InvalidOption(errors.New("echomw: WithSkipper needs a non-nil function"))
	}
	return nethttp.WithSkip(func(r *http.Request) bool {
		c, ok := fromRequest(r)
		return ok && s(c)
	})
}
