package ginmw

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Option is nethttp's Option: every adapter takes the same options
// (nethttp.WithKeyFunc, nethttp.WithCostFunc, nethttp.WithSkip,
// nethttp.WithHeaderStyle, ...), with the same meaning.
type Option = nethttp.Option

// WithSkipper exempts the requests for which s returns true, gin's way
// (gin.Skipper, as in gin's LoggerConfig): it is nethttp.WithSkip with the
// gin context. Like WithSkip, several add up.
func WithSkipper(s gin.Skipper) Option {
	if s == nil {
		return nethttp.InvalidOption(errors.New("ginmw: WithSkipper needs a non-nil function"))
	}
	return nethttp.WithSkip(func(r *http.Request) bool {
		c, ok := fromRequest(r)
		return ok && s(c)
	})
}
