package grpcmw

import (
	"context"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// MaxRetryDelay is the longest RetryInfo delay [UnaryClientInterceptor]
// waits: a server asking for more gets its error back at once, so that no
// call without a deadline waits longer than this on a server's word.
const MaxRetryDelay = time.Minute

// UnaryClientInterceptor returns a client interceptor that honours the
// RetryInfo of a rate-limited call: when a call fails with
// codes.ResourceExhausted carrying RetryInfo, it waits the delay and sends
// the call again, once; the second answer is returned, whatever it is. It
// returns the first error at once when the call's deadline would pass
// before the delay ends (a retry could not be answered in time), when the
// delay is above MaxRetryDelay, or when the context ends while it waits. A
// denial without RetryInfo (a cost above what the limit ever admits) is
// not retried.
//
//	grpc.NewClient(target, grpc.WithChainUnaryInterceptor(grpcmw.UnaryClientInterceptor()))
//
// Streams are not retried: their denial arrives after the client has
// started sending, which only the application can replay.
func UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return retryOnce(wait)
}

// retryOnce is UnaryClientInterceptor with the wait as a parameter, for
// the tests.
func retryOnce(wait func(context.Context, time.Duration) error) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		delay, ok := retryDelay(err)
		if !ok || delay > MaxRetryDelay {
			return err
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= delay {
			return err
		}
		if wait(ctx, delay) != nil {
			return err
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// retryDelay returns the RetryInfo delay of a ResourceExhausted error.
func retryDelay(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			if err := ri.GetRetryDelay().CheckValid(); err != nil {
				return 0, false
			}
			delay := ri.GetRetryDelay().AsDuration()
			return delay, delay >= 0
		}
	}
	return 0, false
}
