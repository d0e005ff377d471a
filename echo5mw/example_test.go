package echo5mw_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/echo5mw"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// A per-IP limit for the whole server, and a stricter one per route and
// client on the login route. Denials go through echo's error handler.
func ExampleLimit() {
	lim := core.MustNew(core.FixedWindow(100, time.Minute), core.WithClock(fixedClock))
	defer lim.Close()
	logins := core.MustNew(core.FixedWindow(2, time.Minute), core.WithClock(fixedClock))
	defer logins.Close()

	e := echo.New()
	e.Use(echo5mw.Limit(lim))
	strict := echo5mw.Limit(logins, nethttp.WithKeyFunc(keyfunc.Join(keyfunc.Route(), keyfunc.IP())))
	e.POST("/login", func(c *echo.Context) error { return c.String(http.StatusOK, "welcome") }, strict)

	for range 3 {
		req := httptest.NewRequest(http.MethodPost, "/login", nil)
		req.RemoteAddr = "192.0.2.1:1234"
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		fmt.Printf("%d limit=%s remaining=%s retry-after=%q %s\n", w.Code, w.Header().Get("X-RateLimit-Limit"),
			w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("Retry-After"), strings.TrimSpace(w.Body.String()))
	}
	// Output:
	// 200 limit=2 remaining=1 retry-after="" welcome
	// 200 limit=2 remaining=0 retry-after="" welcome
	// 429 limit=2 remaining=0 retry-after="6" {"message":"Too Many Requests"}
}

// A custom HTTPErrorHandler finds the *nethttp.Rejection, and the decision,
// in the error Limit returns.
func ExampleLimit_errorHandler() {
	lim := core.MustNew(core.FixedWindow(1, time.Minute).WithName("per-ip"), core.WithClock(fixedClock))
	defer lim.Close()

	e := echo.New()
	fallback := echo.DefaultHTTPErrorHandler(false)
	e.HTTPErrorHandler = func(c *echo.Context, err error) {
		var rej *nethttp.Rejection
		if errors.As(err, &rej) && rej.Status == http.StatusTooManyRequests {
			nethttp.ProblemJSON(c.Response(), c.Request(), rej.Decision)
			return
		}
		fallback(c, err)
	}
	e.Use(echo5mw.Limit(lim))
	e.GET("/", func(c *echo.Context) error { return c.String(http.StatusOK, "hello") })

	for range 2 {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		fmt.Println(w.Code, w.Header().Get("Content-Type"))
	}
	// Output:
	// 200 text/plain; charset=UTF-8
	// 429 application/problem+json
}

// Echo's Skipper convention, for a condition on the echo context.
func ExampleWithSkipper() {
	lim := core.MustNew(core.FixedWindow(1, time.Minute), core.WithClock(fixedClock))
	defer lim.Close()

	e := echo.New()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc { // an authentication middleware
		return func(c *echo.Context) error {
			c.Set("role", c.Request().Header.Get("X-Role"))
			return next(c)
		}
	})
	e.Use(echo5mw.Limit(lim, echo5mw.WithSkipper(func(c *echo.Context) bool { return c.Get("role") == "admin" })))
	e.GET("/", func(c *echo.Context) error { return c.String(http.StatusOK, "hello") })

	for _, role := range []string{"admin", "admin", "user", "user"} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("X-Role", role)
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		fmt.Println(role, w.Code)
	}
	// Output:
	// admin 200
	// admin 200
	// user 200
	// user 429
}

// echo's own rate limiter over a Store: its IdentifierExtractor (here an
// API key) picks the key, and the Store writes the rate-limit headers. A
// DenyHandler that returns err answers each refusal with the status Limit
// would (429, or 503 for a failing limiter under nethttp.WithFailClosed);
// echo's default DenyHandler answers 429 {"message":"rate limit exceeded"}.
func ExampleNewStore() {
	lim := core.MustNew(core.FixedWindow(2, time.Minute), core.WithClock(fixedClock))
	defer lim.Close()

	e := echo.New()
	e.Use(middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{
		Store: echo5mw.NewStore(lim, nethttp.WithFailClosed()),
		IdentifierExtractor: func(c *echo.Context) (string, error) {
			if key := c.Request().Header.Get("X-API-Key"); key != "" {
				return key, nil
			}
			return "", errors.New("no API key") // answered by the ErrorHandler: 403
		},
		DenyHandler: func(_ *echo.Context, _ string, err error) error { return err },
	}))
	e.GET("/", func(c *echo.Context) error { return c.String(http.StatusOK, "hello") })

	for range 3 {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("X-API-Key", "k1")
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		fmt.Printf("%d remaining=%s retry-after=%q %s\n", w.Code, w.Header().Get("X-RateLimit-Remaining"),
			w.Header().Get("Retry-After"), strings.TrimSpace(w.Body.String()))
	}
	// Output:
	// 200 remaining=1 retry-after="" hello
	// 200 remaining=0 retry-after="" hello
	// 429 remaining=0 retry-after="6" {"message":"Too Many Requests"}
}
