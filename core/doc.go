// Package core holds the four rate-limiting algorithms, the Decision they
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
// A Policy is a plain value; an invalid one is rejected by New (and by the
// Redis store) with an error naming the field, never a panic.
//
// # Decisions
//
// A Decision says whether a request passes and what the client should be
// told: Remaining, ResetAfter (until the full quota is back), RetryAfter
// (for a denial: waiting exactly that long and retrying the same cost
// succeeds, absent other traffic) and, for the leaky bucket, the Delay to
// wait before serving. A cost no policy state could ever admit (above Burst,
// above Limit per window) is denied with ErrCostExceedsCapacity rather than
// with a RetryAfter that would lie; a cost <= 0 is ErrInvalidCost and never
// adds capacity.
//
// # The limiter
//
// New returns a MemoryLimiter, which implements Limiter, the contract that
// every store (this one, the Redis store) and every HTTP adapter share:
//
//	lim, err := core.New(core.TokenBucket(100, time.Minute))
//	d, err := lim.Allow(ctx, key)
//
// A request for a key already present takes no shared lock and allocates
// nothing. Idle keys are dropped by a background goroutine (Close stops it):
// a key idle for longer than Policy.Recovery is indistinguishable from a key
// never seen, so dropping it is lossless. WithMaxKeys bounds the keys held;
// when a flood fills the limiter, keys are evicted without ever handing
// quota back (see WithMaxKeys).
//
// # Policies per call
//
// A MemoryLimiter (and the Redis store) is also a PolicyLimiter: AllowPolicy
// decides a key under a policy given with the call, so that one limiter and
// one set of keys serve every plan of an API, the policy looked up per
// request (nethttp.WithPolicyFunc does it for HTTP):
//
//	free := core.TokenBucket(100, time.Hour).WithName("free")
//	pro := core.TokenBucket(10_000, time.Hour).WithName("pro")
//	lim := core.MustNew(free)
//	d, err := lim.AllowPolicy(ctx, pro, apiKey, 1)
//
// Every policy given to one limiter uses the algorithm of the limiter's own
// (ErrAlgorithmMismatch otherwise). A key has one state whatever the policy
// it is decided under, and WithMaxKeys bounds the keys of all policies
// together.
//
// When the policy a key is decided under changes (a key moved from free to
// pro, or a plan's limit changed by a configuration reload while traffic
// runs), the key keeps what it has used, counted in units of cost, and the
// new policy applies from then on:
//
//   - token and leaky bucket: the tokens taken and not yet refilled (the
//     requests still in the bucket) are kept exactly, fractions included,
//     and refill (leave) at the new rate; a key that used 80 of free's 100
//     has 9,920 of pro's 10,000, and one moved to a smaller Burst than it
//     has used is denied until it is back under it;
//   - fixed window: the count of the key's current window carries into the
//     new policy's current window, even above its Limit, and is gone when
//     that window ends; a window of the old policy that has already ended
//     carries nothing (a count above the largest Limit the new Window
//     allows, see Validate, is kept at that largest Limit);
//   - sliding window: with the same Window and Buckets the counts are kept
//     bucket by bucket; otherwise everything the trailing window counts is
//     carried into the new policy's current bucket, and so expires one new
//     Window later (stricter, never more generous).
//
// A key whose policy changes on every request (limits per route on a key
// per client) is converted each time, under its shard's mutex: give each
// such policy its own keys instead (keyfunc.Combine with the route), which
// also keeps their counts apart.
//
// A change never adds capacity beyond that. Get reads a key's usage (Used,
// Remaining, ResetAfter) under a policy without consuming, and Set writes it
// (grant credits, import state from another system), in the same units;
// both convert as above.
//
// # What is promised
//
// For every algorithm and every store (this one and the Redis store): a
// client sending steadily at exactly Limit per Window is never denied (a
// leaky bucket never overflows), except that a key arriving while a flood
// of other keys fills WithMaxKeys may start with part of its quota spent;
// no interval of one Window
// admits more than Policy.MaxInWindow; a denied client that waits exactly
// RetryAfter and retries the same cost is admitted, absent other traffic;
// eviction, Reset and a full limiter never admit more than that bound; and
// at one instant Peek's Allowed is what the next unit AllowN gets. Package
// coretest checks each of these against a slow reference model.
//
// Time comes from the process's monotonic clock, or from WithClock in tests.
// A clock that steps backwards never adds capacity, and a forward jump
// refills only up to capacity.
//
// # Design notes
//
// The seed design of this project proposed four counter optimisations. Each
// was weighed against what an exact, per-key limiter needs; the figures are
// from BenchmarkAllow and BenchmarkDesign (go test -bench 'Allow|Design'
// ./core) on the 2-core machine this was written on, compared side by side.
//
//   - Striped counters (a LongAdder of 8 cells) make increments cheap under
//     contention but cannot answer "is the total below Limit?" atomically:
//     the sum of the cells is stale as soon as it is read, so two callers can
//     both see room for the last unit. Admission is check-then-increment, and
//     one CompareAndSwap on one word is the cheapest exact form of it. It is
//     also the faster one here: a striped check must read all eight cells on
//     every request (BenchmarkDesign/hotkey: 17-26 ns/op for the CAS, 35-63
//     for eight cells, two goroutines on one key).
//   - 64-byte padding is applied to the shards (their locks are the words
//     that all readers write), not to the millions of per-key states, where
//     it would multiply memory by eight for no gain: two keys rarely share a
//     cache line and are rarely hot together.
//   - Switching windows by bit arithmetic ((now >> 10) & 1) requires windows
//     that are powers of two of a time unit; policies here say "per minute".
//     The division it would replace did not measure apart from a shift
//     (BenchmarkDesign/window: 9-13 ns/op for both, loop included), and a
//     key's window is found by that one division, not a time comparison.
//   - A flat atomic array of buckets for the sliding window allows lock-free
//     increments but not an exact check of two sums over several buckets
//     while another caller moves the ring to the next bucket; the per-key
//     mutex costs one uncontended lock (BenchmarkAllow alg=sliding against
//     alg=token) and keeps the count exact.
package core
