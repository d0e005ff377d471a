// Package grpcmw limits gRPC calls with the limiters of package core:
// server interceptors, an adapter to go-grpc-middleware's ratelimit
// interceptors, and a client interceptor that honours the server's retry
// hint.
//
//	lim := core.MustNew(core.TokenBucket(100, time.Minute))
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(grpcmw.UnaryServerInterceptor(lim)),
//		grpc.ChainStreamInterceptor(grpcmw.StreamServerInterceptor(lim)),
//	)
//
// Calls are keyed by the caller's address ([Peer]; [Metadata] for an API
// key, [Method], [Join]); streams are limited when they open, and with
// [WithPerMessage] per message received. A denied call is answered
// codes.ResourceExhausted with two details: google.rpc.RetryInfo, the exact
// time after which the same call is admitted (none when the call costs more
// than the limit ever admits), and google.rpc.QuotaFailure, whose violation
// names the policy ([core.Policy].Label) in quota_id and its limit in
// quota_value (for a policy made with core.AllOf, one violation per part
// that denied). Admitted and denied calls carry the fields of the HTTP
// adapters as header metadata, written by the same renderer
// ([nethttp.Renderer]) and named in lower case: x-ratelimit-limit,
// x-ratelimit-remaining, x-ratelimit-reset, retry-after (whole seconds,
// rounded up) on a denial, and ratelimit-policy and ratelimit with
// [WithHeaderStyle]. Nothing the caller sent is echoed.
//
// A call without a key is answered codes.Unauthenticated, never served
// unlimited; a limiter that fails serves the call by default and answers
// codes.Unavailable under [WithFailClosed]; a call whose context ends while
// it is decided or delayed by a leaky bucket gets the context's status.
// Hooks ([WithHook]) receive the [nethttp.Event] of every decision, so the
// ready-made hooks (sloghook, promhook, otelhook) work unchanged. A cost
// known only after the call (the tokens a completion used, a failed login)
// is settled with [WithFinalCost] and [SetFinalCost].
package grpcmw
