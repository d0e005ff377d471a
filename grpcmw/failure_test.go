package grpcmw_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/grpcmw"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
)

var failingPolicy = core.FixedWindow(10, time.Minute).WithName("shared")

func failing(err error) coretest.Failing { return coretest.Failing{Err: err, P: failingPolicy} }

// breakerOpen is a store error that knows when to retry, as the Redis
// store's are while its circuit breaker is open.
type breakerOpen struct{}

func (breakerOpen) Error() string             { return "store: circuit breaker open" }
func (breakerOpen) RetryAfter() time.Duration { return 1500 * time.Millisecond }

func TestLimiterFailures(t *testing.T) {
	down := errors.New("store: connection refused")
	for _, tt := range []struct {
		name    string
		err     error
		opts    []grpcmw.Option
		code    codes.Code
		outcome nethttp.Outcome
		retry   time.Duration
	}{
		{"fails open by default", down, nil, codes.OK, nethttp.OutcomeFailedOpen, 0},
		{"answers Unavailable when failing closed", down, []grpcmw.Option{grpcmw.WithFailClosed()}, codes.Unavailable, nethttp.OutcomeFailedClosed, 0},
		{"gives RetryInfo when the failure knows when to retry", breakerOpen{}, []grpcmw.Option{grpcmw.WithFailClosed()}, codes.Unavailable, nethttp.OutcomeFailedClosed, 1500 * time.Millisecond},
		{"answers Unavailable for a closed limiter, even failing open", fmt.Errorf("store: %w", core.ErrClosed), nil, codes.Unavailable, nethttp.OutcomeFailedClosed, 0},
		{"serves under dry run, even failing closed", down, []grpcmw.Option{grpcmw.WithFailClosed(), grpcmw.WithDryRun()}, codes.OK, nethttp.OutcomeFailedOpen, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ev := newEvents()
			srv := serveUnary(t, failing(tt.err), append(tt.opts, grpcmw.WithHook(ev.hook))...)
			r := unaryCallFrom(t, dial(t, srv, "127.0.0.1"))
			if r.code != tt.code {
				t.Errorf("code: got %v, want %v", r.code, tt.code)
			}
			if got := r.retry.GetRetryDelay().AsDuration(); got != tt.retry {
				t.Errorf("RetryInfo: got %v, want %v", got, tt.retry)
			}
			// What is known of the limit, never Remaining or Reset.
			if r.field(t, "x-ratelimit-limit") != "10" || r.field(t, "x-ratelimit-remaining") != "" || r.field(t, "x-ratelimit-reset") != "" {
				t.Errorf("header metadata: got %v, want x-ratelimit-limit 10 alone", r.header)
			}
			served := int64(0)
			if tt.code == codes.OK {
				served = 1
			}
			if got := srv.svc.calls.Load(); got != served {
				t.Errorf("handler served %d calls, want %d", got, served)
			}
			want := nethttp.Event{Key: "127.0.0.1", Cost: 1, Outcome: tt.outcome, Decision: core.Decision{Limit: 10, Policy: failingPolicy}, Err: tt.err, LimiterCalled: true}
			if e := ev.list(); len(e) != 1 || !sameEvent(e[0], want) {
				t.Errorf("events: got %+v, want one %+v", e, want)
			}
		})
	}
}

func TestCost(t *testing.T) {
	cost := grpcmw.WithCostFunc(func(_ context.Context, _ string, msg any) (int64, error) {
		req := msg.(*testpb.SimpleRequest)
		if req.GetResponseSize() < 0 {
			return 0, errors.New("negative size")
		}
		return int64(req.GetResponseSize()), nil
	})
	ev := newEvents()
	srv := serveUnary(t, newLimiter(t, core.FixedWindow(5, time.Minute)), cost, grpcmw.WithHook(ev.hook))
	c := dial(t, srv, "127.0.0.1")
	for _, tt := range []struct {
		size    int32
		code    codes.Code
		retry   bool
		outcome nethttp.Outcome
	}{
		{3, codes.OK, false, nethttp.OutcomeAllowed},
		{3, codes.ResourceExhausted, true, nethttp.OutcomeDenied},  // 2 left
		{6, codes.ResourceExhausted, false, nethttp.OutcomeDenied}, // above capacity: waiting cannot help
		{0, codes.Internal, false, nethttp.OutcomeCostError},
		{-1, codes.Internal, false, nethttp.OutcomeCostError},
		{2, codes.OK, false, nethttp.OutcomeAllowed},
	} {
		_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{ResponseSize: tt.size})
		r := replyOf(err, nil)
		if r.code != tt.code || (r.retry != nil) != tt.retry {
			t.Errorf("cost %d: got %v with RetryInfo %v, want %v with RetryInfo %v", tt.size, r.code, r.retry, tt.code, tt.retry)
		}
		if tt.code == codes.ResourceExhausted && len(r.quota.GetViolations()) != 1 {
			t.Errorf("cost %d: QuotaFailure %v, want one violation", tt.size, r.quota)
		}
		if e := ev.list(); e[len(e)-1].Outcome != tt.outcome {
			t.Errorf("cost %d: outcome %v, want %v", tt.size, e[len(e)-1].Outcome, tt.outcome)
		}
	}
	if got := srv.svc.calls.Load(); got != 2 {
		t.Errorf("handler served %d calls, want 2", got)
	}
}

func TestLeakyBucketDelay(t *testing.T) {
	// On a stopped clock each admitted call waits 100 ms more than the one
	// before: 0, 100 ms, 200 ms.
	ev := newEvents()
	srv := serveUnary(t, newLimiter(t, core.LeakyBucket(10, time.Second)), grpcmw.WithHook(ev.hook))
	c := dial(t, srv, "127.0.0.1")
	start := time.Now()
	for range 2 {
		if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if elapsed := time.Since(start); elapsed < 100*time.Millisecond {
		t.Errorf("two calls took %v, want at least the second one's delay of 100ms", elapsed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
	if statusCode(err) != codes.DeadlineExceeded {
		t.Errorf("a call whose deadline ends during its 200ms delay: got %v, want DeadlineExceeded", err)
	}
	if got := srv.svc.calls.Load(); got != 2 {
		t.Errorf("handler served %d calls, want 2", got)
	}
	// The server sees its context end when the client's deadline passes.
	ev.waitFor(t, 3)
	if e := ev.list(); len(e) != 3 || e[2].Outcome != nethttp.OutcomeCanceled || e[2].Decision.Delay != 200*time.Millisecond {
		t.Errorf("events: got %+v, want the third canceled during its 200ms delay", e)
	}
}

// sameEvent compares events, their errors by identity or text.
func sameEvent(got, want nethttp.Event) bool {
	errOK := got.Err == want.Err || got.Err != nil && want.Err != nil && errors.Is(got.Err, want.Err)
	got.Err, want.Err, got.Latency = nil, nil, 0
	return errOK && got == want
}

// panicText is the text of what f panics with, "" if it does not.
func panicText(f func()) (s string) {
	defer func() {
		if v := recover(); v != nil {
			s = fmt.Sprint(v)
		}
	}()
	f()
	return ""
}
