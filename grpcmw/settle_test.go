package grpcmw_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/grpcmw"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// settling is a memory limiter whose Settle reports each settlement on
// done, failing with err instead of calling the limiter when err is set.
type settling struct {
	*core.MemoryLimiter
	err  error
	done chan settled
}

// settled is one call of Settle: its costs, its error and how long its
// context gave it.
type settled struct {
	charged, cost int64
	err           error
	budget        time.Duration
}

func newSettling(t *testing.T, p core.Policy) settling {
	return settling{MemoryLimiter: newLimiter(t, p), done: make(chan settled, 16)}
}

func (s settling) Settle(ctx context.Context, key string, d core.Decision, charged, cost int64) error {
	err := s.err
	if err == nil {
		err = s.MemoryLimiter.Settle(ctx, key, d, charged, cost)
	}
	deadline, _ := ctx.Deadline()
	s.done <- settled{charged: charged, cost: cost, err: err, budget: time.Until(deadline)}
	return err
}

// next returns the next settlement, failing t if none comes within 10
// seconds (a timeout for a broken build, not a measurement).
func (s settling) next(t *testing.T) settled {
	t.Helper()
	select {
	case st := <-s.done:
		return st
	case <-time.After(10 * time.Second):
		t.Fatal("no settlement")
		return settled{}
	}
}

// finalCostCall sends one UnaryCall whose handler sets its final cost to
// final (none when final < 0) and answers with code.
func finalCostCall(t *testing.T, c testpb.TestServiceClient, final int, code codes.Code) reply {
	t.Helper()
	req := &testpb.SimpleRequest{}
	if final >= 0 {
		req.Payload = &testpb.Payload{Body: make([]byte, final)}
	}
	if code != codes.OK {
		req.ResponseStatus = &testpb.EchoStatus{Code: int32(code)}
	}
	var header metadata.MD
	_, err := c.UnaryCall(context.Background(), req, grpc.Header(&header))
	return replyOf(err, header)
}

func keepCharge(_ context.Context, _ string, _ any, _ error, charged int64) int64 { return charged }

func costOf5(context.Context, string, any) (int64, error) { return 5, nil }

func TestFinalCostSetByTheHandlerSettlesTheDifference(t *testing.T) {
	lim := newSettling(t, core.FixedWindow(20, time.Minute))
	srv := serveUnary(t, lim, grpcmw.WithCostFunc(costOf5), grpcmw.WithFinalCost(keepCharge))
	c := dial(t, srv, "127.0.0.1")

	steps := []struct {
		final     int
		remaining string // before the settlement of the call
		settles   bool
		want      settled
	}{
		{final: 2, remaining: "15", settles: true, want: settled{charged: 5, cost: 2}}, // a refund of 3
		{final: 8, remaining: "13", settles: true, want: settled{charged: 5, cost: 8}}, // a debt of 3
		{final: 5, remaining: "5", settles: false},                                     // the charge itself
		{final: -1, remaining: "0", settles: false},                                    // none set: WithFinalCost's f keeps it
	}
	for i, s := range steps {
		r := finalCostCall(t, c, s.final, codes.OK)
		if r.code != codes.OK || r.field(t, "x-ratelimit-remaining") != s.remaining {
			t.Fatalf("call %d: got %v, remaining %q; want OK, %s", i+1, r.code, r.field(t, "x-ratelimit-remaining"), s.remaining)
		}
		if !s.settles {
			continue
		}
		got := lim.next(t)
		if got.charged != s.want.charged || got.cost != s.want.cost || got.err != nil {
			t.Errorf("call %d: settled %+v, want charged %d, cost %d, no error", i+1, got, s.want.charged, s.want.cost)
		}
		if got.budget <= 0 || got.budget > 10*time.Second {
			t.Errorf("call %d: the settlement's context gave it %v, want at most 10s", i+1, got.budget)
		}
	}
	if r := finalCostCall(t, c, -1, codes.OK); r.code != codes.ResourceExhausted {
		t.Errorf("call 5: got %v, want ResourceExhausted: 2+8+5+5 of 20 are used", r.code)
	}
	if len(lim.done) != 0 {
		t.Errorf("%d settlements more than the two of a final cost that differs from the charge", len(lim.done))
	}
}

