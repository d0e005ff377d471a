package ginmw

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Limit returns gin middleware limiting requests with lim, for r.Use, a
// group or one route, as the package documentation describes. It panics as
// [nethttp.Middleware] does.
func Limit(lim core.Limiter, opts ...nethttp.Option) gin.HandlerFunc {
	if lim == nil {
		panic(errors.New("ginmw: Limit: nil limiter"))
	}
	e := nethttp.NewEngine(lim, opts...)
	return func(c *gin.Context) {
		r, rej := e.Admit(c.Writer, c.Request, func() *http.Request { return engineRequest(c) })
		if rej != nil {
			e.Respond(c.Writer, rej)
			c.Abort()
			return
		}
		c.Request = r // c.Request itself, unless its cost is settled
		c.Next()
		e.Settle(r, c.Writer.Status(), c.Writer.Header())
	}
}

// engineRequest is the request the options' functions see (the view of
// Engine.Check): a shallow copy of c.Request carrying the gin context (for
// ClientIP) and gin's route pattern in Pattern, which keyfunc.Route reads.
// The handlers after this middleware get c.Request unchanged.
func engineRequest(c *gin.Context) *http.Request {
	r := c.Request.WithContext(&ginContext{Context: c.Request.Context(), c: c})
	r.Pattern = c.FullPath()
	return r
}

type ginCtxKey struct{}

// ginContext is one context layer holding the gin context: a struct instead
// of context.WithValue, which would allocate again to box the key lookup.
type ginContext struct {
	context.Context
	c *gin.Context
}

func (g *ginContext) Value(key any) any {
	if _, ok := key.(ginCtxKey); ok {
		return g.c
	}
	return g.Context.Value(key)
}

var errNoGinContext = fmt.Errorf("%w: ginmw.ClientIP used outside ginmw.Limit", keyfunc.ErrNoKey)

// ClientIP returns a key function for nethttp.WithKeyFunc that keys on gin's
// c.ClientIP(), in keyfunc.IP's canonical form ([keyfunc.CanonicalIP]). Use
// it only after engine.SetTrustedProxies (see the package documentation).
func ClientIP() keyfunc.Func {
	return func(r *http.Request) (string, error) {
		c, ok := r.Context().Value(ginCtxKey{}).(*gin.Context) // attached by Limit
		if !ok {
			return "", errNoGinContext
		}
		return keyfunc.CanonicalIP(c.ClientIP())
	}
}
