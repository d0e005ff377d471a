// Command llm serves an LLM-style completion endpoint whose clients are
// limited in tokens, not requests: 1,000 tokens per minute per API key.
// Each request is charged its max_tokens before the model runs (so a
// client cannot start more than its quota covers), and settled to the
// tokens the completion used once it is answered; a completion that fails
// (5xx) is not charged at all.
//
//	go run ./examples/llm
//	curl -i -H 'X-API-Key: demo' 'http://127.0.0.1:8080/v1/completions?max_tokens=500' -d 'tell me a story'
//	curl -i -H 'X-API-Key: demo' 'http://127.0.0.1:8080/v1/completions?max_tokens=500' -d 'fail'
//	curl -i -H 'X-API-Key: demo' 'http://127.0.0.1:8080/v1/completions?max_tokens=990' -d ''
//
// The first answer says X-Ratelimit-Remaining: 500 (the estimate is
// charged) and X-Tokens-Used: 4; the settlement gives the other 496 back
// after the response. The second, which the model fails (503), is charged
// 500 and refunded in full, so the third, 990 tokens, still passes.
// The model here is a stand-in: it repeats the prompt's words, at most
// max_tokens of them.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
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

// newHandler returns the endpoint and its limiter; opts go to the limiter
// (the test passes a frozen clock).
func newHandler(opts ...core.Option) (http.Handler, *core.MemoryLimiter) {
	tokens := core.MustNew(core.FixedWindow(1000, time.Minute).WithName("tokens"), opts...)
	limit := nethttp.Middleware(tokens,
		nethttp.WithKeyFunc(keyfunc.Header("X-API-Key")),
		nethttp.WithCostFunc(maxTokens), // the estimate
		nethttp.WithFinalCost(func(status int, _ http.Header, charged int64) int64 {
			if status >= 500 {
				return 0 // the model failed: nothing is charged
			}
			return charged // unless the handler said what was used
		}))
	mux := http.NewServeMux()
	mux.Handle("POST /v1/completions", limit(http.HandlerFunc(complete)))
	return mux, tokens
}

// maxTokens is a request's max_tokens query parameter, 256 without one.
func maxTokens(r *http.Request) (int64, error) {
	v := r.URL.Query().Get("max_tokens")
	if v == "" {
		return 256, nil
	}
	return strconv.ParseInt(v, 10, 64) // a bad value is answered 500, a cost error
}

// complete runs the stand-in model and settles the tokens it used.
func complete(w http.ResponseWriter, r *http.Request) {
	prompt, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil || strings.TrimSpace(string(prompt)) == "fail" {
		http.Error(w, "the model failed", http.StatusServiceUnavailable)
		return
	}
	limit, _ := maxTokens(r)
	words := strings.Fields(string(prompt))
	if int64(len(words)) > limit {
		words = words[:limit]
	}
	used := int64(len(words))
	_ = nethttp.SetFinalCost(r, used) // the middleware refunds max_tokens - used
	w.Header().Set("X-Tokens-Used", strconv.FormatInt(used, 10))
	fmt.Fprintln(w, strings.Join(words, " "))
}
