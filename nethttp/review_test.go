package nethttp_test

// A test from an outside review of issue 26 (cost settled after the
// response). It fails on the code it was written against: see the commit
// that added it.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// TestFinalCostCanceledDuringDelayLeavesNoCharge: WithFinalCost says "A
// request ... canceled is not [settled], as nothing was charged". A
// leaky-bucket request admitted with a Delay whose client leaves during the
// wait is answered 503 and never served (OutcomeCanceled), yet the limiter
// charged it, and no settlement gives it back: the key keeps one unit
// charged for a request nobody served, whatever the final-cost function
// (here "no charge for a 5xx") would have said.
func TestFinalCostCanceledDuringDelayLeavesNoCharge(t *testing.T) {
	clk := newClock(t0)
	lim := newLimiter(t, core.LeakyBucket(1, time.Second).WithBurst(3), clk)
	var statuses []int
	rec := settleRecorder{MemoryLimiter: lim, done: make(chan int64, 10)}
	h := wrap(t, rec, nethttp.WithFinalCost(func(status int, _ http.Header, charged int64) int64 {
		statuses = append(statuses, status)
		if status >= 500 {
			return 0
		}
		return charged
	}))
	if w := get(h, ""); w.Code != http.StatusOK {
		t.Fatalf("first request: %d, want 200", w.Code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client is gone before its Delay (1 s) ends
	r := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx)
	if w := send(h, r, ""); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("second request, its context ended during its Delay: %d, want 503", w.Code)
	}
	// The settlement runs on a goroutine of its own (WithFinalCost): the
	// only one is the canceled request's, the first keeping its charge.
	if cost := nextSettle(t, rec.done); cost != 0 {
		t.Errorf("the canceled request settled at %d, want 0", cost)
	}
	peek, _ := lim.Peek(context.Background(), "192.0.2.1")
	if peek.Remaining != 2 {
		t.Errorf("after one request served and one canceled during its delay (statuses given to the final-cost function: %v): Remaining %d, want 2 (burst 3, one unit charged)", statuses, peek.Remaining)
	}
}
