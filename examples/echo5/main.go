// Command echo5 serves a small API rate-limited with package echo5mw (echo
// v5), on 127.0.0.1:
//   - every request: 100 per minute per client IP (token bucket, e.Use);
//   - POST /login: also 5 per minute per client IP (fixed window, on the
//     route);
//   - GET /api/items: also 1000 per hour per X-API-Key (sliding window, on
//     the /api group); a request without a key is answered 401.
//
// Denials go through echo's error handler ({"message":"Too Many Requests"}),
// with the rate-limit headers kept.
//
//	go run ./examples/echo5 -port 8080
//	curl -i http://127.0.0.1:8080/
//	for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code}\n' -X POST http://127.0.0.1:8080/login; done
//	curl -i -H 'X-API-Key: demo' http://127.0.0.1:8080/api/items
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/echo5mw"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

func main() {
	port := flag.Int("port", 8080, "TCP `port` to listen on, on 127.0.0.1")
	flag.Parse()

	h, closeLimits := newHandler()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(*port))
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("listening on http://%s (Ctrl-C to stop)", addr)
	err := srv.ListenAndServe()
	closeLimits()
	log.Fatal(err)
}

// newHandler builds the echo server and its three limits. opts go to every
// limiter (the test passes a fixed clock). The returned function stops the
// limiters' background goroutines.
func newHandler(opts ...core.Option) (http.Handler, func()) {
	perIP := core.MustNew(core.TokenBucket(100, time.Minute).WithName("per-ip"), opts...)
	logins := core.MustNew(core.FixedWindow(5, time.Minute).WithName("login"), opts...)
	perKey := core.MustNew(core.SlidingWindow(1000, time.Hour).WithName("per-api-key"), opts...)
	closeAll := func() { _, _, _ = perIP.Close(), logins.Close(), perKey.Close() }
	both := nethttp.WithHeaderStyle(nethttp.HeadersBoth)

	e := echo.New()
	e.Use(echo5mw.Limit(perIP, both))
	e.GET("/", func(c *echo.Context) error { return c.String(http.StatusOK, "hello\n") })
	login := echo5mw.Limit(logins, both, nethttp.WithKeyFunc(keyfunc.Join(keyfunc.Route(), keyfunc.IP())))
	e.POST("/login", func(c *echo.Context) error { return c.String(http.StatusOK, "welcome\n") }, login)
	api := e.Group("/api", echo5mw.Limit(perKey, both,
		nethttp.WithKeyFunc(keyfunc.Header("X-API-Key")), nethttp.WithKeyErrorHandler(needKey)))
	api.GET("/items", func(c *echo.Context) error { return c.JSON(http.StatusOK, []string{"apple", "pear"}) })
	return e, closeAll
}

// needKey answers an API request without a key.
func needKey(w http.ResponseWriter, _ *http.Request, _ error) {
	w.Header().Set("WWW-Authenticate", `ApiKey realm="example", header="X-API-Key"`)
	http.Error(w, "an X-API-Key header is required", http.StatusUnauthorized)
}
