package nethttp_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// A hook sees every request the middleware decides: metrics and logs. It
// runs on the request's goroutine, so it must be fast.
func ExampleWithHook() {
	lim := core.MustNew(core.FixedWindow(1, time.Minute).WithName("per-ip"), core.WithClock(fixedClock))
	defer lim.Close()
	h := nethttp.Middleware(lim, nethttp.WithHook(func(ev nethttp.Event) {
		// ev.Key is personal data (an IP, an API key): keep it out of
		// labels and logs.
		fmt.Printf("%s policy=%s remaining=%d err=%v\n",
			ev.Outcome, ev.Decision.Policy.Name, ev.Decision.Remaining, ev.Err)
	}))(http.HandlerFunc(hello))

	for range 2 {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	// Output:
	// allowed policy=per-ip remaining=0 err=<nil>
	// denied policy=per-ip remaining=0 err=<nil>
}

// Plans: one limiter, and each request decided under the policy of its API
// key's plan. The headers describe the plan applied.
func ExampleWithPolicyFunc() {
	free := core.FixedWindow(100, time.Hour).WithName("free")
	pro := core.FixedWindow(10_000, time.Hour).WithName("pro")
	lim := core.MustNew(free, core.WithClock(fixedClock))
	defer lim.Close()

	plan := func(_ *http.Request, apiKey string) (core.Policy, error) {
		switch {
		case strings.HasPrefix(apiKey, "pro-"):
			return pro, nil
		case strings.HasPrefix(apiKey, "free-"):
			return free, nil
		}
		// A lookup that fails is a limiter failure: served (or 503 with
		// WithFailClosed), and the hooks get the error.
		return core.Policy{}, errors.New("unknown plan")
	}
	h := nethttp.Middleware(lim,
		nethttp.WithKeyFunc(keyfunc.Header("X-API-Key")),
		nethttp.WithPolicyFunc(plan),
		nethttp.WithHeaderStyle(nethttp.HeadersBoth),
	)(http.HandlerFunc(hello))

	for _, apiKey := range []string{"free-alice", "pro-bob"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-API-Key", apiKey)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%s: %d limit=%s remaining=%s policy=%s\n", apiKey, w.Code,
			w.Header().Get(nethttp.HeaderLimit), w.Header().Get(nethttp.HeaderRemaining),
			w.Header().Get(nethttp.HeaderRateLimitPolicy))
	}
	// Output:
	// free-alice: 200 limit=100 remaining=99 policy="free";q=100;w=3600
	// pro-bob: 200 limit=10000 remaining=9999 policy="pro";q=10000;w=3600
}
