package grpcmw_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/grpcmw"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
)

func TestClientWaitsRetryInfoAndRetriesOnce(t *testing.T) {
	ev := newEvents()
	lim, err := core.New(core.TokenBucket(1, 100*time.Millisecond)) // the real clock: the client really waits
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	srv := serveUnary(t, lim, grpcmw.WithHook(ev.hook))
	c := dial(t, srv, "127.0.0.1", grpc.WithChainUnaryInterceptor(grpcmw.UnaryClientInterceptor()))
	start := time.Now()
	for i := range 2 {
		if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	elapsed := time.Since(start)
	e := ev.list()
	if got := outcomes(e); got != fmt.Sprint([]nethttp.Outcome{nethttp.OutcomeAllowed, nethttp.OutcomeDenied, nethttp.OutcomeAllowed}) {
		t.Fatalf("server decided %s, want allowed, denied, then the retry allowed", got)
	}
	if retry := e[1].Decision.RetryAfter; elapsed < retry {
		t.Errorf("the calls took %v, less than the RetryInfo delay %v", elapsed, retry)
	}
}

// denyingServer is a server whose only caller has used its minute's one
// call, 6 s before the window ends: every call gets RetryInfo 6s.
func denyingServer(t *testing.T, p core.Policy) (*server, *events) {
	ev := newEvents()
	srv := serveUnary(t, newLimiter(t, p), grpcmw.WithHook(ev.hook), grpcmw.WithCostFunc(costOf))
	if r := unaryCallFrom(t, dial(t, srv, "127.0.0.1")); r.code != codes.OK {
		t.Fatalf("first call: %v", r.code)
	}
	return srv, ev
}

// costOf is the request's ResponseSize, or 1.
func costOf(_ context.Context, _ string, msg any) (int64, error) {
	return max(int64(msg.(*testpb.SimpleRequest).GetResponseSize()), 1), nil
}

func TestClientRetryCeilings(t *testing.T) {
	for _, tt := range []struct {
		name     string
		policy   core.Policy
		req      *testpb.SimpleRequest
		timeout  time.Duration
		waits    []time.Duration // what the interceptor waits
		attempts int
	}{
		{"retries once, and returns the second denial", core.FixedWindow(1, time.Minute), &testpb.SimpleRequest{}, 0, []time.Duration{6 * time.Second}, 2},
		{"returns at once when the deadline would pass first", core.FixedWindow(1, time.Minute), &testpb.SimpleRequest{}, 5 * time.Second, nil, 1},
		{"returns at once when RetryInfo is above MaxRetryDelay", core.FixedWindow(1, time.Hour), &testpb.SimpleRequest{}, 0, nil, 1},
		{"does not retry a cost above capacity (no RetryInfo)", core.FixedWindow(1, time.Minute), &testpb.SimpleRequest{ResponseSize: 2}, 0, nil, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, ev := denyingServer(t, tt.policy)
			var waits []time.Duration
			wait := func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
			c := dial(t, srv, "127.0.0.1", grpc.WithChainUnaryInterceptor(grpcmw.RetryOnce(wait)))
			ctx := context.Background()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			_, err := c.UnaryCall(ctx, tt.req)
			if statusCode(err) != codes.ResourceExhausted {
				t.Errorf("got %v, want ResourceExhausted", err)
			}
			if fmt.Sprint(waits) != fmt.Sprint(tt.waits) {
				t.Errorf("waited %v, want %v", waits, tt.waits)
			}
			if got := len(ev.list()) - 1; got != tt.attempts {
				t.Errorf("the server got %d attempts, want %d", got, tt.attempts)
			}
		})
	}
}

// TestClientDeadlineUnderBusyCPU: with every CPU busy, a call whose
// deadline ends before its RetryInfo delay still returns at once with the
// denial, well within its deadline.
func TestClientDeadlineUnderBusyCPU(t *testing.T) {
	srv, _ := denyingServer(t, core.FixedWindow(1, time.Minute))
	c := dial(t, srv, "127.0.0.1", grpc.WithChainUnaryInterceptor(grpcmw.UnaryClientInterceptor()))
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for !stop.Load() { // spin: keep a CPU busy
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
	if statusCode(err) != codes.ResourceExhausted {
		t.Errorf("got %v, want ResourceExhausted", err)
	}
	if elapsed := time.Since(start); elapsed >= 5*time.Second {
		t.Errorf("took %v: want the denial before the deadline", elapsed)
	}
}

func outcomes(e []nethttp.Event) string {
	var o []nethttp.Outcome
	for _, ev := range e {
		o = append(o, ev.Outcome)
	}
	return fmt.Sprint(o)
}
