// Command redis shows one limit shared by two app servers through one
// Redis: it starts two HTTP servers on two loopback ports, each with its own
// Redis client and limiter (as two processes would have), sends requests to
// them in turn, prints that together they admitted exactly the limit, and
// then keeps serving until interrupted, for you to try with curl:
//
//	go run ./examples/redis                        # Redis on 127.0.0.1:6379
//	go run ./examples/redis -redis 127.0.0.1:6380  # or REDIS_ADDR=...
//	curl -i http://127.0.0.1:8081/                 # app server A (-a); B is on 8082 (-b)
//
// It starts no Redis itself. With Debian's redis-server installed,
// `redis-server --port 6380 --save ""` in another terminal is enough. Each
// run uses keys of its own, which Redis expires a minute later.
//
// It checks Redis at startup with the limiter's Ping bounded by a timeout,
// as a server should: redisstore.New does not contact Redis. A real server would log
// the error and start anyway, its limiters deciding locally, each with the
// shared policy, until the circuit breaker's probe gets an answer; this
// demo, whose point is the shared limit, stops instead.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/redisstore"
)

func main() {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	flag.StringVar(&addr, "redis", addr, "Redis `address`; $REDIS_ADDR sets the default")
	limit := flag.Int64("limit", 10, "requests per minute per client, shared by both servers")
	requests := flag.Int("requests", 30, "requests to send, alternating between the servers, before serving")
	listenA := flag.String("a", "127.0.0.1:8081", "`address` of app server A")
	listenB := flag.String("b", "127.0.0.1:8082", "`address` of app server B")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	servers, err := run(ctx, os.Stdout, addr, *limit, *requests, *listenA, *listenB)
	if err != nil {
		log.Fatal(err)
	}
	defer closeAll(servers)
	fmt.Printf("\nserving until interrupted: curl -i %s\n", servers[0].url)
	<-ctx.Done()
}

// appServer is one app server: its own Redis client and limiter in front
// of a handler, on a loopback port.
type appServer struct {
	name string
	url  string
	rdb  *redis.Client
	lim  *redisstore.Limiter
	srv  *http.Server
}

func startAppServer(name, listen, redisAddr, prefix string, p core.Policy) (*appServer, error) {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	lim, err := redisstore.New(rdb, p, redisstore.WithPrefix(prefix),
		redisstore.WithBreakerHook(func(c redisstore.BreakerChange) {
			log.Printf("app server %s: Redis breaker %v -> %v: %v", name, c.From, c.To, c.Err)
		}))
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	// The startup check, through the limiter: it keeps its context's
	// bound, where rdb.Ping with go-redis's defaults does not (its retries
	// and socket timeouts).
	pingCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err = lim.Ping(pingCtx)
	cancel()
	if err != nil {
		_ = lim.Close()
		_ = rdb.Close()
		return nil, fmt.Errorf("no Redis at %s (start one, or pass -redis / REDIS_ADDR): %w", redisAddr, err)
	}
	mw := nethttp.Middleware(lim)
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		_ = lim.Close()
		_ = rdb.Close()
		return nil, err
	}
	a := &appServer{name: name, url: "http://" + ln.Addr().String() + "/", rdb: rdb, lim: lim}
	a.srv = &http.Server{
		Handler: mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "hello from %s\n", name)
		})),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

func (a *appServer) close() {
	_ = a.srv.Close()
	_ = a.lim.Close()
	_ = a.rdb.Close()
}

func closeAll(servers []*appServer) {
	for _, a := range servers {
		a.close()
	}
}

// run starts the two app servers on listen (A, then B), sends requests
// alternately and reports to out, and returns the servers, still serving.
// It returns an error (and closes them) if Redis cannot be reached or if
// the servers together admitted anything but the limit.
func run(ctx context.Context, out io.Writer, redisAddr string, limit int64, requests int, listen ...string) ([]*appServer, error) {
	p := core.TokenBucket(limit, time.Minute).WithName("shared")
	prefix := fmt.Sprintf("example-redis-%d", time.Now().UnixNano()) // this run's own keys
	var servers []*appServer
	ok := false
	defer func() {
		if !ok {
			closeAll(servers)
		}
	}()
	for i, name := range []string{"A", "B"} {
		a, err := startAppServer(name, listen[i], redisAddr, prefix, p)
		if err != nil {
			return nil, err
		}
		servers = append(servers, a)
		fmt.Fprintf(out, "app server %s on %s\n", name, a.url)
	}
	fmt.Fprintf(out, "policy: %v, one limit for both servers through Redis at %s\n\n", p, redisAddr)

	client := &http.Client{Timeout: 5 * time.Second}
	admitted := map[string]int{}
	total := 0
	for i := range requests {
		a := servers[i%len(servers)]
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			admitted[a.name]++
			total++
		case http.StatusTooManyRequests:
		default:
			return nil, fmt.Errorf("server %s answered %s", a.name, resp.Status)
		}
		fmt.Fprintf(out, "request %2d -> server %s: %d  X-RateLimit-Remaining: %s\n",
			i+1, a.name, resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}
	fmt.Fprintf(out, "\nadmitted %d of %d (server A %d, server B %d) with a limit of %d: ",
		total, requests, admitted["A"], admitted["B"], limit)
	if want := min(int64(requests), limit); int64(total) != want {
		fmt.Fprintln(out, "the limit did NOT hold")
		return nil, errors.New("the shared limit did not hold")
	}
	fmt.Fprintln(out, "the limit held across both servers")
	// The requests above came from 127.0.0.1, as a curl on this machine
	// will: forget them, so that curl starts with the whole quota. Each
	// server's Reset: one deletes the key in Redis, and each clears its
	// own deny cache (a process's cache is its own).
	key, err := keyfunc.CanonicalIP("127.0.0.1")
	for _, a := range servers {
		if err == nil {
			err = a.lim.Reset(ctx, key)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("forgetting the demo's own requests: %w", err)
	}
	fmt.Fprintf(out, "forgot those requests (Limiter.Reset of key %q): curl starts with %d\n", key, limit)
	ok = true
	return servers, nil
}
