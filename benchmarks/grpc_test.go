package benchmarks

import (
	"context"
	"errors"
	"math"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/grpcmw"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// The gRPC scenario (issue 27): one caller, one goroutine, every call
// admitted, keyed by the caller's address. "ours" is grpcmw's unary
// interceptor on the in-memory token bucket, writing the rate-limit header
// metadata; "ggm-xtime" is go-grpc-middleware v2's ratelimit interceptor
// over the per-caller map of x/time/rate limiters its users write (newXTime),
// keyed by the peer's host; "bare" has no interceptor.

// grpcStack is a unary server interceptor, or nil for the bare call.
type grpcStack struct {
	lib string
	new func(Limit) (grpc.UnaryServerInterceptor, func())
}

func grpcStacks() []grpcStack {
	return []grpcStack{
		{"bare", func(Limit) (grpc.UnaryServerInterceptor, func()) { return nil, func() {} }},
		{"ours", func(l Limit) (grpc.UnaryServerInterceptor, func()) {
			lim := core.MustNew(core.TokenBucket(l.N, l.Window))
			return grpcmw.UnaryServerInterceptor(lim), func() { _ = lim.Close() }
		}},
		{"ours-nometadata", func(l Limit) (grpc.UnaryServerInterceptor, func()) {
			lim := core.MustNew(core.TokenBucket(l.N, l.Window))
			return grpcmw.UnaryServerInterceptor(lim, grpcmw.WithHeaderStyle(nethttp.HeadersNone)), func() { _ = lim.Close() }
		}},
		{"ggm-xtime", func(l Limit) (grpc.UnaryServerInterceptor, func()) {
			lim, _ := newXTime(l, DefaultConfig)
			return ratelimit.UnaryServerInterceptor(peerLimiter{lim: lim}), func() {}
		}},
		{"ggm-xtime-metadata", func(l Limit) (grpc.UnaryServerInterceptor, func()) {
			lim, _ := newXTime(l, DefaultConfig)
			return ratelimit.UnaryServerInterceptor(peerLimiter{lim: lim, metadata: true}), func() {}
		}},
	}
}

// peerLimiter is the ratelimit.Limiter users of go-grpc-middleware write:
// the caller's host from the peer in the context, one limiter per host;
// with metadata, the three x-ratelimit fields as a user writes them
// (remaining from the limiter's tokens, reset from the refill rate).
type peerLimiter struct {
	lim      Limiter
	metadata bool
}

var errLimited = errors.New("rate limit exceeded")

func (p peerLimiter) Limit(ctx context.Context) error {
	pr, ok := peer.FromContext(ctx)
	if !ok {
		return errors.New("no peer")
	}
	host, _, err := net.SplitHostPort(pr.Addr.String())
	if err != nil {
		return err
	}
	if !p.metadata {
		if ok, err := p.lim.Allow(host); err != nil || !ok {
			return errLimited
		}
		return nil
	}
	now := time.Now()
	rl := p.lim.(*xtimeLimiter).keys.get(host, now)
	ok = rl.AllowN(now, 1)
	tokens := rl.TokensAt(now)
	reset := time.Duration((float64(rl.Burst()) - tokens) / float64(rl.Limit()) * float64(time.Second))
	_ = grpc.SetHeader(ctx, metadata.Pairs(
		"x-ratelimit-limit", strconv.Itoa(rl.Burst()),
		"x-ratelimit-remaining", strconv.Itoa(max(int(tokens), 0)),
		"x-ratelimit-reset", strconv.FormatInt(int64(math.Ceil(reset.Seconds())), 10)))
	if !ok {
		return errLimited
	}
	return nil
}

// transportStream is the gRPC server's stream as an interceptor sees it
// through the context (grpc.SetHeader): header metadata joined as the
// server's own stream joins it.
type transportStream struct {
	mu     sync.Mutex
	header metadata.MD
}

func (s *transportStream) Method() string { return "/grpc.testing.TestService/UnaryCall" }
func (s *transportStream) SetHeader(md metadata.MD) error {
	s.mu.Lock()
	s.header = metadata.Join(s.header, md)
	s.mu.Unlock()
	return nil
}
func (s *transportStream) SendHeader(md metadata.MD) error { return s.SetHeader(md) }
func (s *transportStream) SetTrailer(metadata.MD) error    { return nil }

// callContext is the context of a call from 192.0.2.1:1234 as the server
// builds it: peer, incoming metadata and stream.
func callContext(stream *transportStream) context.Context {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}})
	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("user-agent", "grpc-go/1.85.0"))
	return grpc.NewContextWithServerTransportStream(ctx, stream)
}

