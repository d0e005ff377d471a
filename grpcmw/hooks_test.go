package grpcmw_test

import (
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/grpcmw"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// TestHookEvents: the events have the shape of nethttp's, Request nil.
func TestHookEvents(t *testing.T) {
	ev := newEvents()
	p := core.FixedWindow(1, time.Minute).WithName("one")
	lim := newLimiter(t, p)
	srv := serveUnary(t, lim, grpcmw.WithHook(ev.hook), grpcmw.WithKey(grpcmw.Metadata("x-api-key")))
	c := dial(t, srv, "127.0.0.1")
	unaryCallFrom(t, c, "x-api-key", "k")
	unaryCallFrom(t, c, "x-api-key", "k")
	unaryCallFrom(t, c)
	e := ev.list()
	if len(e) != 3 {
		t.Fatalf("got %d events, want 3", len(e))
	}
	at := t0.Add(54 * time.Second).UTC() // newLimiter's clock: the decisions' At
	for i, want := range []nethttp.Event{
		{Key: "k", Cost: 1, Outcome: nethttp.OutcomeAllowed, LimiterCalled: true,
			Decision: core.Decision{Allowed: true, Limit: 1, Remaining: 0, ResetAfter: 6 * time.Second, Policy: p, At: at}},
		{Key: "k", Cost: 1, Outcome: nethttp.OutcomeDenied, LimiterCalled: true,
			Decision: core.Decision{Limit: 1, ResetAfter: 6 * time.Second, RetryAfter: 6 * time.Second, Policy: p, At: at}},
		{Outcome: nethttp.OutcomeKeyError, Decision: core.Decision{Limit: 1, Policy: p}},
	} {
		if i == 2 {
			want.Err = e[2].Err // checked below
		}
		if e[i].Request != nil || !sameEvent(e[i], want) {
			t.Errorf("event %d: got %+v, want %+v", i+1, e[i], want)
		}
	}
	if e[0].Latency <= 0 || e[2].Latency != 0 {
		t.Errorf("latencies %v and %v: want the limiter call's, then 0 before any call", e[0].Latency, e[2].Latency)
	}
	if got := e[2].Err.Error(); got != "keyfunc: no key in request: metadata x-api-key is missing or empty" {
		t.Errorf("key error: %q", got)
	}
}
