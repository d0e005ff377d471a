package grpcmw

import (
	"github.com/go-ratelimit/ratelimit/core"
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
		key, r, err := l.call(ss.Context(), info.FullMethod, nil)
		if err != nil {
			return err
		}
		if l.cfg.perMessage && r != nil {
			ss = &limitedStream{ServerStream: ss, l: l, r: r, key: key, method: info.FullMethod}
		}
		return handler(srv, ss)
	}
}

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
	return s.l.decide(s.Context(), s.r, s.key, s.method, m, false)
}