var unaryInfo = &grpc.UnaryServerInfo{FullMethod: "/grpc.testing.TestService/UnaryCall"}

func unaryHandler(context.Context, any) (any, error) { return &testpb.SimpleResponse{}, nil }

func TestGRPCStacksAdmitAndDeny(t *testing.T) {
	for _, s := range grpcStacks()[1:] {
		t.Run("lib="+s.lib, func(t *testing.T) {
			icpt, done := s.new(DenyMost)
			defer done()
			stream := &transportStream{}
			ctx := callContext(stream)
			_, err := icpt(ctx, nil, unaryInfo, unaryHandler)
			require.NoError(t, err)
			if s.lib == "ours" || s.lib == "ggm-xtime-metadata" {
				assert.Equal(t, []string{"0"}, stream.header.Get("x-ratelimit-remaining"))
				assert.Equal(t, []string{"1"}, stream.header.Get("x-ratelimit-limit"))
			}
			_, err = icpt(ctx, nil, unaryInfo, unaryHandler)
			assert.Equal(t, codes.ResourceExhausted, status.Code(err))
		})
	}
}

// BenchmarkGRPCInterceptor is the interceptor alone, called as the server
// calls it: what it adds to every unary call.
func BenchmarkGRPCInterceptor(b *testing.B) {
	for _, s := range grpcStacks() {
		b.Run("lib="+s.lib, func(b *testing.B) {
			icpt, done := s.new(AllowAll)
			defer done()
			stream := &transportStream{}
			ctx := callContext(stream)
			b.ReportAllocs()
			cpu0, cpuOK := processCPU()
			for b.Loop() {
				stream.header = nil
				var err error
				if icpt == nil {
					_, err = unaryHandler(ctx, nil)
				} else {
					_, err = icpt(ctx, nil, unaryInfo, unaryHandler)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			if cpu1, ok := processCPU(); cpuOK && ok {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

// BenchmarkGRPCCall is a whole unary call over a loopback TCP connection,
// client and server in this process: the interceptor's share of a real
// call.
func BenchmarkGRPCCall(b *testing.B) {
	for _, s := range grpcStacks() {
		b.Run("lib="+s.lib, func(b *testing.B) {
			icpt, done := s.new(AllowAll)
			defer done()
			var opts []grpc.ServerOption
			if icpt != nil {
				opts = append(opts, grpc.ChainUnaryInterceptor(icpt))
			}
			client := loopbackServer(b, opts...)
			req := &testpb.SimpleRequest{}
			b.ReportAllocs()
			cpu0, cpuOK := processCPU()
			for b.Loop() {
				if _, err := client.UnaryCall(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
			if cpu1, ok := processCPU(); cpuOK && ok {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

type unaryService struct {
	testpb.UnimplementedTestServiceServer
}

func (unaryService) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return &testpb.SimpleResponse{}, nil
}

// loopbackServer serves unaryService on a loopback port until b ends and
// returns a client connected to it.
func loopbackServer(b *testing.B, opts ...grpc.ServerOption) testpb.TestServiceClient {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	srv := grpc.NewServer(opts...)
	testpb.RegisterTestServiceServer(srv, unaryService{})
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)
	b.Cleanup(func() { _ = cc.Close() })
	return testpb.NewTestServiceClient(cc)
}
