// Package redisstore runs the policies of package core in Redis, so that
// many app servers share one limit. Its Limiter implements core.Limiter
// and core.PolicyLimiter, so every adapter (nethttp, chimw, ginmw, echomw)
// works with it unchanged, and it gives the same Decision as the in-memory
// limiter for the same schedule of requests: the conformance suite
// core/coretest runs against both, on a single Redis and on a Redis
// Cluster.
//
//	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
//	lim, err := redisstore.New(rdb, core.SlidingWindow(100, time.Minute), redisstore.WithPrefix("myapp"))
//	if err != nil { ... }
//	defer lim.Close()
//	d, err := lim.AllowN(ctx, key, 1)
//
// Any redis.UniversalClient works: a single node, Sentinel (a failover
// client), Cluster or Ring, with go-redis's default options. The limiter
// talks to Redis through a client of its own, built from rdb's options
// (see "Timeouts and errors"), so no option of rdb that concerns
// timeouts or retries matters to speed or to the timeout, and hooks added
// to rdb (tracing, metrics) do not see the limiter's commands. Redis 5.0 or newer is needed
// (scripts that read TIME and then write); on a Cluster, deciding keys of
// several slots in one script call needs Redis 7.0 (older clusters get one
// call per key). The tests run Redis 7.0.
//
// # Consistency
//
// Each decision is one Lua script per algorithm (EVALSHA, reloaded with
// EVAL when the server answers NOSCRIPT after a restart, a failover or
// SCRIPT FLUSH), run atomically by the Redis primary that holds the key.
// All app servers therefore see one order of decisions per key and the
// limit is exact across any number of them: 8 limiters with their own
// clients, 100 goroutines each, on one key, admit exactly the policy's
// capacity under every algorithm (TestDistributedExactness).
//
// A call that times out may still have been counted by Redis (see
// "Timeouts and errors"). Reset deletes the key for every server, but
// another process's deny cache keeps a denial it already holds until that
// denial's RetryAfter passes.
//
// # Failover
//
// Redis replication is asynchronous. When a primary fails and a replica is
// promoted, the writes the replica had not received are lost: each key's
// state rolls back to what the replica had. A request admitted in that
// replication-lag window is forgotten, so the same quota can be admitted
// again: at most as many extra requests per key as were admitted for it
// within the lag (usually well under a second of traffic), and never more
// than one full quota per key (Limit for the window algorithms, Burst for
// the buckets), because the worst a rollback can do is return a key to
// full. Keys not written during the lag lose nothing. The promoted server's
// clock takes over (see "Clock"): one that is behind changes nothing (a
// clock stepping back never adds capacity), one that is ahead refills
// keys early by the difference, again at most up to full. Redis's WAIT
// would close the gap at the cost of a replica round trip per decision;
// this package does not use it.
//
// While the primary is unreachable, calls are decided by the local
// fallback (or, WithoutFallback, return errors to the adapter's failure
// policy) instead of blocking: see "Outages". Decisions resume
// once the client reaches the new primary: with Sentinel, after
// down-after-milliseconds and the election; with a Cluster, once the
// cluster client remaps the failed master's slots, which go-redis does for
// a dead master only every ClusterStateReloadInterval (60 s by default: set
// it to a few seconds to resume right after the promotion). Keys on the
// other masters keep deciding once the failed master's slots have a master
// again. Moving slots under load (resharding) changes no decision.
// Measured on loopback on 2026-12-01 (TestSentinelFailover,
// TestClusterFailover, TestClusterResharding; benchmarks/README.md, "High
// availability"): no over-admission with the replica in sync; with it
// 100 ms behind, about one key in ten admitted again, at most 0.8 of a
// quota; decisions back 2.3-2.5 s after the kill with Sentinel
// (down-after-milliseconds 1000), 2.3-2.9 s on a Cluster with
// ClusterStateReloadInterval 1 s (60 s with the default); resharding 2000
// slots: every key exact, no errors.
//
// # Clock
//
// The scripts read the Redis server's clock (TIME, microseconds); no app
// server's clock enters a decision, so app servers with skewed clocks share
// one consistent limit (TestServerClock). Fixed windows and sliding-window
// buckets are aligned to the Unix epoch of the server's clock. A server
// clock that steps backwards never adds capacity: the scripts keep the
// stored window, bucket or theoretical arrival time, as core does.
//
// Lua numbers are doubles, exact for integers up to 2^53. The scripts hold
// an instant as whole microseconds (exact until the year 2255) plus a
// nanosecond remainder and every span in nanoseconds, so they compute
// exactly what core computes in int64 nanoseconds, whatever the policy:
// an interval of Window/Limit that is not a whole microsecond (3 per
// second, 7 per minute) gives the same Decision as in memory, to the
// nanosecond (TestMatchesMemory). The one difference is the clock's
// resolution: TIME has microseconds, so in production a Decision's
// durations are as if now were truncated to the microsecond. For the same
// reason core.Policy.Validate, for every store, bounds a policy's Window
// and Recovery time by core.MaxSpan, 2^52 ns (about 52 days: the scripts
// add up to two such spans), and core.MaxBuckets keeps a sliding window's
// ring within what the script can unpack onto Lua's stack.
//
// # Policies per call
//
// AllowPolicy decides a key under a policy given with the call, Get reads
// its usage and Set writes it (core.PolicyLimiter), with exactly the
// semantics of "Policies per call" in package core: a key has one state
// whatever policy it is decided under, and when the policy changes it
// keeps what it has used. The policy must use the limiter's algorithm
// (core.ErrAlgorithmMismatch otherwise).
//
// The state of a key records the policy numbers it was written under (see
// "Key layout"), and the script that decides a call under other numbers
// converts the state first, in the same atomic script run: no other call,
// from any process, sees the key half converted, and concurrent calls
// under different policies see one order of decisions per key. A call
// that consumes (AllowPolicy, AllowN, even when denied) writes the
// converted state, so the key is under its new policy from then on; Peek
// and Get convert only their answer and write nothing. The conversions
// are core's, made at the later of now and the instant the key was last
// written (so that a server clock that stepped back converts as if it had
// stood still there):
//
//   - token and leaky bucket: the debt (TAT - now, what is used and not
//     yet refilled) times the new interval over the old one, exactly
//     (fractions included), rounded up to the nanosecond, and at most
//     core.MaxSpan, as in core; a delaying leaky bucket's TAT never moves
//     earlier (the requests queued keep their instants). Burst is not in
//     the state: only a change of Window/Limit converts.
//   - fixed window: the count of the key's window, if that window
//     overlaps the new policy's current one and is its old policy's
//     current window or the one before, plus the old policy's Limit (the
//     value records it) for the window before the stored one when that
//     overlaps too and the stored window is the current one, becomes the
//     count of the new policy's current window. With the same Window the
//     count stays as it is. A count above the new Limit is kept: the key
//     is denied until the window ends.
//   - sliding window: each of the old ring's buckets counts in the newest
//     bucket of the new policy that it overlaps, not after the current
//     one; with the same Window and Buckets the ring stays as it is.
//
// Concurrent calls on one key under several policies never admit more, at
// one instant, than the largest capacity among them (Burst, Limit): the
// usage is one number, converted between units that agree
// (TestPolicyConcurrentAlternating).
//
// Set writes the state under the given policy: the token and leaky
// bucket as if used units had just been taken, the window algorithms as
// used units in the current window or bucket; Set(ctx, p, key, 0)
// deletes the key. Get's Used is core.Usage's: rounded up to whole units
// for the buckets.
//
// The limiter's own policy is written into its scripts as constants, as
// before; a policy given with a call travels as arguments, once per script
// call for each distinct policy, so that calls under any mix of policies
// are still decided together in one script call. A call under the
// limiter's own policy (AllowN, or AllowPolicy with that policy, whatever
// its Name) sends what it sent before this feature plus one argument, and
// costs the script one comparison per key and the instant in each value it
// writes. The limiter keeps the numbers of up to 1024 distinct policies
// given with calls; beyond them policies still work, converted to
// arguments on every call, without the deny cache.
//
// # Key layout
//
// One Redis key per user key and limiter:
//
//	<prefix>:{<user key>}:<algorithm>:<limit>:<window>[:<burst or buckets>][:<name>]:v3
//	ratelimit:{203.0.113.7/32}:tb:100:1m0s:100:per-ip:v3
//
// The braces are the Redis Cluster hash tag, and they are the library's:
// inside them '%', '{' and '}' of the user key are escaped as %25, %7B and
// %7D (the empty key is written "%"), and the prefix may not contain
// braces, so a user key cannot choose its slot (user keys "{victim}1",
// "{victim}2", ... spread over many slots: TestCluster). Escaping rather
// than hashing keeps keys readable in redis-cli and free of collisions;
// package keyfunc already hashes over-long keys. The limiter's own policy
// in the name keeps limiters with different policies on one prefix apart
// (limits stacked on one client, per second and per day:
// TestStackedLimitersStayApart); the policies given with one limiter's
// calls (AllowPolicy) share its keys, and the value records the policy a
// key was last written under. Changing a limiter's own policy starts from
// fresh keys, and the old ones expire; to change limits at runtime and keep
// what keys used, give the policy with each call. v3 names the value
// format below: keys written by earlier versions are never read.
//
// Values are packed with Redis's struct library, with the numbers of the
// policy they were last written under and the latest instant they were
// written at (Unix µs and the ns remainder, "dH"): the token and leaky
// bucket store the theoretical arrival time and the interval Window/Limit
// ("<dHddH": Unix µs, the ns remainder, the interval in ns, the instant),
// the fixed window the window number, its count, the Window, the instant
// and the Limit ("<dI4ddHI4"), the sliding window the newest bucket written, the
// bucket width, the instant and a ring of B+1 counts, each bucket's at
// position bucket mod (B+1) ("<dddH" and B+1 times "I4"; B is told by the
// value's length). The instant matters only to a conversion: a server
// clock that stepped back converts as if it stood still at that instant,
// so that going back never adds capacity through a conversion either.
//
// Every write sets the key's expiry to the policy's Recovery time rounded
// up to the millisecond (longer only after the server clock stepped back,
// or when a key converted to a policy with a smaller capacity holds more
// than its Recovery time), in the same command, so Redis itself evicts
// idle keys and no key is ever left without a TTL. An idle key older than
// its Recovery time is the same as a missing one under every policy, so
// eviction never changes a decision. A denial and a Peek write nothing,
// except a denial that converts the key to its policy.
//
// # Memory per key
//
// MEMORY USAGE in Redis 7.0 for a key with the default prefix and a
// 14-byte user key (an IPv4 key of package keyfunc), key name included
// (TestMemoryPerKey):
//
//	token bucket, leaky bucket      136 bytes
//	fixed window                    136 bytes
//	sliding window, 10 buckets      168 bytes
//	sliding window, 60 buckets      408 bytes (+4 per bucket)
//
// (with an unnamed policy: a name adds its length, rounded up by Redis's
// allocator). So a million active clients take about 130 to 170 MB; idle ones cost
// nothing once their Recovery time has passed.
//
// # Deny cache
//
// When a unit-cost request is denied with RetryAfter t, further unit-cost
// requests for that key in this process are denied locally, without a
// round trip, until t has passed (timed from when the denied call was sent,
// so never beyond the moment Redis would admit). That is exact: other
// servers can only consume more, so the denial stands, and for a unit cost
// Remaining stays 0 until RetryAfter under every algorithm; the cached
// Decision's RetryAfter and ResetAfter shrink with the local monotonic
// clock, exactly as Redis's would absent other traffic. It keeps one
// abusive client from becoming a Redis load problem. Its Decisions say
// Source core.SourceDenyCache. Other costs and Get always ask Redis, and
// so does Peek while the circuit breaker is closed (see "Outages").
//
// A denial is cached with the policy that gave it, and serves only calls
// under that policy (AllowN, or AllowPolicy with the same numbers): a
// unit-cost call under another policy asks Redis and forgets the cached
// denial, as Reset does, since it moves the key to its policy. When
// another process moves a key to another policy, this process may keep
// denying it under the old one until that denial's RetryAfter: the cache
// can deny longer than Redis would then, never admit more.
//
// Reset and Set clear this process's cache for the key once Redis has
// answered, and a denial Redis produced before that but this process
// receives only afterwards is not cached: after Reset or Set returns, the
// next unit-cost call asks Redis (TestResetUndoneByAnInFlightDenial,
// TestPolicySet).
//
// It holds at most WithDenyCacheSize keys (default 65536, a few MB) in 64
// shards; a full shard drops its expired entries, and if none has expired
// the new denial is simply not cached: the cache never blocks or fails a
// call. WithoutDenyCache switches it off.
//
// # Timeouts and errors
//
// WithTimeout (default 50ms) is the clock: every call (AllowN, Peek,
// Reset, AllowPolicy, Get, Set) has that long from when it is made,
// waiting for its turn and its round trip included, and returns by then
// plus a slack: the time this process takes to run the caller again once
// the deadline has passed. Nothing is waited for past the deadline, so a
// process with a CPU to spare runs it within a millisecond, and one whose
// processors are all taken by CPU-bound goroutines within a few of the Go
// scheduler's 10 ms time slices. The deadline is on the sockets: the
// limiter sends through a client of its own, built from rdb's options
// (*redis.Client, *redis.ClusterClient, *redis.Ring) with
// ContextTimeoutEnabled, no retries and a single dial attempt, whatever
// rdb's own settings; so a call needs no goroutine besides its caller's.
// A client of another type is used as it is, and bounds a call only if it
// applies a context's deadline. The context passed to a call bounds it
// too: its deadline always, its cancellation while the call waits for its
// turn or a connection.
//
// An answer that reached this host by the deadline is an answer, however
// busy the process: the limiter's TCP connections (not those of TLS) look
// at the socket on a timer while they wait for the network poller (which
// a saturated process consults late), and once more at the deadline,
// without waiting.
//
// A refused or reset connection is an error at once, with its cause
// (errors.Is(err, syscall.ECONNREFUSED)): no retry, no back-off. A
// stopped Redis shows as such errors; once it is back, decisions resume
// with the same Limiter (after go-redis's probe, within a second, if many
// dials failed). Timeouts are a property of this process and its machine
// too: a process so saturated that it cannot run a caller or Redis within
// the timeout reports timeouts, and a longer WithTimeout is then the
// remedy.
//
// The errors, for an adapter's failure policy (with WithoutFallback; by
// default the fallback decides a call Redis failed, without an error):
//   - Redis failed (an error reply, a refused or broken connection, no
//     answer within the timeout) or the circuit breaker kept the call from
//     it: the error wraps ErrUnavailable and the cause (for the timeout,
//     context.DeadlineExceeded), and, for the breaker, ErrBreakerOpen and
//     the failure that opened it; the breaker's error also has a method
//     RetryAfter() time.Duration, the time until it lets a probe through,
//     which nethttp.WithFailClosed sends as Retry-After. This is a store
//     failure.
//   - The call's context ended first (the client hung up, the request's
//     own deadline passed): the error wraps ctx.Err(), context.Canceled
//     or context.DeadlineExceeded, and never ErrUnavailable. This is not a
//     store failure.
//
// In both cases the Decision carries the policy's Limit and Policy, and
// nothing else.
//
// What an error says about counting: a call that returns an error had no
// reply from Redis by then (a reply there when the deadline passes, even
// at the same instant, is returned instead: TestReplyAndDeadlineArrivingTogether).
// Redis did not count it if the context had ended before the call (nothing
// is sent: TestAnEndedContextSendsNothing) or if it was still waiting for
// its turn (it is withdrawn). Otherwise it had been written to Redis,
// which may have counted it: the reply came too late, or was lost
// (TestATimedOutCallMayHaveBeenCounted). A limiter cannot tell the two
// apart without waiting past its timeout; over-counting is the safe side
// for a limiter, and never more than the failed call's cost.
//
// The limiter's client retries nothing, so Redis runs a call's script
// at most once; on a Cluster it still follows MOVED and ASK (up to
// MaxRedirects), and the cluster client may then send a script call again
// after a broken connection, within the call's deadline.
//
// The adapters apply the failure policy (nethttp fails open by default, or
// closed with WithFailClosed) and never send the error text to a client.
// A cost above the policy's capacity is a denial with
// core.ErrCostExceedsCapacity, not a store failure; when Redis could not
// tell the key's state, its Decision is marked StateUnknown.
//
// # Outages
//
// A circuit breaker in front of Redis is always on. Closed, every call
// goes to Redis, and WithBreakerFailures consecutive calls that Redis fails
// (default 5; an error reply, a refused or broken connection, no answer
// within the timeout) open it. Open, no call is sent to Redis, so none
// waits for it; once every WithBreakerProbeInterval (default 1s) one call
// goes to Redis as a probe (half-open) while the others are not sent, and
// the probe's answer closes the breaker, its failure keeps it open for
// another interval. A call whose own context ended first is not a
// failure. WithBreakerHook reports each change with its cause;
// Limiter.BreakerState reads the state.
//
// By default a call that Redis failed, or that the breaker kept from
// Redis, is decided by the local fallback: an in-memory limiter of this
// process (core.New) under the call's own policy (the Limiter's, or the
// one given to AllowPolicy), without an error, its Decision marked
// core.SourceFallback, which the adapters' hooks see and count. So keys
// stay limited, each app server on its own: N app servers admit up to N
// times the limit in all while Redis is away, and, in a window that spans
// the outage, what Redis admitted besides (up to N+1 times the limit),
// since neither side sees the other's count. A denial in the deny cache
// still answers first: it is Redis's own. Peek answers as the next unit
// AllowN would. The two states stay apart: when the breaker closes,
// Redis's state resumes, and what only the fallback counted is not written
// back; the fallback keeps its state across outages until its keys
// recover. Reset forgets the key in the fallback too. Get and Set are not
// answered by the fallback.
//
// WithoutFallback returns those failures as errors instead (see "Timeouts
// and errors"), for the adapter's failure policy: nethttp serves the
// request by default (fail open: no limit while Redis is away) or answers
// 503 with nethttp.WithFailClosed (fail closed: nothing passes). A cost
// above capacity is still a denial, with core.ErrCostExceedsCapacity and
// a Decision marked StateUnknown, whose Remaining and ResetAfter the
// adapters do not write.
//
// New does not contact Redis. To find a mistyped address or a Redis that
// is down at startup, ping it before serving, with a timeout:
//
//	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
//	defer cancel()
//	if err := rdb.Ping(ctx).Err(); err != nil {
//		log.Printf("redis: %v: limiting locally until it answers", err)
//	}
//
// A Limiter built while Redis is down decides in the fallback (or returns
// errors) until a probe is answered.
//
// # Performance
//
// One round trip per decision at most, and fewer under load: the calls
// that arrive while requests are in flight are decided together by one
// script call (one TIME and one Lua entry for all of them, each key read
// and written once), in the order they arrived, as separate calls would
// decide them. On a Cluster the calls queue per node, so a node's calls
// go together and wait for that node alone; a node that does not serve
// every key of a call (during resharding or a failover) refuses it before
// changing anything, and those calls are then sent key by key, following
// MOVED and ASK. A lone call costs a round trip and the script's server
// time, sent from the caller's goroutine; the calls that queue up
// meanwhile are sent by the caller whose round trip has just ended (while
// half its timeout is left; else by the oldest queued call's caller).
// benchmarks/README.md has the figures, against a bare EVALSHA and the
// other Go Redis limiters.
//
// # Testing
//
// Package redistest starts throwaway redis-server processes (and a
// three-master cluster) for tests, or uses REDIS_ADDR. This package's own
// tests fix the scripts' "now" to a test clock through an option that exists
// only in its test files: nothing in the exported API can pass a time to
// the scripts, so a production Limiter always runs on the server's clock.
package redisstore
