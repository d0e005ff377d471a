// Package redisstore runs the policies of package core in Redis, so that
// many app servers share one limit. Its [Limiter] implements
// [core.PolicyLimiter], so every adapter (nethttp, chimw, ginmw, echomw)
// works with it unchanged, and it gives the same Decision as the in-memory
// limiter for the same schedule of requests (the conformance suite
// core/coretest runs against both, on one Redis and on a Cluster).
//
//	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
//	lim, err := redisstore.New(rdb, core.SlidingWindow(100, time.Minute), redisstore.WithPrefix("myapp"))
//	if err != nil { ... }
//	defer lim.Close()
//	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
//	err = lim.Ping(ctx) // New does not contact Redis: check it at startup
//	cancel()
//	d, err := lim.AllowN(ctx, key, 1)
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
// A policy made with core.AllOf is decided in one script call, one round
// trip: each part has a key of its own, all of a user key's parts in one
// Cluster slot, and a request is charged to every part or to none. A part
// keeps its key until it expires, through a move to a policy without it:
// a later move back finds it as it was left, recovering meanwhile, where
// the in-memory limiter starts it empty (stricter; [Limiter.Reset] says
// which parts it deletes).
// [Limiter.Settle] settles a cost known after the response in one script
// call, bounded by the timeout and never retried.
//
// # Where the rules stand
//
//   - The client the limiter makes of rdb, and which Redis it needs: [New].
//   - The keys it writes: [WithPrefix].
//   - Policies given with a call: [Limiter.AllowPolicy].
//   - Denials answered without a round trip: [WithDenyCacheSize].
//   - How long a call may take, and its errors: [WithTimeout],
//     [ErrUnavailable].
//   - Redis unavailable: [WithBreakerFailures] (the circuit breaker) and
//     [WithoutFallback] (the local fallback that decides meanwhile).
package redisstore
