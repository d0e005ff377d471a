package benchmarks

import (
	"net/http"

	"github.com/didip/tollbooth/v7"
	"github.com/gin-gonic/gin"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/httprate"
	"github.com/labstack/echo/v4"
	echomiddleware "github.com/labstack/echo/v4/middleware"
	echo5 "github.com/labstack/echo/v5"
	"github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	throttledmem "github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ululegin "github.com/ulule/limiter/v3/drivers/middleware/gin"
	ululestd "github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ulumem "github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"
)

// Stack is one handler chain of scenario 4: a router (plain net/http, gin,
// echo v4, echo v5 or chi), optionally a rate-limit middleware keyed by the client's address,
// and a handler that answers 200 with no body. The overhead of a limiter is
// its stack's time minus the bare stack of the same router, in the same run.
type Stack struct {
	Router string // "nethttp", "gin", "echo" (v4), "echo5" or "chi"
	Lib    string // "bare" for the router without a limiter
	// SetsHeaders is true for a middleware that writes rate-limit headers
	// (X-RateLimit-* or similar) on every response: the ones the issue's
	// overhead target compares against.
	SetsHeaders bool
	New         func(l Limit) (http.Handler, error)
}

// Stacks returns every stack, the bare ones first within each router. Ours
// is added by stacks_ours.go as the adapters land.
func Stacks() []Stack {
	s := []Stack{
		{Router: "nethttp", Lib: "bare", New: func(Limit) (http.Handler, error) { return okHandler, nil }},
		{Router: "nethttp", Lib: "httprate", SetsHeaders: true, New: httprateStack},
		{Router: "nethttp", Lib: "throttled", SetsHeaders: true, New: throttledStack},
		{Router: "nethttp", Lib: "tollbooth", SetsHeaders: true, New: tollboothStack},
		{Router: "nethttp", Lib: "ulule", SetsHeaders: true, New: ululeStack},
		{Router: "nethttp", Lib: "sethvargo", SetsHeaders: true, New: sethvargoStack},
		{Router: "gin", Lib: "bare", New: func(Limit) (http.Handler, error) { return ginStack(), nil }},
		{Router: "gin", Lib: "ulule", SetsHeaders: true, New: ululeGinStack},
		{Router: "echo", Lib: "bare", New: func(Limit) (http.Handler, error) { return echoStack(), nil }},
		{Router: "echo", Lib: "echo", SetsHeaders: false, New: echoLimiterStack},
		{Router: "echo5", Lib: "bare", New: func(Limit) (http.Handler, error) { return echo5Stack(), nil }},
		{Router: "chi", Lib: "bare", New: func(Limit) (http.Handler, error) { return chiStack(), nil }},
	}
	return append(s, oursStacks()...)
}

// okHandler is the application: 200, no body.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

// httprateStack keys by the peer address (KeyByIP: RemoteAddr, IPv6 to its
// /64), a sliding-window counter of N per Window.
func httprateStack(l Limit) (http.Handler, error) {
	//lint:ignore SA1019 KeyByIP is exactly "the peer address", the key every stack here uses.
	return httprate.LimitBy(int(l.N), l.Window, httprate.KeyByIP)(okHandler), nil
}

// throttledStack is throttled's HTTPRateLimiterCtx over the memstore GCRA
// limiter of scenario 1, varying by RemoteAddr; it sets X-RateLimit-*.
func throttledStack(l Limit) (http.Handler, error) {
	store, err := throttledmem.NewCtx(1_000_000)
	if err != nil {
		return nil, err
	}
	lim, err := newThrottledGCRA(store, l)
	if err != nil {
		return nil, err
	}
	gcra := lim.gcra
	mw := &throttled.HTTPRateLimiterCtx{RateLimiter: gcra, VaryBy: &throttled.VaryBy{RemoteAddr: true}}
	return mw.RateLimit(okHandler), nil
}

// tollboothStack is tollbooth's LimitHandler looking at RemoteAddr only
// (its default also trusts X-Forwarded-For and X-Real-IP); it sets
// X-Rate-Limit-* and RateLimit-* headers.
func tollboothStack(l Limit) (http.Handler, error) {
	lmt := tollbooth.NewLimiter(l.perSecond(), nil)
	lmt.SetBurst(int(l.N))
	lmt.SetIPLookups([]string{"RemoteAddr"})
	return tollbooth.LimitHandler(lmt, okHandler), nil
}

// ululeStack is ulule's net/http middleware over its memory store, keyed by
// the peer address (its default: forwarding headers not trusted); it sets
// X-RateLimit-*.
func ululeStack(l Limit) (http.Handler, error) {
	return ululestd.NewMiddleware(ululeLimiterOf(l)).Handler(okHandler), nil
}

func ululeLimiterOf(l Limit) *ulule.Limiter {
	store := ulumem.NewStoreWithOptions(ulule.StoreOptions{Prefix: "limiter", CleanUpInterval: defaultTTL})
	return ulule.New(store, ulule.Rate{Period: l.Window, Limit: l.N})
}

// sethvargoStack is go-limiter's httplimit middleware over memorystore,
// keyed by the peer address; it sets X-RateLimit-*.
func sethvargoStack(l Limit) (http.Handler, error) {
	store, err := memorystore.New(&memorystore.Config{Tokens: uint64(l.N), Interval: l.Window})
	if err != nil {
		return nil, err
	}
	mw, err := httplimit.NewMiddleware(store, httplimit.IPKeyFunc())
	if err != nil {
		return nil, err
	}
	return mw.Handle(okHandler), nil
}

// ginStack is a gin engine without logger or recovery, one route, the given
// middlewares in front of it.
func ginStack(mws ...gin.HandlerFunc) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.GET("/", append(mws, func(c *gin.Context) { c.Status(http.StatusOK) })...)
	return e
}

// ululeGinStack is ulule's gin middleware over its memory store (key: gin's
// ClientIP, which with no trusted proxies is the peer address).
func ululeGinStack(l Limit) (http.Handler, error) {
	return ginStack(ululegin.NewMiddleware(ululeLimiterOf(l))), nil
}

// echoStack is an echo server, one route, the given middlewares on it.
func echoStack(mws ...echo.MiddlewareFunc) *echo.Echo {
	e := echo.New()
	e.GET("/", func(c echo.Context) error { return c.NoContent(http.StatusOK) }, mws...)
	return e
}

// echoLimiterStack is echo's own RateLimiter middleware over its memory
// store (key: c.RealIP()); it sets no rate-limit headers.
func echoLimiterStack(l Limit) (http.Handler, error) {
	store := echomiddleware.NewRateLimiterMemoryStoreWithConfig(echomiddleware.RateLimiterMemoryStoreConfig{
		Rate: rate.Limit(l.perSecond()), Burst: int(l.N), ExpiresIn: defaultTTL,
	})
	return echoStack(echomiddleware.RateLimiter(store)), nil
}

// echo5Stack is an echo v5 server, one route, the given middlewares on it.
func echo5Stack(mws ...echo5.MiddlewareFunc) *echo5.Echo {
	e := echo5.New()
	e.GET("/", func(c *echo5.Context) error { return c.NoContent(http.StatusOK) }, mws...)
	return e
}

// chiStack is a chi router, one route, the given middlewares in front of it
// (r.Use: they run before chi has matched the route).
func chiStack(mws ...func(http.Handler) http.Handler) *chi.Mux {
	r := chi.NewRouter()
	r.Use(mws...)
	r.Get("/", okHandler)
	return r
}
