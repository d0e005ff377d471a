package echomw_test

import (
	"fmt"
	"log"
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
func Example() {
	general, _ := core.New(core.FixedWindow(100, time.Minute), core.WithClock(fixedClock))
	defer general.Close()
	logins, _ := core.New(core.FixedWindow(2, time.Minute), core.WithClock(fixedClock))
	defer logins.Close()

	perIP, err := echomw.Limit(general)
	if err != nil {
		log.Fatal(err)
	}
	strict, err := echomw.Limit(logins, nethttp.WithKeyFunc(keyfunc.Join(keyfunc.Route(), keyfunc.IP())))
	if err != nil {
		log.Fatal(err)
	}
	e := echo.New()
	e.Use(perIP)
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
