package echomw_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/echomw"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// fixedClock makes the output exact: 54 s into a minute.
func fixedClock() time.Time { return time.Unix(1_700_000_034, 0) }

// A per-IP limit for the whole server, and a stricter one per route and
// client on the login route. Denials go through echo's error handler.
func ExampleLimit() {
	lim := core.MustNew(core.FixedWindow(100, time.Minute), core.WithClock(fixedClock))
	defer lim.Close()
	logins := core.MustNew(core.FixedWindow(2, time.Minute), core.WithClock(fixedClock))
	defer logins.Close()

	e := echo.New()
	e.Use(echomw.Limit(lim))
	strict := echomw.Limit(logins, nethttp.WithKeyFunc(keyfunc.Join(keyfunc.Route(), keyfunc.IP())))
	e.POST("/login", func(c echo.Context) error { return c.String(http.StatusOK, "welcome") }, strict)

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
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		var rej *nethttp.Rejection
		if errors.As(err, &rej) && rej.Status == http.StatusTooManyRequests {
			nethttp.ProblemJSON(c.Response(), c.Request(), rej.Decision)
			return
		}
		e.DefaultHTTPErrorHandler(err, c)
	}
	e.Use(echomw.Limit(lim))
	e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "hello") })

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
		return func(c echo.Context) error {
			c.Set("role", c.Request().Header.Get("X-Role"))
			return next(c)
		}
	})
	e.Use(echomw.Limit(lim, echomw.WithSkipper(func(c echo.Context) bool { return c.Get("role") == "admin" })))
	e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "hello") })

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
