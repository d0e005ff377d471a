package grpcmw

import (
	"context"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"google.golang.org/grpc"
)

// Limiter is a core limiter in the shape of go-grpc-middleware v2's
// interceptors/ratelimit.Limiter, for services already built on its
// interceptors:
//
//	ratelimit.UnaryServerInterceptor(grpcmw.NewLimiter(lim))
//
// Its Limit decides the call as [UnaryServerInterceptor] does, with the
// same options: the key and the method come from the context (the call's
// peer, metadata and grpc.Method), and the header metadata is written. What
// that interface loses, and the interceptors of this package keep: its
// interceptors answer every error from Limit codes.ResourceExhausted with
// the error formatted into the message with %s, so the status details are
// lost (no RetryInfo, no QuotaFailure; UnaryClientInterceptor cannot
// retry), and a call without a key or refused by WithFailClosed is
// ResourceExhausted too, not Unauthenticated or Unavailable; its stream
// interceptor calls Limit when a stream opens, so WithPerMessage does
// nothing. WithSkip and WithMethodPolicy work, through grpc.Method.
type Limiter struct{ l *limiter }

// NewLimiter returns the Limiter of lim. It panics as
// UnaryServerInterceptor does.
func NewLimiter(lim core.Limiter, opts ...Option) *Limiter {
	return &Limiter{l: newLimiter("NewLimiter", lim, opts)}
}

// Limit decides the call of ctx: nil to serve it, or the status error it
// would be answered with by UnaryServerInterceptor.
func (l *Limiter) Limit(ctx context.Context) error {
	method, _ := grpc.Method(ctx)
	var ev nethttp.Event
	_, _, err := l.l.call(ctx, method, nil, &ev)
	return err
}