// TestFinalCostCountsOnlyFailedLogins: a login limit that charges only
// failures, WithFinalCost giving successes back.
func TestFinalCostCountsOnlyFailedLogins(t *testing.T) {
	lim := newSettling(t, core.FixedWindow(3, time.Minute))
	onlyFailures := func(_ context.Context, method string, resp any, err error, charged int64) int64 {
		if r, _ := resp.(*testpb.SimpleResponse); method != unaryCall || (err == nil) != (r != nil) {
			t.Errorf("f got method %q, response %v and error %v", method, resp, err)
		}
		if status.Code(err) == codes.OK {
			return 0
		}
		return charged
	}
	srv := serveUnary(t, lim, grpcmw.WithFinalCost(onlyFailures))
	c := dial(t, srv, "127.0.0.1")
	for i := range 5 {
		if r := finalCostCall(t, c, -1, codes.OK); r.code != codes.OK {
			t.Fatalf("success %d: got %v, want OK", i+1, r.code)
		}
		if got := lim.next(t); got.charged != 1 || got.cost != 0 || got.err != nil {
			t.Fatalf("success %d: settled %+v, want the charge of 1 given back", i+1, got)
		}
	}
	for i := range 3 {
		if r := finalCostCall(t, c, -1, codes.Unauthenticated); r.code != codes.Unauthenticated {
			t.Fatalf("failure %d: got %v, want the handler's Unauthenticated", i+1, r.code)
		}
	}
	if r := finalCostCall(t, c, -1, codes.Unauthenticated); r.code != codes.ResourceExhausted {
		t.Errorf("a fourth failure: got %v, want ResourceExhausted", r.code)
	}
	if n := srv.svc.calls.Load(); n != 8 {
		t.Errorf("handler served %d calls, want 8", n)
	}
}

func TestFinalCostSettlementRefusedIsAnEvent(t *testing.T) {
	lim := newSettling(t, core.FixedWindow(10, time.Minute))
	lim.err = errors.New("store down")
	ev := newEvents()
	srv := serveUnary(t, lim, grpcmw.WithFinalCost(keepCharge), grpcmw.WithHook(ev.hook))
	c := dial(t, srv, "127.0.0.1")
	if r := finalCostCall(t, c, 0, codes.OK); r.code != codes.OK {
		t.Fatalf("got %v, want OK: a settlement never changes the answer", r.code)
	}
	ev.waitFor(t, 2)
	got := ev.list()[1]
	want := "settle: final cost 0, charged 1: store down"
	if got.Outcome != nethttp.OutcomeSettleFailed || got.Err == nil || got.Err.Error() != want || got.Key != "127.0.0.1" || !got.Decision.Allowed {
		t.Errorf("second event: %v, %v, key %q, allowed %v; want OutcomeSettleFailed, %q, the admission's key and decision", got.Outcome, got.Err, got.Key, got.Decision.Allowed, want)
	}
	if r := finalCostCall(t, c, -1, codes.OK); r.field(t, "x-ratelimit-remaining") != "8" {
		t.Errorf("next call: remaining %q, want 8: the charge stays", r.field(t, "x-ratelimit-remaining"))
	}
}

