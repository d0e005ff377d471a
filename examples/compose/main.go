// Command compose serves an API with the common quota of two limits at
// once, per API key: 10 requests per second and 1,000 per day (UTC days),
// one policy made with core.AllOf. A request is admitted only when both
// admit, and then charged to both; a request the daily limit denies is not
// charged to the per-second one (stacked middlewares would charge it).
//
//	go run ./examples/compose
//	curl -i -H 'X-API-Key: demo' http://127.0.0.1:8080/api/items
//	for i in $(seq 11); do curl -s -o /dev/null -w '%{http_code} ' -H 'X-API-Key: demo' http://127.0.0.1:8080/api/items; done
//
// The first answer carries both parts in the IETF fields, and the binding
// part in X-RateLimit-*:
//
//	RateLimit-Policy: "per-second";q=10;w=1, "per-day";q=1000;w=86400
//	RateLimit: "per-second";r=9;t=1, "per-day";r=999;t=<seconds to midnight UTC>
//	X-Ratelimit-Limit: 10
//	X-Ratelimit-Remaining: 9
//
// The loop prints ten 200s and a 429 (Retry-After: 1) within one second;
// after 1,000 in a day, the answer is 429 until midnight UTC.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

func main() {
	port := flag.Int("port", 8080, "TCP `port` to listen on, on 127.0.0.1")
	flag.Parse()
	h, lim := newHandler()
	defer lim.Close()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(*port))
	log.Printf("listening on http://%s (Ctrl-C to stop)", addr)
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// newHandler returns the API and its limiter; opts go to the limiter (the
// test passes a frozen clock).
func newHandler(opts ...core.Option) (http.Handler, *core.MemoryLimiter) {
	lim := core.MustNew(core.AllOf(
		core.FixedWindow(10, time.Second).WithName("per-second"),
		core.FixedWindow(1000, 24*time.Hour).WithName("per-day"), // days of UTC

	), opts...)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/items", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `["apple","pear"]`)
	})
	return nethttp.Middleware(lim,
		nethttp.WithKeyFunc(keyfunc.Header("X-API-Key")),
		nethttp.WithHeaderStyle(nethttp.HeadersBoth),
	)(mux), lim
}
