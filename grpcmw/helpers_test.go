package grpcmw_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/grpcmw"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// t0 starts a fixed window of a minute (windows are aligned to the Unix
// epoch), so that t0+54s is 6 s before the window resets.
var t0 = time.Unix(1_699_999_980, 0)

const (
	unaryCall = "/grpc.testing.TestService/UnaryCall"
	emptyCall = "/grpc.testing.TestService/EmptyCall"
)

// newLimiter returns an in-memory limiter on a clock stopped at t0+54s,
// closed at the end of the test.
func newLimiter(t testing.TB, p core.Policy) *core.MemoryLimiter {
	t.Helper()
	clk := coretest.NewClock(t0.Add(54 * time.Second))
	lim, err := core.New(p, core.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lim.Close() })
	return lim
}

// service is the grpc.testing.TestService the tests call, counting what
// its handlers served.
type service struct {
	testpb.UnimplementedTestServiceServer
	calls    atomic.Int64 // unary calls and streams served
	messages atomic.Int64 // stream messages received
}

func (s *service) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	s.calls.Add(1)
	return &testpb.Empty{}, nil
}

// UnaryCall answers with the status of the request's ResponseStatus (OK
// without one), after calling grpcmw.SetFinalCost with the length of its
// Payload's body, if it has a Payload (Internal if that fails).
func (s *service) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.calls.Add(1)
	if p := req.GetPayload(); p != nil {
		if err := grpcmw.SetFinalCost(ctx, int64(len(p.GetBody()))); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	if st := req.GetResponseStatus(); st != nil {
		return nil, status.Error(codes.Code(st.GetCode()), st.GetMessage())
	}
	return &testpb.SimpleResponse{}, nil
}

// StreamingInputCall receives every message, and returns the first error
// RecvMsg gives (a per-message denial) as it is.
func (s *service) StreamingInputCall(stream testpb.TestService_StreamingInputCallServer) error {
	s.calls.Add(1)
	for {
		_, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: int32(s.messages.Load())})
		}
		if err != nil {
			return err
		}
		s.messages.Add(1)
	}
}

// server is a TestService on a real loopback TCP listener.
type server struct {
	svc  *service
	addr string
}

// serve starts a server with opts (the interceptors) and stops it at the
// end of the test.
func serve(t testing.TB, opts ...grpc.ServerOption) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{svc: &service{}, addr: ln.Addr().String()}
	gs := grpc.NewServer(opts...)
	testpb.RegisterTestServiceServer(gs, s.svc)
	var wg sync.WaitGroup
	wg.Go(func() { _ = gs.Serve(ln) })
	t.Cleanup(func() { gs.Stop(); wg.Wait() })
	return s
}

// serveUnary starts a server limiting unary calls with lim.
func serveUnary(t testing.TB, lim core.Limiter, opts ...grpcmw.Option) *server {
	t.Helper()
	return serve(t, grpc.ChainUnaryInterceptor(grpcmw.UnaryServerInterceptor(lim, opts...)))
}

// dial connects to s from the loopback address from ("127.0.0.1",
// "127.0.0.2", ...: every 127/8 address is the loopback on Linux), with
// the client options opts.
func dial(t testing.TB, s *server, from string, opts ...grpc.DialOption) testpb.TestServiceClient {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		}),
	}, opts...)
	cc, err := grpc.NewClient("passthrough:///"+s.addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return testpb.NewTestServiceClient(cc)
}

// reply is what a client saw of one call: its status, header metadata and
// the details of its error.
type reply struct {
	code   codes.Code
	header metadata.MD
	retry  *errdetails.RetryInfo
	quota  *errdetails.QuotaFailure
}

// unaryCallFrom sends one UnaryCall with the metadata pairs md.
func unaryCallFrom(t testing.TB, c testpb.TestServiceClient, md ...string) reply {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(context.Background(), md...)
	var header metadata.MD
	_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{}, grpc.Header(&header))
	return replyOf(err, header)
}

func replyOf(err error, header metadata.MD) reply {
	st := status.Convert(err)
	r := reply{code: st.Code(), header: header}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			r.retry = d
		case *errdetails.QuotaFailure:
			r.quota = d
		}
	}
	return r
}

// field is the one value of a header metadata field, "" when absent.
func (r reply) field(t testing.TB, name string) string {
	t.Helper()
	switch v := r.header.Get(name); len(v) {
	case 0:
		return ""
	case 1:
		return v[0]
	default:
		t.Fatalf("%s: got %d values %q, want one", name, len(v), v)
		return ""
	}
}

// events records the hooks' events.
type events struct {
	mu    sync.Mutex
	all   []nethttp.Event
	added chan struct{} // signalled after each event
}

func newEvents() *events { return &events{added: make(chan struct{}, 1)} }

func (e *events) hook(ev nethttp.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
	select {
	case e.added <- struct{}{}:
	default:
	}
}

// waitFor waits until n events have come: a server may still be deciding
// a call whose client has given up.
func (e *events) waitFor(t testing.TB, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for len(e.list()) < n {
		select {
		case <-e.added:
		case <-timeout:
			t.Fatalf("got %d events, want %d", len(e.list()), n)
		}
	}
}

func (e *events) list() []nethttp.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]nethttp.Event(nil), e.all...)
}
