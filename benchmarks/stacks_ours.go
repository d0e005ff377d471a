package benchmarks

import (
	"net/http"

	"github.com/go-ratelimit/ratelimit/chimw"
	echo5middleware "github.com/labstack/echo/v5/middleware"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/echo5mw"
	"github.com/go-ratelimit/ratelimit/echomw"
	"github.com/go-ratelimit/ratelimit/ginmw"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// oursStacks returns our adapters' stacks: the in-memory token bucket of
// scenario 1 behind each adapter with its defaults (key: the peer address;
// X-RateLimit-* headers on every response). On echo v5 also ours-store: echo's
// own RateLimiter (key: c.RealIP(), the peer address in v5) over
// echo5mw.NewStore.
func oursStacks() []Stack {
	return []Stack{
		{Router: "nethttp", Lib: "ours", SetsHeaders: true, New: func(l Limit) (http.Handler, error) {
			lim, err := oursToken(l)
			if err != nil {
				return nil, err
			}
			return nethttp.Middleware(lim)(okHandler), nil
		}},
		{Router: "gin", Lib: "ours", SetsHeaders: true, New: func(l Limit) (http.Handler, error) {
			lim, err := oursToken(l)
			if err != nil {
				return nil, err
			}
			return ginStack(ginmw.Limit(lim)), nil
		}},
		{Router: "echo", Lib: "ours", SetsHeaders: true, New: func(l Limit) (http.Handler, error) {
			lim, err := oursToken(l)
			if err != nil {
				return nil, err
			}
			return echoStack(echomw.Limit(lim)), nil
		}},
		{Router: "echo5", Lib: "ours", SetsHeaders: true, New: func(l Limit) (http.Handler, error) {
			lim, err := oursToken(l)
			if err != nil {
				return nil, err
			}
			return echo5Stack(echo5mw.Limit(lim)), nil
		}},
		{Router: "echo5", Lib: "ours-store", SetsHeaders: true, New: func(l Limit) (http.Handler, error) {
			lim, err := oursToken(l)
			if err != nil {
				return nil, err
			}
			return echo5Stack(echo5middleware.RateLimiter(echo5mw.NewStore(lim))), nil
		}},
		{Router: "chi", Lib: "ours", SetsHeaders: true, New: func(l Limit) (http.Handler, error) {
			lim, err := oursToken(l)
			if err != nil {
				return nil, err
			}
			return chiStack(chimw.Limit(lim)), nil
		}},
	}
}

func oursToken(l Limit) (*core.MemoryLimiter, error) {
	return core.New(core.TokenBucket(l.N, l.Window))
}
