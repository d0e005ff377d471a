package ginmw_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/ginmw"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// fixedClock makes the output exact: 54 s into a minute.
func fixedClock() time.Time { return time.Unix(1_700_000_034, 0) }

// A per-IP limit for the whole engine, and a stricter one per route and
// client on the login route.
func ExampleLimit() {
	gin.SetMode(gin.ReleaseMode)
	lim := core.MustNew(core.FixedWindow(100, time.Minute), core.WithClock(fixedClock))
	defer lim.Close()
	logins := core.MustNew(core.FixedWindow(2, time.Minute), core.WithClock(fixedClock))
	defer logins.Close()

	r := gin.New()
	r.Use(ginmw.Limit(lim))
	strict := ginmw.Limit(logins, nethttp.WithKeyFunc(keyfunc.Join(keyfunc.Route(), keyfunc.IP())))
	r.POST("/login", strict, func(c *gin.Context) { c.String(http.StatusOK, "welcome") })

	for range 3 {
		req := httptest.NewRequest(http.MethodPost, "/login", nil)
		req.RemoteAddr = "192.0.2.1:1234"
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		fmt.Printf("%d limit=%s remaining=%s retry-after=%q\n", w.Code, w.Header().Get("X-RateLimit-Limit"),
			w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 limit=2 remaining=1 retry-after=""
	// 200 limit=2 remaining=0 retry-after=""
	// 429 limit=2 remaining=0 retry-after="6"
}

// Keying on gin's ClientIP is opt-in, and safe only once gin knows which
// proxies to trust.
func ExampleClientIP() {
	gin.SetMode(gin.ReleaseMode)
	lim := core.MustNew(core.FixedWindow(1, time.Minute), core.WithClock(fixedClock))
	defer lim.Close()
	r := gin.New()
	if err := r.SetTrustedProxies([]string{"10.0.0.0/8"}); err != nil {
		panic(err)
	}
	r.GET("/", ginmw.Limit(lim, nethttp.WithKeyFunc(ginmw.ClientIP())), func(c *gin.Context) { c.String(http.StatusOK, "ok") })

	for _, client := range []string{"203.0.113.1", "203.0.113.2", "203.0.113.1"} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = "10.0.0.5:4321" // the proxy
		req.Header.Set("X-Forwarded-For", client)
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		fmt.Println(client, w.Code)
	}
	// Output:
	// 203.0.113.1 200
	// 203.0.113.2 200
	// 203.0.113.1 429
}
