package grpcmw

import (
	"context"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"google.golang.org/grpc"
)

// StreamServerInterceptor returns a stream server interceptor that limits
// streams with lim when they open, as [UnaryServerInterceptor] limits
// calls, and with [WithPerMessage] each message they receive too:
//
//	grpc.NewServer(grpc.ChainStreamInterceptor(grpcmw.StreamServerInterceptor(lim)))
//
// It panics as UnaryServerInterceptor does.
func StreamServerInterceptor(lim core.Limiter, opts ...Option) grpc.StreamServerInterceptor {
	l := newLimiter("StreamServerInterceptor", lim, opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		var ev nethttp.Event
		key, r, err := l.call(ss.Context(), info.FullMethod, nil, &ev)
		if err != nil {
			return err
		}
		fc := l.finalCost(ss.Context(), &ev)
		if fc != nil {
			ss = &settledStream{ServerStream: ss, ctx: fc}
		}
		if l.cfg.perMessage && r != nil {
			ss = &limitedStream{ServerStream: ss, l: l, r: r, key: key, method: info.FullMethod}
		}
		err = handler(srv, ss)
		if fc != nil {
			l.settle(fc, info.FullMethod, nil, err)
		}
		return err
	}
}

// settledStream is a stream whose opening is settled after its handler:
// its context carries the final cost (SetFinalCost).
type settledStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *settledStream) Context() context.Context { return s.ctx }

// limitedStream decides each message it receives, under the key and rule
// of its opening.
type limitedStream struct {
	grpc.ServerStream
	l      *limiter
	r      *rule
	key    string
	method string
}

// RecvMsg receives a message and decides it: the error is the denial (or
// failure) status when it is not to be served.
func (s *limitedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	var ev nethttp.Event
	return s.l.decide(s.Context(), s.r, s.key, s.method, m, false, &ev)
}
