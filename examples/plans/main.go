// Command plans serves an API whose clients are limited by plan: each API
// key is on the free plan (5 requests per minute) or the pro plan (50 per
// minute), looked up per request, all in one limiter. An admin server on
// another port moves a key between plans and changes a plan's limit while
// traffic runs; a key keeps what it has used. /metrics (on the admin port)
// shows the decisions by plan and outcome, for Prometheus.
//
//	go run ./examples/plans
//	curl -i -H 'X-API-Key: alice' http://127.0.0.1:8080/api/items   # X-RateLimit-Limit: 5, RateLimit-Policy: "free";q=5;w=60
//	curl -i -H 'X-API-Key: bob' http://127.0.0.1:8080/api/items     # X-RateLimit-Limit: 50, "pro"
//	curl -i -H 'X-API-Key: eve' http://127.0.0.1:8080/api/items     # 401: a key no plan knows
//	curl -X PUT -d pro http://127.0.0.1:8081/admin/keys/alice/plan  # alice upgraded
//	curl -X PUT -d 500 http://127.0.0.1:8081/admin/plans/pro/limit  # every pro key: 500 per minute
//	curl http://127.0.0.1:8081/admin/keys/alice                    # alice's usage under her plan
//	curl http://127.0.0.1:8081/metrics
//
// A request without an API key, or with a key on no plan, is answered 401
// Unauthorized with a WWW-Authenticate header naming X-API-Key, and no
// limiter is asked (such requests are cheap to answer; an API worried about
// clients guessing keys puts a per-IP limit in front). The admin server
// listens on loopback only and has no authentication: a real one sits
// behind the operator's own access control.
package main

import (
	"flag"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/go-ratelimit/ratelimit/core"
)

func main() {
	port := flag.Int("port", 8080, "TCP `port` of the API, on 127.0.0.1")
	adminPort := flag.Int("admin-port", 8081, "TCP `port` of the admin server and /metrics, on 127.0.0.1")
	flag.Parse()

	reg := prometheus.NewRegistry()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	app, err := newApp(reg, logger)
	if err != nil {
		log.Fatal(err)
	}
	defer app.Close()

	api := &http.Server{Addr: addr(*port), Handler: app.API(), ReadHeaderTimeout: 10 * time.Second}
	admin := &http.Server{Addr: addr(*adminPort), Handler: app.Admin(reg), ReadHeaderTimeout: 10 * time.Second}
	go func() { log.Fatal(admin.ListenAndServe()) }()
	log.Printf("API on http://%s, admin and /metrics on http://%s (Ctrl-C to stop)", api.Addr, admin.Addr)
	log.Fatal(api.ListenAndServe())
}

func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// The plans and the keys the example starts with.
var (
	startPlans = map[string]core.Policy{
		"free": core.TokenBucket(5, time.Minute).WithName("free"),
		"pro":  core.TokenBucket(50, time.Minute).WithName("pro"),
	}
	startKeys = map[string]string{"alice": "free", "bob": "pro"}
)
