package grpcmw_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/grpcmw"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// TestLimiterDecidesFromTheContext: Limit finds the key, the method and the
// stream for the header metadata in the call's context alone. (Through
// go-grpc-middleware's interceptors, see examples/grpc.)
func TestLimiterDecidesFromTheContext(t *testing.T) {
	lim := newLimiter(t, core.FixedWindow(3, time.Minute))
	l := grpcmw.NewLimiter(lim, grpcmw.WithMethodPolicy(unaryCall, core.FixedWindow(1, time.Minute).WithName("unary")))
	asIs := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := l.Limit(ctx); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
	srv := serve(t, grpc.ChainUnaryInterceptor(asIs))
	c := dial(t, srv, "127.0.0.1")
	if r := unaryCallFrom(t, c); r.code != codes.OK || r.field(t, "x-ratelimit-limit") != "1" {
		t.Errorf("first call: got %v, limit %q; want OK under the method's limit 1", r.code, r.field(t, "x-ratelimit-limit"))
	}
	r := unaryCallFrom(t, c)
	if v := r.quota.GetViolations(); r.code != codes.ResourceExhausted || len(v) != 1 || v[0].GetQuotaId() != "unary" || r.retry == nil {
		t.Errorf("second call: got %v, %v, %v; want ResourceExhausted with RetryInfo and the policy unary", r.code, r.retry, r.quota)
	}
}
