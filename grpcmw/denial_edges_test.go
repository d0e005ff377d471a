package grpcmw_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/grpcmw"
	"google.golang.org/grpc/codes"
)

// TestCallCostingMoreThanACompositeAdmitsNamesAViolation: the denial of a
// call whose cost is above what a policy made with core.AllOf ever admits
// (2 per minute and 10 per hour, a call of cost 3) carries a QuotaFailure
// (doc.go: "google.rpc.QuotaFailure, whose violation names the policy").
// Today its QuotaFailure has no violation at all: denial lists the parts
// whose Decision.Parts says not Allowed, and the parts of a refusal are a
// unit-cost look, each Allowed.
func TestCallCostingMoreThanACompositeAdmitsNamesAViolation(t *testing.T) {
	p := core.AllOf(core.FixedWindow(2, time.Minute).WithName("minute"), core.FixedWindow(10, time.Hour).WithName("hour"))
	srv := serveUnary(t, newLimiter(t, p), grpcmw.WithCostFunc(costOf3))
	c := dial(t, srv, "127.0.0.1")
	r := unaryCallFrom(t, c)
	if r.code != codes.ResourceExhausted || r.retry != nil {
		t.Fatalf("got %v, RetryInfo %v; want ResourceExhausted without RetryInfo", r.code, r.retry)
	}
	if v := r.quota.GetViolations(); len(v) == 0 {
		t.Errorf("QuotaFailure %v has no violation; want one naming the part (minute, 2) or the policy that the cost exceeds", r.quota)
	}
}

func costOf3(context.Context, string, any) (int64, error) { return 3, nil }
