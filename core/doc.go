// Package core holds the four rate-limiting algorithms, the [Decision] they
// return, and an in-memory limiter that applies one policy to any number of
// keys. It knows nothing of HTTP and imports only the standard library.
//
// # Policies
//
// Every algorithm is described the same way, as "Limit requests per Window",
// plus its own knob:
//
//	core.FixedWindow(100, time.Minute)                    // ≤ 100 in each epoch-aligned minute
//	core.SlidingWindow(100, time.Minute).WithBuckets(20)  // ≤ 100 in the trailing minute, 20 buckets
//	core.TokenBucket(100, time.Minute).WithBurst(20)      // refill 100/min, bursts of at most 20
//	core.LeakyBucket(10, time.Second).WithBurst(50)       // leave at 10/s, at most 50 in the bucket
//
// [AllOf] makes one policy of several, decided at once (10 per second and
// 1,000 per day: admitted only when both admit, charged to both or to
// neither). An invalid [Policy] is rejected by [New] (and by the Redis
// store) with an error naming the field, never a panic: [Policy.Validate] is
// the one bound for every store.
//
// # The limiter
//
// [New] returns a [MemoryLimiter], which implements [Limiter], the contract
// that every store (this one, the Redis store) and every HTTP adapter share.
// A [Decision] says whether a request passes and what the client should be
// told:
//
//	lim, err := core.New(core.TokenBucket(100, time.Minute))
//	d, err := lim.Allow(ctx, key)
//
// Idle keys are dropped without changing any decision, and [WithMaxKeys]
// bounds the keys held without ever handing quota back. A cost known only
// after the request was served is settled against what was charged
// ([Settler]).
//
// # Policies per call
//
// A MemoryLimiter (and the Redis store) is also a [PolicyLimiter]: one
// limiter and one set of keys serve every plan of an API
// (nethttp.WithPolicyFunc does it for HTTP):
//
//	free := core.TokenBucket(100, time.Hour).WithName("free")
//	pro := core.TokenBucket(10_000, time.Hour).WithName("pro")
//	lim := core.MustNew(free)
//	d, err := lim.AllowPolicy(ctx, pro, apiKey, 1)
//
// Every policy given to one limiter uses the algorithm of the limiter's own
// ([ErrAlgorithmMismatch] otherwise). A key has one state whatever the
// policy it is decided under, and [WithMaxKeys] bounds the keys of all
// policies together.
//
// When the policy a key is decided under changes (a key moved from free to
// pro, or a plan's limit changed by a reload while traffic runs), the key
// keeps what it has used, counted in units of cost, and the new policy
// applies from then on. A policy takes effect for a key at the first
// admitted AllowPolicy or Set under it; a denial, Peek and Get only look,
// and say exactly when the key, recovering meanwhile under its own policy,
// will pass ([PolicyLimiter.AllowPolicy]).
// A change never adds capacity: what a key is promised is stated on its
// history of admitted requests (instant, cost, and the policy each was
// admitted under), counting those admitted before the change. For a request
// admitted at instant t under policy P:
//
//   - fixed window: the requests admitted in P's epoch-aligned window that
//     holds t, this one included, total at most P.Limit, counting those
//     admitted since the key's latest change of policy, and those admitted
//     under the policy Q it changed from (since the change before) while
//     they lie within both Q.Window and P.Window of t;
//   - sliding window: the P.Buckets buckets of P that end with t's bucket
//     hold at most P.Limit, and the P.Buckets+1 buckets that end with it at
//     most [Policy.MaxInWindow] (buckets of Window/Buckets, epoch-aligned),
//     counting each request admitted before the key's latest change of
//     policy while it lies within the Window of every policy in force since
//     it was admitted;
//   - token bucket (and a leaky bucket used as a meter, [Policy.AsMeter]):
//     the key's level, the cost of every admitted request less what has
//     refilled since (at each moment one unit per Interval of the policy
//     then in force; never below zero), is at most P.Burst after the
//     admission;
//   - leaky bucket: each request is served at its instant plus its Delay,
//     and a request of cost n admitted under Q is followed by the next one
//     served no sooner than n intervals (Q.Interval) later: a change neither
//     moves nor crowds the requests already queued; and the requests not yet
//     served at t (served at t or later) cost at most P.Burst, this one
//     included.
//
// Where a state cannot know exactly what still lies inside the new policy's
// window, it counts what might: stricter, never more generous. A count or
// debt the new policy cannot hold (a debt beyond MaxSpan) is kept at the
// largest it can, which still denies every request, and counts as that from
// then on. Set makes a key's history one request of the given
// usage at that instant; Reset empties it. A key whose policy changes on
// every request (limits per route on a key per client) is converted each
// time: give each such policy its own keys instead
// ([github.com/go-ratelimit/ratelimit/keyfunc.Join] with the route), which
// also keeps their counts apart.
//
// # What is promised
//
// For every algorithm and every store: a client sending steadily at exactly
// Limit per Window is never denied (a leaky bucket never overflows), except
// that a key arriving while a flood of other keys fills WithMaxKeys may start
// with part of its quota spent; no interval of one Window admits more than
// [Policy.MaxInWindow]; a denied client that waits exactly RetryAfter and
// retries the same cost is admitted, absent other traffic; eviction, Reset
// and a full limiter never admit more than that bound; at one instant
// Peek's Allowed is what the next unit AllowN gets; a clock that steps
// backwards never adds capacity, and a forward jump refills only up to
// capacity. Package [github.com/go-ratelimit/ratelimit/core/coretest]
// checks every store against these promises.
package core
