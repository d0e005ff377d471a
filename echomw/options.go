package echomw

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/go-ratelimit/ratelimit/nethttp"
)

// WithSkipper exempts the requests for which s returns true, echo's way: it
// takes a middleware.Skipper (func(echo.Context) bool), as every echo
// middleware config does. It is the echo-native form of [nethttp.WithSkip],
// which works here too: a framework-neutral hook and a framework-native one,
// as OpenTelemetry's adapters offer, the latter for conditions on the echo
// context (values an earlier middleware set with c.Set). Like WithSkip,
// several add up. It panics for a nil s.
func WithSkipper(s func(echo.Context) bool) nethttp.Option {
	if s == nil {
		panic(errors.New("echomw: WithSkipper: nil function"))
	}
	return nethttp.WithSkip(func(r *http.Request) bool {
		c, ok := fromRequest(r)
		return ok && s(c)
	})
}
