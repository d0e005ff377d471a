// Package redisstore runs the policies of package core in Redis, so that
// many app servers share one limit. Its [Limiter] implements [core.Limiter]
// and [core.PolicyLimiter], so every adapter (nethttp, chimw, ginmw,
// echomw) works with it unchanged, and it gives the same Decision as the
// in-memory limiter for the same schedule of requests (the conformance
// suite core/coretest runs against both, on one Redis and on a Cluster).
//
//	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
//	lim, err := redisstore.New(rdb, core.SlidingWindow(100, time.Minute), redisstore.WithPrefix("myapp"))
//	if err != nil { ... }
//	defer lim.Close()
//	d, err := lim.AllowN(ctx, key, 1)
//
// Any redis.UniversalClient works: a single node, Sentinel, Cluster or
// Ring. [New] builds a client of its own from rdb's options, so no option
// of rdb that concerns timeouts or retries matters, and hooks added to rdb
// do not see the limiter's commands. Redis 5.0 or newer is needed; on a
// Cluster, deciding keys of several slots in one script call needs Redis
// 7.0 (older clusters get one call per key).
//
// # Consistency
//
// Each decision is one Lua script, run atomically by the Redis primary
// that holds the key, so all app servers see one order of decisions per
// key and the limit is exact across any number of them. The scripts read
// the Redis server's clock (TIME): no app server's clock enters a
// decision, and a server clock that steps back never adds capacity. They
// compute exactly what core computes in nanoseconds; the one difference
// is TIME's resolution, so a Decision's durations are as if now were
// truncated to the microsecond. [core.MaxSpan] and [core.MaxBuckets] bound
// what a policy may ask ([core.Policy.Validate]).
//
// Replication is asynchronous: when a primary fails and a replica is
// promoted, what the replica had not received is lost, so a key can be
// admitted again up to what it was admitted within the replication lag,
// never more than one full quota. With a Cluster, set go-redis's
// ClusterStateReloadInterval to a few seconds to resume right after a
// promotion (the default is 60s). Resharding changes no decision.
//
// # Policies per call
//
// [Limiter.AllowPolicy], [Limiter.Get] and [Limiter.Set] have the
// semantics of "Policies per call" in package core: a key has one state
// whatever policy it is decided under, converted atomically in the script
// when the policy changes, and keeps what it has used. The policy must use
// the limiter's algorithm ([core.ErrAlgorithmMismatch] otherwise).
//
// # Keys
//
// One Redis key per user key and limiter, expiring after the policy's
// Recovery time:
//
//	<prefix>:{<user key>}:<algorithm>:<limit>:<window>[:<burst or buckets>][:<name>]:v3
//	ratelimit:{203.0.113.7/32}:tb:100:1m0s:100:per-ip:v3
//
// The braces are the Cluster hash tag; '%', '{' and '}' of the user key are
// escaped inside them, so a user key cannot choose its slot. Limiters with
// different policies on one prefix stay apart; changing a limiter's own
// policy starts from fresh keys, so to change limits and keep what keys
// used, give the policy with each call.
//
// # Deny cache
//
// After Redis denies a unit-cost request with RetryAfter t, further
// unit-cost requests for that key under the same policy are denied in this
// process, without a round trip, until t has passed (never beyond the
// moment Redis would admit), with Source [core.SourceDenyCache] (not after
// a denial under another policy than the key's state, which is left). Other
// servers can only consume more, so the denial stands. [Limiter.Reset] and
// [Limiter.Set] clear it for the key in this process; another process may
// keep denying until its cached RetryAfter. [WithDenyCacheSize] bounds it
// (0 switches it off); a full cache never blocks or fails a call.
//
// # Timeouts and errors
//
// [WithTimeout] (default 50ms) bounds every call from when it is made,
// waiting for its turn included; it returns by then plus the time this
// process takes to run the caller again. The limiter's own client retries
// nothing, so Redis runs a call's script at most once (a Cluster client
// still follows MOVED and ASK). The context passed to a call bounds it
// too: its deadline always, its cancellation while the call waits for its
// turn or a connection. A refused connection is an error at once. An error
// (with [WithoutFallback], and always from Reset, Get and Set) is one of:
//
//   - Redis failed (an error reply, a refused or broken connection, no
//     answer in time) or the circuit breaker kept the call from it: the
//     error wraps [ErrUnavailable] and the cause, and, for the breaker,
//     [ErrBreakerOpen] and has a method RetryAfter() time.Duration, which
//     [github.com/go-ratelimit/ratelimit/nethttp.WithFailClosed] sends.
//   - The call's context ended first: the error wraps ctx.Err() and never
//     [ErrUnavailable]. This is not a store failure.
//
// Either way the Decision carries only the policy's Limit and Policy. A
// call that timed out after it was sent may have been counted by Redis
// (over-counting by at most its cost); one whose context had ended before
// it was sent, or that was still waiting for its turn, was not.
//
// # Outages
//
// A circuit breaker is always on: [WithBreakerFailures] consecutive round
// trips that Redis fails (default 5; the calls one carried count once)
// open it. What says nothing about Redis counts for nothing: a call still
// waiting for its turn at its deadline, a command this process had not
// written by its deadline (a busy process), a caller that stopped waiting
// before its round trip ended (its round trip counts when it ends). Open,
// no call waits for Redis; every
// [WithBreakerProbeInterval] (default 1s) one call probes it, and the
// probe's answer closes it. [WithBreakerHook] reports each change.
//
// By default a call that Redis failed, or that the breaker kept from it,
// is decided without an error by the local fallback, an in-memory limiter
// of this process under the call's policy, with Source
// [core.SourceFallback]: N app servers admit up to N times the limit while
// Redis is away (N+1 in a window spanning the outage), never unlimited.
// What the fallback counted is not written back. Get and Set are not
// answered by it. [WithoutFallback] returns the errors above instead, for
// the adapter's failure policy. A cost above the policy's capacity is
// always a denial with [core.ErrCostExceedsCapacity].
//
// [New] does not contact Redis: ping it at startup, with a timeout, to find
// a mistyped address. Calls that arrive while others are in flight are
// decided together in one script call, as separate calls would be; one
// still waiting half its timeout in sends its own.
package redisstore
