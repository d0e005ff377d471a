package grpcmw_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/grpcmw"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Five calls per caller per hour, refilled one every 12 minutes: the sixth
// call is told when to come back.
func ExampleUnaryServerInterceptor() {
	lim := core.MustNew(core.TokenBucket(5, time.Hour).WithName("per-caller"))
	defer lim.Close()
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcmw.UnaryServerInterceptor(lim)))
	testpb.RegisterTestServiceServer(srv, &service{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()
	client := testpb.NewTestServiceClient(cc)
	for i := 1; i <= 6; i++ {
		var header metadata.MD
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}, grpc.Header(&header))
		st := status.Convert(err)
		fmt.Printf("call %d: %v, x-ratelimit-remaining %s", i, st.Code(), header.Get("x-ratelimit-remaining"))
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.RetryInfo:
				fmt.Printf(", retry in %v", d.GetRetryDelay().AsDuration().Round(time.Minute))
			case *errdetails.QuotaFailure:
				fmt.Printf(", quota %s", d.GetViolations()[0].GetQuotaId())
			}
		}
		fmt.Println()
	}
	// Output:
	// call 1: OK, x-ratelimit-remaining [4]
	// call 2: OK, x-ratelimit-remaining [3]
	// call 3: OK, x-ratelimit-remaining [2]
	// call 4: OK, x-ratelimit-remaining [1]
	// call 5: OK, x-ratelimit-remaining [0]
	// call 6: ResourceExhausted, x-ratelimit-remaining [0], retry in 12m0s, quota per-caller
}

// Keyed by API key, with a tighter limit on one method.
func ExampleWithMethodPolicy() {
	lim := core.MustNew(core.TokenBucket(100, time.Minute).WithName("default"))
	defer lim.Close()
	_ = grpc.NewServer(grpc.ChainUnaryInterceptor(grpcmw.UnaryServerInterceptor(lim,
		grpcmw.WithKey(grpcmw.Metadata("x-api-key")),
		grpcmw.WithMethodPolicy("/auth.Auth/Login", core.TokenBucket(5, time.Minute).WithName("login")),
	)))
}

// Callers behind a trusted proxy (Envoy, a load balancer) are keyed by the
// address it appends to x-forwarded-for; from any other peer the metadata
// is ignored.
func ExamplePeer() {
	lim := core.MustNew(core.TokenBucket(100, time.Minute))
	defer lim.Close()
	_ = grpc.NewServer(grpc.ChainUnaryInterceptor(grpcmw.UnaryServerInterceptor(lim,
		grpcmw.WithKey(grpcmw.Peer(keyfunc.TrustProxies("10.0.0.0/8"))))))
}

// A client that waits out a server's RetryInfo, once, within the call's
// deadline.
func ExampleUnaryClientInterceptor() {
	cc, err := grpc.NewClient("dns:///api.example.com:443",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(grpcmw.UnaryClientInterceptor()))
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()
}