func TestFinalCostSettlesAStreamsOpening(t *testing.T) {
	lim := newSettling(t, core.FixedWindow(10, time.Minute))
	free := func(_ context.Context, method string, resp any, err error, _ int64) int64 {
		if method != "/grpc.testing.TestService/StreamingInputCall" || resp != nil || err != nil {
			t.Errorf("f got method %q, response %v and error %v; want the stream's method, nil and nil", method, resp, err)
		}
		return 0
	}
	srv := serve(t, grpc.ChainStreamInterceptor(grpcmw.StreamServerInterceptor(lim, grpcmw.WithFinalCost(free), grpcmw.WithPerMessage())))
	c := dial(t, srv, "127.0.0.1")
	for i := range 2 {
		if r := streamIn(t, c, 3); r.code != codes.OK || r.field(t, "x-ratelimit-remaining") != fmt.Sprint(9-3*i) {
			t.Fatalf("stream %d: got %v, remaining %q; want OK, %d", i+1, r.code, r.field(t, "x-ratelimit-remaining"), 9-3*i)
		}
		// The opening's charge comes back; its three messages' stay.
		if got := lim.next(t); got.charged != 1 || got.cost != 0 || got.err != nil {
			t.Fatalf("stream %d: settled %+v, want the opening's 1 given back", i+1, got)
		}
	}
}

// TestFinalCostRefundsACallCanceledDuringItsDelay: a leaky-bucket call
// charged and then canceled while it waits its Delay was never served.
func TestFinalCostRefundsACallCanceledDuringItsDelay(t *testing.T) {
	lim := newSettling(t, core.LeakyBucket(2, time.Minute))
	srv := serveUnary(t, lim, grpcmw.WithFinalCost(keepCharge))
	c := dial(t, srv, "127.0.0.1")
	if r := finalCostCall(t, c, -1, codes.OK); r.code != codes.OK {
		t.Fatalf("first call: got %v, want OK", r.code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{}) // queued 30s behind the first
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("second call: got %v, want DeadlineExceeded", err)
	}
	if got := lim.next(t); got.charged != 1 || got.cost != 0 || got.err != nil {
		t.Fatalf("settled %+v, want the second call's 1 given back", got)
	}
	u, err := lim.Get(context.Background(), lim.Policy(), "127.0.0.1")
	if err != nil || u.Used != 1 {
		t.Errorf("Get: used %d, %v; want 1, the first call's only", u.Used, err)
	}
	if n := srv.svc.calls.Load(); n != 1 {
		t.Errorf("handler served %d calls, want 1", n)
	}
}

func TestSetFinalCostOutsideWithFinalCost(t *testing.T) {
	srv := serveUnary(t, newLimiter(t, core.FixedWindow(10, time.Minute)))
	c := dial(t, srv, "127.0.0.1")
	r := finalCostCall(t, c, 3, codes.OK)
	if r.code != codes.Internal {
		t.Errorf("got %v, want the handler's Internal: SetFinalCost fails without WithFinalCost", r.code)
	}
	if err := grpcmw.SetFinalCost(context.Background(), -1); err == nil || !strings.Contains(err.Error(), "a final cost is >= 0, got -1") {
		t.Errorf("SetFinalCost(-1): %v", err)
	}
}

// onlyLimiter is a core.Limiter that is not a core.Settler.
type onlyLimiter struct{ core.Limiter }

func TestFinalCostPanicsAtConstruction(t *testing.T) {
	lim := newLimiter(t, core.FixedWindow(10, time.Minute))
	for _, tt := range []struct {
		name string
		make func()
		want string
	}{
		{"a limiter that is not a Settler", func() {
			grpcmw.UnaryServerInterceptor(onlyLimiter{lim}, grpcmw.WithFinalCost(keepCharge))
		}, "grpcmw: UnaryServerInterceptor: WithFinalCost needs a core.Settler, and grpcmw_test.onlyLimiter is not one"},
		{"NewLimiter", func() {
			grpcmw.NewLimiter(lim, grpcmw.WithFinalCost(keepCharge))
		}, "grpcmw: NewLimiter: WithFinalCost: go-grpc-middleware's Limit sees no response to settle"},
		{"a nil function", func() { grpcmw.WithFinalCost(nil) }, "grpcmw: WithFinalCost: nil function"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if got := fmt.Sprint(recover()); got != tt.want {
					t.Errorf("panic %q, want %q", got, tt.want)
				}
			}()
			tt.make()
		})
	}
}
