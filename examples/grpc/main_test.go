package main

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/examples/internal/redisaddr"
	"github.com/go-ratelimit/ratelimit/grpcmw"
	"github.com/go-ratelimit/ratelimit/promhook"
	"github.com/go-ratelimit/ratelimit/redisstore"
)

// serve starts srv on a loopback port and returns its address.
func serve(t *testing.T, srv *grpc.Server) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) })
	t.Cleanup(func() { srv.Stop(); wg.Wait() })
	return ln.Addr().String()
}

func client(t *testing.T, addr string) testpb.TestServiceClient {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	return testpb.NewTestServiceClient(cc)
}

func TestSixthCallWaitsItsRetryInfo(t *testing.T) {
	lim := core.MustNew(core.TokenBucket(5, 5*time.Second).WithName("per-caller"))
	defer lim.Close()
	addr := serve(t, newServer(lim))
	var out strings.Builder
	start := time.Now()
	require.NoError(t, callAndPrint(context.Background(), &out, addr, 6))
	assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "the sixth call waits its RetryInfo (about 1s)")

	calls := strings.Split(out.String(), "call ")[1:]
	require.Len(t, calls, 6, out.String())
	for i, c := range calls[:5] {
		assert.Equal(t, 1, strings.Count(c, "attempt: OK x-ratelimit-limit=5"), "call %d: one attempt, admitted\n%s", i+1, c)
	}
	sixth := calls[5]
	assert.Contains(t, sixth, "attempt: ResourceExhausted x-ratelimit-limit=5 x-ratelimit-remaining=0")
	assert.Contains(t, sixth, "retry-after=1 RetryInfo=")
	assert.Contains(t, sixth, "QuotaFailure=per-caller")
	assert.Equal(t, 2, strings.Count(sixth, "attempt:"), "denied once, then served on its one retry\n%s", sixth)
	assert.Contains(t, sixth, "attempt: OK")
}

// TestRedisStore: the Redis store behind both interceptors, exact counts,
// and the store's decisions counted by promhook from grpcmw's events.
func TestRedisStore(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: redisaddr.Addr(t)})
	defer rdb.Close()
	lim, err := redisstore.New(rdb, core.FixedWindow(3, time.Minute).WithName("redis-per-caller"),
		redisstore.WithPrefix("grpc-example-"+strings.ReplaceAll(t.Name(), "/", "-")+time.Now().Format("150405.000000")))
	require.NoError(t, err)
	defer lim.Close()
	metrics := promhook.New()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(metrics))
	c := client(t, serve(t, newServer(lim, grpcmw.WithHook(metrics.Observe))))

	var codesSeen []codes.Code
	var last metadata.MD
	for range 4 {
		_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}, grpc.Header(&last))
		codesSeen = append(codesSeen, status.Code(err))
	}
	stream, err := c.StreamingInputCall(context.Background())
	require.NoError(t, err)
	_, streamErr := stream.CloseAndRecv()

	assert.Equal(t, []codes.Code{codes.OK, codes.OK, codes.OK, codes.ResourceExhausted}, codesSeen)
	assert.Equal(t, codes.ResourceExhausted, status.Code(streamErr), "the stream opens under the same caller's spent limit")
	assert.Equal(t, []string{"3"}, last.Get("x-ratelimit-limit"))
	assert.Equal(t, []string{"0"}, last.Get("x-ratelimit-remaining"))
	assert.NotEmpty(t, last.Get("retry-after"))
	var retry *errdetails.RetryInfo
	for _, d := range status.Convert(streamErr).Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r
		}
	}
	require.NotNil(t, retry, "the Redis store's denial carries RetryInfo")
	assert.Positive(t, retry.GetRetryDelay().AsDuration())
	assert.LessOrEqual(t, retry.GetRetryDelay().AsDuration(), time.Minute)

	assert.Equal(t, 3.0, counter(t, reg, "allowed"))
	assert.Equal(t, 2.0, counter(t, reg, "denied"))
}

// counter is promhook's requests_total for the policy redis-per-caller and
// outcome, summed over the sources (the store, its deny cache).
func counter(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	sum, found := 0.0, false
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if strings.HasSuffix(f.GetName(), "requests_total") && labels["policy"] == "redis-per-caller" && labels["outcome"] == outcome {
				sum, found = sum+m.GetCounter().GetValue(), true
			}
		}
	}
	require.True(t, found, "no requests_total{policy=redis-per-caller,outcome=%s}", outcome)
	return sum
}

// TestGoGRPCMiddleware: grpcmw.Limiter in go-grpc-middleware v2's ratelimit
// interceptors, and what its error formatting loses.
func TestGoGRPCMiddleware(t *testing.T) {
	lim := core.MustNew(core.FixedWindow(1, time.Minute).WithName("ggm"))
	defer lim.Close()
	l := grpcmw.NewLimiter(lim)
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(ratelimit.UnaryServerInterceptor(l)),
		grpc.ChainStreamInterceptor(ratelimit.StreamServerInterceptor(l)),
	)
	testpb.RegisterTestServiceServer(srv, service{})
	c := client(t, serve(t, srv))

	var header metadata.MD
	_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}, grpc.Header(&header))
	require.NoError(t, err)
	assert.Equal(t, []string{"0"}, header.Get("x-ratelimit-remaining"), "the metadata is written through the context")

	_, err = c.UnaryCall(context.Background(), &testpb.SimpleRequest{}, grpc.Header(&header))
	st := status.Convert(err)
	assert.Equal(t, codes.ResourceExhausted, st.Code())
	assert.Contains(t, st.Message(), "/grpc.testing.TestService/UnaryCall is rejected by grpc_ratelimit middleware")
	assert.Contains(t, st.Message(), "grpcmw: rate limit exceeded")
	assert.Empty(t, st.Details(), "go-grpc-middleware formats the error with %%s: RetryInfo and QuotaFailure are lost")
	assert.NotEmpty(t, header.Get("retry-after"), "the metadata still says when to retry")

	stream, err := c.StreamingInputCall(context.Background())
	require.NoError(t, err)
	_, err = stream.CloseAndRecv()
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "a stream is limited when it opens")
}
