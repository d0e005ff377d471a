// Command grpc serves grpc.testing.TestService on 127.0.0.1, rate-limited
// with package grpcmw (5 calls per 5 seconds per caller, token bucket: one
// call back every second), and calls it six times with a client that
// honours RetryInfo: the sixth call is denied with ResourceExhausted and a
// RetryInfo of about a second, and the client's interceptor waits it and
// retries once. It prints what each attempt got.
//
//	go run ./examples/grpc
//
// With -serve it only serves, with reflection, for grpcurl:
//
//	go run ./examples/grpc -serve -port 50051
//	grpcurl -plaintext -v -d '{}' 127.0.0.1:50051 grpc.testing.TestService/UnaryCall
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/grpcmw"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

func main() {
	serveOnly := flag.Bool("serve", false, "only serve, until interrupted")
	port := flag.Int("port", 0, "TCP `port` to listen on, on 127.0.0.1 (0: any free port)")
	flag.Parse()

	lim := core.MustNew(core.TokenBucket(5, 5*time.Second).WithName("per-caller"))
	defer lim.Close()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		log.Fatal(err)
	}
	srv := newServer(lim)
	if *serveOnly {
		reflection.Register(srv)
		log.Printf("serving grpc.testing.TestService on %s (Ctrl-C to stop)", ln.Addr())
		log.Fatal(srv.Serve(ln))
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	if err := callAndPrint(context.Background(), os.Stdout, ln.Addr().String(), 6); err != nil {
		log.Fatal(err)
	}
}

// newServer returns the server, every call limited by lim per caller (the
// peer address).
func newServer(lim core.Limiter, opts ...grpcmw.Option) *grpc.Server {
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpcmw.UnaryServerInterceptor(lim, opts...)),
		grpc.ChainStreamInterceptor(grpcmw.StreamServerInterceptor(lim, opts...)),
	)
	testpb.RegisterTestServiceServer(srv, service{})
	return srv
}

// service answers every UnaryCall.
type service struct {
	testpb.UnimplementedTestServiceServer
}

func (service) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return &testpb.SimpleResponse{}, nil
}

// callAndPrint makes n calls to the server at addr with a client that
// retries after RetryInfo, and prints each attempt to out.
func callAndPrint(ctx context.Context, out io.Writer, addr string, n int) error {
	cc, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// The first interceptor is the outer one: the retry interceptor
		// calls printAttempt for each attempt it sends.
		grpc.WithChainUnaryInterceptor(grpcmw.UnaryClientInterceptor(), printAttempt(out)))
	if err != nil {
		return err
	}
	defer cc.Close()
	client := testpb.NewTestServiceClient(cc)
	for i := 1; i <= n; i++ {
		start := time.Now()
		fmt.Fprintf(out, "call %d:\n", i)
		if _, err := client.UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
			return fmt.Errorf("call %d: %w", i, err)
		}
		fmt.Fprintf(out, "  served after %v\n", time.Since(start).Round(10*time.Millisecond))
	}
	return nil
}

// printAttempt is a client interceptor that prints the status, rate-limit
// metadata and details of every attempt.
func printAttempt(out io.Writer) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		var header metadata.MD
		err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Header(&header))...)
		st := status.Convert(err)
		line := []string{st.Code().String()}
		for _, name := range []string{"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "retry-after"} {
			if v := header.Get(name); len(v) > 0 {
				line = append(line, name+"="+v[0])
			}
		}
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.RetryInfo:
				line = append(line, "RetryInfo="+d.GetRetryDelay().AsDuration().Round(time.Millisecond).String())
			case *errdetails.QuotaFailure:
				line = append(line, "QuotaFailure="+d.GetViolations()[0].GetQuotaId())
			}
		}
		fmt.Fprintf(out, "  attempt: %s\n", strings.Join(line, " "))
		return err
	}
}
