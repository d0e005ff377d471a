package sloghook_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/nethttp/sloghook"
)

// A burst of 1,000 requests from one client against a limit of 2 per minute
// logs two lines: the first denial at once, then the count of the others
// (here at shutdown, by Flush; in a running server, when the minute has
// passed).
func Example() {
	// A clock that the example moves, and logs without the time, so that
	// the output is exact.
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))

	logs := sloghook.New(logger, sloghook.WithClock(clock))
	lim := core.MustNew(core.FixedWindow(2, time.Minute).WithName("per-ip"), core.WithClock(clock))
	defer lim.Close()
	h := nethttp.Middleware(lim, nethttp.WithHook(logs.Handle))(http.HandlerFunc(
		func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "hello") }))

	for range 1000 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	}
	now = now.Add(20 * time.Second)
	logs.Flush()
	// Output:
	// level=INFO msg="ratelimit: requests denied" outcome=denied policy=per-ip count=1
	// level=INFO msg="ratelimit: requests denied" outcome=denied policy=per-ip count=997 period=20s
}
