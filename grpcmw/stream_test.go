package grpcmw_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/grpcmw"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// streamIn opens a StreamingInputCall, sends n messages, closes and
// returns what the client saw.
func streamIn(t testing.TB, c testpb.TestServiceClient, n int, md ...string) reply {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(context.Background(), md...)
	stream, err := c.StreamingInputCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := stream.Send(&testpb.StreamingInputCallRequest{}); err != nil {
			break // the server has answered: CloseAndRecv gives its status
		}
	}
	_, err = stream.CloseAndRecv()
	header, _ := stream.Header()
	return replyOf(err, header)
}

func TestStreamsAreLimitedWhenTheyOpen(t *testing.T) {
	lim := newLimiter(t, core.FixedWindow(2, time.Minute).WithName("streams"))
	srv := serve(t, grpc.ChainStreamInterceptor(grpcmw.StreamServerInterceptor(lim)))
	c := dial(t, srv, "127.0.0.1")
	for i := range 2 {
		r := streamIn(t, c, 3)
		if r.code != codes.OK || r.field(t, "x-ratelimit-remaining") != fmt.Sprint(1-i) {
			t.Errorf("stream %d: got %v, remaining %q; want OK, %d", i+1, r.code, r.field(t, "x-ratelimit-remaining"), 1-i)
		}
	}
	r := streamIn(t, c, 3)
	if r.code != codes.ResourceExhausted || r.retry.GetRetryDelay().AsDuration() != 6*time.Second || r.field(t, "retry-after") != "6" {
		t.Errorf("stream 3: got %v, RetryInfo %v, retry-after %q; want ResourceExhausted, 6s, 6", r.code, r.retry, r.field(t, "retry-after"))
	}
	if v := r.quota.GetViolations(); len(v) != 1 || v[0].GetQuotaId() != "streams" {
		t.Errorf("stream 3: QuotaFailure %v, want one violation of streams", r.quota)
	}
	if calls, msgs := srv.svc.calls.Load(), srv.svc.messages.Load(); calls != 2 || msgs != 6 {
		t.Errorf("handler served %d streams and %d messages, want 2 and 6: messages are not limited by default", calls, msgs)
	}
}

func TestPerMessage(t *testing.T) {
	ev := newEvents()
	lim := newLimiter(t, core.FixedWindow(4, time.Minute))
	srv := serve(t, grpc.ChainStreamInterceptor(grpcmw.StreamServerInterceptor(lim, grpcmw.WithPerMessage(), grpcmw.WithHook(ev.hook))))
	c := dial(t, srv, "127.0.0.1")
	// The opening costs 1, then each message 1: the fourth message is the
	// fifth unit.
	r := streamIn(t, c, 10)
	if r.code != codes.ResourceExhausted || r.retry.GetRetryDelay().AsDuration() != 6*time.Second {
		t.Errorf("got %v, RetryInfo %v; want ResourceExhausted, 6s", r.code, r.retry)
	}
	if got := srv.svc.messages.Load(); got != 3 {
		t.Errorf("handler got %d messages, want 3", got)
	}
	var outcomes []nethttp.Outcome
	for _, e := range ev.list() {
		outcomes = append(outcomes, e.Outcome)
	}
	want := []nethttp.Outcome{nethttp.OutcomeAllowed, nethttp.OutcomeAllowed, nethttp.OutcomeAllowed, nethttp.OutcomeAllowed, nethttp.OutcomeDenied}
	if fmt.Sprint(outcomes) != fmt.Sprint(want) {
		t.Errorf("outcomes: got %v, want %v", outcomes, want)
	}
	if r := streamIn(t, c, 1); r.code != codes.ResourceExhausted {
		t.Errorf("a new stream: got %v, want ResourceExhausted: its opening is counted too", r.code)
	}
}

func TestStreamSkipAndKeyErrors(t *testing.T) {
	lim := newLimiter(t, core.FixedWindow(1, time.Minute))
	skipHealth := grpcmw.WithSkip(func(_ context.Context, m string) bool { return m == "/grpc.testing.TestService/StreamingInputCall" })
	srv := serve(t,
		grpc.ChainStreamInterceptor(grpcmw.StreamServerInterceptor(lim, skipHealth)),
		grpc.ChainUnaryInterceptor(grpcmw.UnaryServerInterceptor(lim, grpcmw.WithKey(grpcmw.Metadata("x-api-key")))),
	)
	c := dial(t, srv, "127.0.0.1")
	for i := range 3 {
		if r := streamIn(t, c, 1); r.code != codes.OK || len(r.header) != 0 && r.field(t, "x-ratelimit-limit") != "" {
			t.Errorf("skipped stream %d: got %v, metadata %v; want OK without rate-limit fields", i+1, r.code, r.header)
		}
	}
	if r := unaryCallFrom(t, c); r.code != codes.Unauthenticated {
		t.Errorf("a call without its key: got %v, want Unauthenticated", r.code)
	}
}

// TestDryRunServesAStreamWithoutKey: under WithDryRun a stream whose key
// is missing is served whole, its messages undecided (there is no key to
// decide them under): one key-error event, then nothing.
func TestDryRunServesAStreamWithoutKey(t *testing.T) {
	ev := newEvents()
	lim := newLimiter(t, core.FixedWindow(1, time.Minute))
	srv := serve(t, grpc.ChainStreamInterceptor(grpcmw.StreamServerInterceptor(lim,
		grpcmw.WithKey(grpcmw.Metadata("x-api-key")), grpcmw.WithPerMessage(), grpcmw.WithDryRun(), grpcmw.WithHook(ev.hook))))
	c := dial(t, srv, "127.0.0.1")
	if r := streamIn(t, c, 3); r.code != codes.OK {
		t.Errorf("got %v, want OK", r.code)
	}
	if got := srv.svc.messages.Load(); got != 3 {
		t.Errorf("handler got %d messages, want 3", got)
	}
	var outcomes []nethttp.Outcome
	for _, e := range ev.list() {
		outcomes = append(outcomes, e.Outcome)
	}
	if want := []nethttp.Outcome{nethttp.OutcomeKeyError}; fmt.Sprint(outcomes) != fmt.Sprint(want) {
		t.Errorf("outcomes: got %v, want %v", outcomes, want)
	}
}
