package grpcmw

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The answers that depend on nothing: built once. None carries the cause,
// which may hold what the client sent or details of the store.
var (
	statusNoKey   = status.Error(codes.Unauthenticated, "grpcmw: the call carries no rate-limit key")
	statusBadCost = status.Error(codes.Internal, "grpcmw: invalid call cost")
)

// denial is the status of a denied call: ResourceExhausted with RetryInfo
// (the exact RetryAfter: a gRPC client can wait a Duration, so it is not
// rounded up to seconds as the retry-after field is) and a QuotaFailure
// naming the policy, or, for a policy made with core.AllOf, each part that
// denied. A cost above capacity has no RetryInfo: waiting cannot help.
func denial(d core.Decision) error {
	msg, why := "grpcmw: rate limit exceeded", "rate limit exceeded: "
	if d.RetryAfter <= 0 {
		msg = "grpcmw: the call costs more than the rate limit ever admits"
		why = "the call costs more than the rate limit ever admits: "
	}
	parts := d.Parts()
	if parts == nil {
		parts = []core.Decision{d}
	}
	quota := &errdetails.QuotaFailure{}
	for _, p := range parts {
		if !p.Allowed {
			quota.Violations = append(quota.Violations, &errdetails.QuotaFailure_Violation{
				QuotaId: p.Policy.Label(), QuotaValue: p.Limit, Description: why + p.Policy.String()})
		}
	}
	st := status.New(codes.ResourceExhausted, msg)
	var err error
	if d.RetryAfter > 0 {
		st, err = st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter)}, quota)
	} else {
		st, err = st.WithDetails(quota)
	}
	if err != nil { // cannot happen: the details marshal, and the code is not OK
		return status.Error(codes.ResourceExhausted, msg)
	}
	return st.Err()
}

// unavailable is the status of a call refused because the limiter failed
// (WithFailClosed, or a closed limiter), with RetryInfo when the error
// knows when to retry.
func unavailable(cause error) error {
	st := status.New(codes.Unavailable, "grpcmw: rate limiter unavailable")
	var known interface{ RetryAfter() time.Duration }
	if errors.As(cause, &known) && known.RetryAfter() > 0 {
		if withRetry, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(known.RetryAfter())}); err == nil {
			st = withRetry
		}
	}
	return st.Err()
}

// setHeader sends the rate-limit fields of d as header metadata, rendered
// by nethttp's renderer (the fields of every HTTP response) and named in
// lower case, as HTTP/2 and gRPC metadata spell names. deny is as for
// [nethttp.Renderer.Write].
func setHeader(ctx context.Context, rd *nethttp.Renderer, d core.Decision, deny bool) {
	h := make(http.Header, 4)
	rd.Write(h, d, deny)
	send(ctx, h)
}

// setKnown sends what is known of a limit whose decision is not.
func setKnown(ctx context.Context, rd *nethttp.Renderer, limit int64) {
	h := make(http.Header, 2)
	rd.WriteKnown(h, limit)
	send(ctx, h)
}

// send sets the fields of h as the call's header metadata, named in lower
// case as metadata spells names. It copies them into a map of their own
// rather than renaming them in h: renaming in place (a delete and an
// insert per field, in a map being ranged over) cost a call writing the
// fields about a fifth more CPU than go-grpc-middleware with x/time/rate
// writing the same three (benchmarks/README.md). An error (headers already
// sent by a handler that called grpc.SendHeader) leaves the call as it is.
func send(ctx context.Context, h http.Header) {
	if len(h) == 0 {
		return
	}
	md := make(metadata.MD, len(h))
	for _, f := range fieldNames {
		if v, ok := h[f.canonical]; ok {
			md[f.lower] = v
		}
	}
	_ = grpc.SetHeader(ctx, md)
}

// fieldNames are the names the renderer writes, canonical (as in h) and
// in lower case (as in metadata).
var fieldNames = func() (names [6]struct{ canonical, lower string }) {
	for i, n := range []string{nethttp.HeaderLimit, nethttp.HeaderRemaining, nethttp.HeaderReset,
		nethttp.HeaderRetryAfter, nethttp.HeaderRateLimitPolicy, nethttp.HeaderRateLimit} {
		names[i].canonical, names[i].lower = http.CanonicalHeaderKey(n), strings.ToLower(n)
	}
	return names
}()
