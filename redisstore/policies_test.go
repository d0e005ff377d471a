package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
)

// onEachServer runs f on one Redis and on the three-master Cluster.
func onEachServer(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient)) {
	t.Run("redis", func(t *testing.T) { f(t, newClient(t, redistest.Addr(t))) })
	t.Run("cluster", func(t *testing.T) {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.Cluster(t)})
		t.Cleanup(func() { _ = rdb.Close() })
		f(t, rdb)
	})
}

// policyFixture is a limiter on a test clock that starts on a round
// minute, so that the window algorithms' boundaries are known.
type policyFixture struct {
	lim   *Limiter
	clock *coretest.Clock
}

func newPolicyFixture(t *testing.T, rdb redis.UniversalClient, own core.Policy, opts ...Option) policyFixture {
	clock := coretest.NewClock(coretest.Epoch.Truncate(time.Hour).Add(time.Hour))
	return policyFixture{lim: newLimiter(t, rdb, own, append([]Option{withClock(clock.Now)}, opts...)...), clock: clock}
}

// admit makes n unit-cost calls under p and requires each to be admitted.
func (f policyFixture) admit(t *testing.T, p core.Policy, key string, n int) {
	t.Helper()
	for i := range n {
		d, err := f.lim.AllowPolicy(context.Background(), p, key, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed, "call %d of %d under %v", i+1, n, p)
	}
}

// countAdmitted makes unit-cost calls under p until one is denied (at most
// max) and returns how many were admitted.
func (f policyFixture) countAdmitted(t *testing.T, p core.Policy, key string, max int) int {
	t.Helper()
	for i := range max {
		d, err := f.lim.AllowPolicy(context.Background(), p, key, 1)
		require.NoError(t, err)
		if !d.Allowed {
			return i
		}
	}
	return max
}

func (f policyFixture) get(t *testing.T, p core.Policy, key string) core.Usage {
	t.Helper()
	u, err := f.lim.Get(context.Background(), p, key)
	require.NoError(t, err)
	return u
}

// TestPolicyMoveKeepsUsage moves a key from one policy to another under
// each algorithm and checks what it keeps: exact Remaining after the move
// and exact Used from Get, as "Policies per call" in package core says.
func TestPolicyMoveKeepsUsage(t *testing.T) {
	ctx := context.Background()
	onEachServer(t, func(t *testing.T, rdb redis.UniversalClient) {
		for _, alg := range []struct {
			name      string
			free, pro core.Policy
		}{
			{"token bucket", core.TokenBucket(100, time.Hour).WithName("free"), core.TokenBucket(10_000, time.Hour).WithName("pro")},
			{"leaky bucket", core.LeakyBucket(100, time.Hour).AsMeter().WithName("free"), core.LeakyBucket(10_000, time.Hour).AsMeter().WithName("pro")},
		} {
			t.Run(alg.name+": the tokens taken are kept exactly, fractions included", func(t *testing.T) {
				f := newPolicyFixture(t, rdb, alg.free)
				f.admit(t, alg.free, "k", 80)
				assert.Equal(t, core.Usage{Used: 80, Remaining: 20, ResetAfter: 80 * 36 * time.Second, Policy: alg.free}, f.get(t, alg.free, "k"))
				// Get converts for its answer only: the key stays under free,
				// full again when free's 80 units are back.
				assert.Equal(t, core.Usage{Used: 80, Remaining: 9_920, ResetAfter: 80 * 36 * time.Second, Policy: alg.pro}, f.get(t, alg.pro, "k"))
				assert.Equal(t, core.Usage{Used: 80, Remaining: 20, ResetAfter: 80 * 36 * time.Second, Policy: alg.free}, f.get(t, alg.free, "k"))
				d, err := f.lim.AllowPolicy(ctx, alg.pro, "k", 1)
				require.NoError(t, err)
				assert.True(t, d.Allowed)
				assert.Equal(t, int64(9_919), d.Remaining)
				assert.Equal(t, alg.pro, d.Policy)
				assert.Equal(t, int64(10_000), d.Limit)

				// Under pro the debt of 81 units (29.16s) refills at pro's
				// rate: 18s later 50 units are back, 31 are used, in free's
				// units too (back at pro's rate in 11.16s).
				f.clock.Advance(18 * time.Second)
				assert.Equal(t, core.Usage{Used: 31, Remaining: 69, ResetAfter: 11_160 * time.Millisecond, Policy: alg.free}, f.get(t, alg.free, "k"))
				// Half a pro interval later, 30.5 units: Used rounds up,
				// Remaining down, and the debt converts exactly.
				f.clock.Advance(180 * time.Millisecond)
				assert.Equal(t, core.Usage{Used: 31, Remaining: 69, ResetAfter: 10_980 * time.Millisecond, Policy: alg.free}, f.get(t, alg.free, "k"))
				assert.Equal(t, core.Usage{Used: 31, Remaining: 9_969, ResetAfter: 10_980 * time.Millisecond, Policy: alg.pro}, f.get(t, alg.pro, "k"))
				d, err = f.lim.AllowPolicy(ctx, alg.free, "k", 1)
				require.NoError(t, err)
				assert.True(t, d.Allowed)
				assert.Equal(t, int64(68), d.Remaining, "31.5 used")
				assert.Equal(t, 1134*time.Second, d.ResetAfter)
				assert.Equal(t, core.Usage{Used: 32, Remaining: 9_968, ResetAfter: 1134 * time.Second, Policy: alg.pro}, f.get(t, alg.pro, "k"))
			})
		}

		t.Run("token bucket: a move to a smaller Burst than used is denied, the key left at its old rate", func(t *testing.T) {
			big := core.TokenBucket(20, time.Second)
			small := core.TokenBucket(4, time.Second)
			f := newPolicyFixture(t, rdb, big)
			f.admit(t, big, "k", 5)
			u := f.get(t, small, "k")
			assert.Equal(t, int64(5), u.Used)
			assert.Equal(t, int64(0), u.Remaining)
			d, err := f.lim.AllowPolicy(ctx, small, "k", 1)
			require.NoError(t, err)
			require.False(t, d.Allowed)
			// 5 units of 250ms is 1.25s of debt; tau is 1s: one more fits
			// once the debt is down to 750ms, 3 units. The denial leaves
			// the key under big, refilling at its rate: 3 of its units are
			// owed at 100ms, and none at 250ms.
			assert.Equal(t, 100*time.Millisecond, d.RetryAfter)
			assert.Equal(t, 250*time.Millisecond, d.ResetAfter)
			f.clock.Advance(d.RetryAfter - 1)
			d, err = f.lim.AllowPolicy(ctx, small, "k", 1)
			require.NoError(t, err)
			assert.False(t, d.Allowed, "1ns before RetryAfter")
			f.clock.Advance(1)
			d, err = f.lim.AllowPolicy(ctx, small, "k", 1)
			require.NoError(t, err)
			assert.True(t, d.Allowed)
			assert.Equal(t, int64(0), d.Remaining)
		})

		t.Run("fixed window: the current window's count carries into the new policy's", func(t *testing.T) {
			a := core.FixedWindow(10, time.Minute)
			b := core.FixedWindow(100, time.Hour)
			f := newPolicyFixture(t, rdb, a)
			f.clock.Advance(30 * time.Second)
			f.admit(t, a, "k", 7)
			// a's minute counts in b's hour until it is two minutes old.
			assert.Equal(t, core.Usage{Used: 7, Remaining: 93, ResetAfter: 90 * time.Second, Policy: b}, f.get(t, b, "k"))
			d, err := f.lim.AllowPolicy(ctx, b, "k", 1)
			require.NoError(t, err)
			assert.True(t, d.Allowed)
			assert.Equal(t, int64(92), d.Remaining)
			// Back under a: b's window is current, its 8 carry into a's,
			// and into each of a's minutes within b's hour.
			assert.Equal(t, core.Usage{Used: 8, Remaining: 2, ResetAfter: time.Hour - 30*time.Second, Policy: a}, f.get(t, a, "k"))
			// The same Window with another Limit: the count as it is.
			c := core.FixedWindow(20, time.Hour)
			assert.Equal(t, core.Usage{Used: 8, Remaining: 12, ResetAfter: time.Hour - 30*time.Second, Policy: c}, f.get(t, c, "k"))
		})

		t.Run("fixed window: a window that has just ended still counts in a longer one", func(t *testing.T) {
			a := core.FixedWindow(10, time.Minute)
			b := core.FixedWindow(100, time.Hour)
			f := newPolicyFixture(t, rdb, a)
			f.admit(t, a, "k", 7)
			f.admit(t, a, "k2", 7)
			f.clock.Advance(time.Minute)
			// Until it is two minutes old.
			assert.Equal(t, core.Usage{Used: 7, Remaining: 93, ResetAfter: time.Minute, Policy: b}, f.get(t, b, "k"))
			assert.Equal(t, 93, f.countAdmitted(t, b, "k", 200))
			// Two windows on, every request of a's window is more than a
			// Window old: nothing counts.
			f.clock.Advance(time.Minute)
			assert.Equal(t, core.Usage{Used: 0, Remaining: 100, Policy: b}, f.get(t, b, "k2"))
		})

		t.Run("sliding window: the same Window and Buckets keep the counts bucket by bucket", func(t *testing.T) {
			a := core.SlidingWindow(10, 10*time.Second)
			b := core.SlidingWindow(20, 10*time.Second)
			f := newPolicyFixture(t, rdb, a)
			f.admit(t, a, "k", 3)
			f.clock.Advance(3 * time.Second)
			f.admit(t, a, "k", 4)
			assert.Equal(t, int64(7), f.get(t, b, "k").Used)
			d, err := f.lim.AllowPolicy(ctx, b, "k", 1)
			require.NoError(t, err)
			assert.True(t, d.Allowed)
			assert.Equal(t, int64(12), d.Remaining)
			// The first bucket's 3 leave the trailing window at +10s.
			f.clock.Advance(7 * time.Second)
			assert.Equal(t, int64(5), f.get(t, b, "k").Used)
			assert.Equal(t, int64(5), f.get(t, a, "k").Used)
		})

		t.Run("sliding window: another Window moves the trailing total into the current bucket", func(t *testing.T) {
			a := core.SlidingWindow(10, 10*time.Second)
			b := core.SlidingWindow(20, 20*time.Second).WithBuckets(4) // 5s buckets
			f := newPolicyFixture(t, rdb, a)
			f.admit(t, a, "k", 3)
			f.clock.Advance(3 * time.Second)
			f.admit(t, a, "k", 4)
			f.clock.Advance(time.Second) // +4s
			u := f.get(t, b, "k")
			assert.Equal(t, int64(7), u.Used)
			assert.Equal(t, int64(13), u.Remaining)
			d, err := f.lim.AllowPolicy(ctx, b, "k", 1)
			require.NoError(t, err)
			assert.True(t, d.Allowed)
			assert.Equal(t, int64(12), d.Remaining)
			// All 8 are in b's bucket [0s, 5s), in its trailing window
			// until +20s, when it drops out.
			f.clock.Advance(15*time.Second + 999*time.Millisecond)
			assert.Equal(t, int64(8), f.get(t, b, "k").Used)
			f.clock.Advance(time.Millisecond)
			assert.Equal(t, int64(0), f.get(t, b, "k").Used)
		})
	})
}

// TestPolicyPlanChange changes a plan's limit while its keys are in use,
// as a configuration reload does: a raised limit admits exactly the new
// room at once, a lowered one denies until the key is back under it.
func TestPolicyPlanChange(t *testing.T) {
	ctx := context.Background()
	onEachServer(t, func(t *testing.T, rdb redis.UniversalClient) {
		for _, tc := range []struct {
			before, raised, lowered core.Policy
		}{
			{core.TokenBucket(10, time.Second), core.TokenBucket(20, time.Second), core.TokenBucket(5, time.Second)},
			{core.LeakyBucket(10, time.Second), core.LeakyBucket(20, time.Second), core.LeakyBucket(5, time.Second)},
			{core.FixedWindow(10, time.Minute), core.FixedWindow(20, time.Minute), core.FixedWindow(5, time.Minute)},
			{core.SlidingWindow(10, time.Minute), core.SlidingWindow(20, time.Minute), core.SlidingWindow(5, time.Minute)},
		} {
			t.Run(tc.before.Algorithm.String(), func(t *testing.T) {
				f := newPolicyFixture(t, rdb, tc.before)
				if tc.before.Algorithm == core.AlgLeakyBucket {
					// A delaying leaky bucket admits Burst at one instant.
					f.admit(t, tc.before, "k", 10)
				} else {
					assert.Equal(t, 10, f.countAdmitted(t, tc.before, "k", 50))
				}
				room := 10
				if tc.before.Algorithm == core.AlgLeakyBucket {
					// The 10 queued are served at the old pace, over 1s,
					// and new requests after them: 1s is 20 of the
					// raised plan's units, its whole depth.
					room = 0
				}
				assert.Equal(t, room, f.countAdmitted(t, tc.raised, "k", 50), "raised: exactly the new room")
				assert.Equal(t, int64(20), f.get(t, tc.raised, "k").Used)

				f.admit(t, tc.before, "k2", 7)
				u := f.get(t, tc.lowered, "k2")
				assert.Equal(t, int64(7), u.Used, "lowered below what is used")
				assert.Equal(t, int64(0), u.Remaining)
				d, err := f.lim.AllowPolicy(ctx, tc.lowered, "k2", 1)
				require.NoError(t, err)
				require.False(t, d.Allowed)
				require.Positive(t, d.RetryAfter)
				f.clock.Advance(d.RetryAfter)
				d, err = f.lim.AllowPolicy(ctx, tc.lowered, "k2", 1)
				require.NoError(t, err)
				assert.True(t, d.Allowed, "admitted after RetryAfter")
			})
		}
	})
}

// TestPolicySet checks that Set makes the usage exactly what it says under
// every algorithm: Get reads it back, and AllowPolicy then admits exactly
// the rest of the capacity; Set 0 gives the full quota back and forgets
// the deny cache's denial.
func TestPolicySet(t *testing.T) {
	ctx := context.Background()
	onEachServer(t, func(t *testing.T, rdb redis.UniversalClient) {
		for _, tc := range []struct{ own, p core.Policy }{
			{core.TokenBucket(10, time.Hour), core.TokenBucket(100, time.Hour).WithBurst(50)},
			{core.LeakyBucket(10, time.Hour).AsMeter(), core.LeakyBucket(100, time.Hour).WithBurst(50).AsMeter()},
			{core.FixedWindow(10, time.Minute), core.FixedWindow(50, time.Hour)},
			{core.SlidingWindow(10, time.Minute), core.SlidingWindow(50, time.Hour).WithBuckets(6)},
		} {
			t.Run(tc.p.String(), func(t *testing.T) {
				f := newPolicyFixture(t, rdb, tc.own)
				f.admit(t, tc.own, "k", 3) // written under another policy first
				require.NoError(t, f.lim.Set(ctx, tc.p, "k", 42))
				u := f.get(t, tc.p, "k")
				assert.Equal(t, int64(42), u.Used)
				assert.Equal(t, int64(8), u.Remaining)
				assert.Equal(t, 8, f.countAdmitted(t, tc.p, "k", 100))

				// Denied, and cached: Set 0 forgets the denial too.
				d, err := f.lim.AllowPolicy(ctx, tc.p, "k", 1)
				require.NoError(t, err)
				require.False(t, d.Allowed)
				require.NoError(t, f.lim.Set(ctx, tc.p, "k", 0))
				assert.Equal(t, core.Usage{Remaining: 50, Policy: tc.p}, f.get(t, tc.p, "k"))
				assert.Equal(t, 50, f.countAdmitted(t, tc.p, "k", 100))

				// The full capacity, under the limiter's own policy too.
				require.NoError(t, f.lim.Set(ctx, tc.own, "k", 10))
				d, err = f.lim.Allow(ctx, "k")
				require.NoError(t, err)
				assert.False(t, d.Allowed)
				assert.Equal(t, int64(10), f.get(t, tc.own, "k").Used)
			})
		}
	})
}

// TestPolicyGetChangesNothing reads keys under other policies than the
// one they were written under and requires the value and its expiry in
// Redis untouched.
func TestPolicyGetChangesNothing(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t, redistest.Addr(t))
	for _, tc := range []struct{ own, other core.Policy }{
		{core.TokenBucket(10, time.Hour), core.TokenBucket(100, time.Hour)},
		{core.LeakyBucket(10, time.Hour), core.LeakyBucket(7, time.Minute)},
		{core.FixedWindow(10, time.Minute), core.FixedWindow(50, time.Hour)},
		{core.SlidingWindow(10, time.Minute), core.SlidingWindow(50, time.Hour).WithBuckets(6)},
	} {
		t.Run(tc.own.Algorithm.String(), func(t *testing.T) {
			f := newPolicyFixture(t, rdb, tc.own)
			f.admit(t, tc.own, "k", 4)
			key := f.lim.keys.key("k")
			before, err := rdb.Get(ctx, key).Result()
			require.NoError(t, err)
			ttl, err := rdb.PTTL(ctx, key).Result()
			require.NoError(t, err)
			for range 3 {
				f.clock.Advance(time.Second)
				f.get(t, tc.other, "k")
				f.get(t, tc.own, "k")
				_, err := f.lim.Peek(ctx, "k")
				require.NoError(t, err)
			}
			after, err := rdb.Get(ctx, key).Result()
			require.NoError(t, err)
			assert.Equal(t, before, after)
			ttl2, err := rdb.PTTL(ctx, key).Result()
			require.NoError(t, err)
			assert.LessOrEqual(t, ttl2, ttl)
			_, err = f.lim.Get(ctx, tc.other, "fresh")
			require.NoError(t, err)
			n, err := rdb.Exists(ctx, f.lim.keys.key("fresh")).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "a Get of a missing key writes nothing")
		})
	}
}

func TestPolicyErrors(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t, redistest.Addr(t))
	lim := newLimiter(t, rdb, core.TokenBucket(10, time.Second))
	t.Run("another algorithm", func(t *testing.T) {
		p := core.FixedWindow(10, time.Second)
		_, err := lim.AllowPolicy(ctx, p, "k", 1)
		assert.ErrorIs(t, err, core.ErrAlgorithmMismatch)
		_, err = lim.Get(ctx, p, "k")
		assert.ErrorIs(t, err, core.ErrAlgorithmMismatch)
		assert.ErrorIs(t, lim.Set(ctx, p, "k", 1), core.ErrAlgorithmMismatch)
	})
	t.Run("an invalid policy", func(t *testing.T) {
		p := core.TokenBucket(10, time.Second).WithBurst(-1)
		_, err := lim.AllowPolicy(ctx, p, "k", 1)
		require.Error(t, err)
		assert.Contains(t, err.Error(), p.Validate().Error())
		_, err = lim.Get(ctx, p, "k")
		assert.Contains(t, err.Error(), p.Validate().Error())
		assert.Contains(t, lim.Set(ctx, p, "k", 1).Error(), p.Validate().Error())
		_, err = lim.AllowPolicy(ctx, core.Policy{}, "k", 1)
		assert.ErrorContains(t, err, "unknown algorithm")
	})
	t.Run("a recovery time beyond 2^52 ns", func(t *testing.T) {
		_, err := lim.AllowPolicy(ctx, core.TokenBucket(1, 60*24*time.Hour), "k", 1)
		assert.ErrorContains(t, err, "window must be <= 1250h59m59.627370496s (MaxSpan)")
	})
	t.Run("a usage out of range", func(t *testing.T) {
		p := core.TokenBucket(100, time.Second).WithBurst(20)
		assert.ErrorIs(t, lim.Set(ctx, p, "k", -1), core.ErrInvalidUsage)
		assert.ErrorIs(t, lim.Set(ctx, p, "k", 21), core.ErrInvalidUsage)
		assert.NoError(t, lim.Set(ctx, p, "k", 20))
	})
	t.Run("cost", func(t *testing.T) {
		p := core.TokenBucket(100, time.Second).WithBurst(20)
		_, err := lim.AllowPolicy(ctx, p, "k", 0)
		assert.ErrorIs(t, err, core.ErrInvalidCost)
		d, err := lim.AllowPolicy(ctx, p, "c", 21)
		assert.ErrorIs(t, err, core.ErrCostExceedsCapacity)
		assert.False(t, d.Allowed)
		assert.Equal(t, int64(20), d.Remaining)
		assert.Equal(t, p, d.Policy)
	})
	t.Run("closed", func(t *testing.T) {
		l := newLimiter(t, rdb, core.TokenBucket(10, time.Second))
		require.NoError(t, l.Close())
		p := core.TokenBucket(20, time.Second)
		_, err := l.AllowPolicy(ctx, p, "k", 1)
		assert.ErrorIs(t, err, core.ErrClosed)
		_, err = l.Get(ctx, p, "k")
		assert.ErrorIs(t, err, core.ErrClosed)
		assert.ErrorIs(t, l.Set(ctx, p, "k", 1), core.ErrClosed)
	})
}

// TestPolicyConcurrentAlternating has goroutines call AllowPolicy on one
// key, alternating two policies of each algorithm, at one instant: one
// state, so never more than the larger capacity in all, and the usage
// Get then reads is exactly what was admitted. The calls batch together,
// so script calls mix the policies.
func TestPolicyConcurrentAlternating(t *testing.T) {
	onEachServer(t, func(t *testing.T, rdb redis.UniversalClient) {
		for _, pair := range [][2]core.Policy{
			{core.TokenBucket(100, time.Hour), core.TokenBucket(200, time.Hour)},
			{core.LeakyBucket(100, time.Hour), core.LeakyBucket(200, time.Hour).AsMeter()},
			{core.FixedWindow(100, time.Hour), core.FixedWindow(200, time.Hour)},
			{core.SlidingWindow(100, time.Hour), core.SlidingWindow(200, time.Hour)},
		} {
			t.Run(pair[0].Algorithm.String(), func(t *testing.T) {
				var mixed atomic.Int64 // cross-slot script calls under several policies
				addHook(rdb, &recorder{onCmd: func(cmd redis.Cmder) {
					if args := cmd.Args(); isScriptCall(cmd) && args[2] == 0 && args[len(args)-3] != 0 {
						mixed.Add(1)
					}
				}})
				f := newPolicyFixture(t, rdb, pair[0], WithTimeout(30*time.Second))
				var admitted atomic.Int64
				var own [8]int64 // each goroutine's own key: on a Cluster, batches of many slots
				var wg sync.WaitGroup
				for g := range 8 {
					wg.Go(func() {
						for i := range 100 {
							d, err := f.lim.AllowPolicy(context.Background(), pair[(g+i)%2], "hot", 1)
							if !assert.NoError(t, err) {
								return
							}
							if d.Allowed {
								admitted.Add(1)
							}
							d, err = f.lim.AllowPolicy(context.Background(), pair[(g+i+1)%2], fmt.Sprintf("own-%d", g), 1)
							if !assert.NoError(t, err) {
								return
							}
							if d.Allowed {
								own[g]++
							}
						}
					})
				}
				wg.Wait()
				t.Logf("%d cross-slot script calls with policies given", mixed.Load())
				for g, n := range own {
					assert.Equal(t, int64(100), n, "goroutine %d's own key: room for every call", g)
					assert.Equal(t, n, f.get(t, pair[1], fmt.Sprintf("own-%d", g)).Used)
				}
				n := admitted.Load()
				assert.LessOrEqual(t, n, int64(200), "never more than the larger capacity")
				assert.GreaterOrEqual(t, n, int64(100), "every call admitted while under the smaller")
				assert.Equal(t, n, f.get(t, pair[1], "hot").Used)
				assert.Equal(t, n, f.get(t, pair[0], "hot").Used)
			})
		}
	})
}

// TestPolicyDenyCache checks that a denial cached under one policy is
// never served under another, and that a call under another policy
// forgets it.
func TestPolicyDenyCache(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t, redistest.Addr(t))
	a := core.TokenBucket(1, time.Hour)
	b := core.TokenBucket(100, time.Hour)
	f := newPolicyFixture(t, rdb, a)
	f.admit(t, a, "k", 1)
	for _, want := range []core.Source{core.SourceStore, core.SourceDenyCache} {
		d, err := f.lim.Allow(ctx, "k")
		require.NoError(t, err)
		require.False(t, d.Allowed)
		assert.Equal(t, want, d.Source)
	}
	d, err := f.lim.AllowPolicy(ctx, b, "k", 1)
	require.NoError(t, err)
	assert.True(t, d.Allowed, "not the denial cached under a")
	assert.Equal(t, core.SourceStore, d.Source)
	assert.Equal(t, int64(98), d.Remaining)
	d, err = f.lim.Allow(ctx, "k")
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.Equal(t, core.SourceStore, d.Source, "the call under b forgot a's denial")

	// Denials under b are cached under b alone.
	require.NoError(t, f.lim.Set(ctx, b, "k", 100))
	for _, want := range []core.Source{core.SourceStore, core.SourceDenyCache} {
		d, err := f.lim.AllowPolicy(ctx, b, "k", 1)
		require.NoError(t, err)
		require.False(t, d.Allowed)
		assert.Equal(t, want, d.Source)
		assert.Equal(t, b, d.Policy)
		assert.Equal(t, int64(100), d.Limit)
	}
}

// TestPolicyFallback: while Redis is unavailable, AllowPolicy is decided
// by the fallback under the call's policy, and Get and Set return errors
// wrapping ErrUnavailable.
func TestPolicyFallback(t *testing.T) {
	ctx := context.Background()
	p := core.FixedWindow(1000, time.Hour)
	s := newBreakerSetup(t, core.FixedWindow(100, time.Hour))
	s.calls.fail.Store(true)
	d, err := s.lim.AllowPolicy(ctx, p, "k", 1)
	require.NoError(t, err)
	assert.Equal(t, core.SourceFallback, d.Source)
	assert.Equal(t, p, d.Policy, "the call's policy")
	assert.Equal(t, int64(999), d.Remaining)
	_, err = s.lim.Get(ctx, p, "k")
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.ErrorIs(t, s.lim.Set(ctx, p, "k", 1), ErrUnavailable)
	require.Equal(t, BreakerOpen, breakerState(s.lim), "Get and Set count as failures")
	_, err = s.lim.Get(ctx, p, "k")
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.ErrorIs(t, err, ErrBreakerOpen)
	assert.ErrorIs(t, s.lim.Set(ctx, p, "k", 1), ErrBreakerOpen)
	d, err = s.lim.AllowPolicy(ctx, p, "k", 1)
	require.NoError(t, err)
	assert.Equal(t, core.SourceFallback, d.Source)
	assert.Equal(t, int64(998), d.Remaining)

	// Redis back: the probe closes the breaker and Redis decides under p.
	s.calls.fail.Store(false)
	s.clock.Advance(breakerTestInterval)
	d, err = s.lim.AllowPolicy(ctx, p, "k", 1)
	require.NoError(t, err)
	assert.Equal(t, core.SourceStore, d.Source)
	assert.Equal(t, int64(999), d.Remaining)
	u, err := s.lim.Get(ctx, p, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(1), u.Used)
}

// TestPoliciesMatchMemory drives random schedules of per-call policies
// through the Redis limiter and the in-memory one on the same clock and
// requires identical Decisions and Usages: keys moving between plans,
// Get, Set, and intervals that are not whole microseconds.
func TestPoliciesMatchMemory(t *testing.T) {
	rdb := newClient(t, redistest.Addr(t))
	for i, plans := range [][]core.Policy{
		{core.TokenBucket(3, time.Second), core.TokenBucket(7, time.Second).WithBurst(4), core.TokenBucket(100, time.Minute).WithBurst(9)},
		{core.LeakyBucket(3, time.Second).WithBurst(5), core.LeakyBucket(11, time.Second), core.LeakyBucket(5, time.Second).AsMeter()},
		{core.FixedWindow(5, 1500*time.Microsecond+7), core.FixedWindow(9, time.Second), core.FixedWindow(3, 700*time.Millisecond)},
		{core.SlidingWindow(9, 7*142857142).WithBuckets(7), core.SlidingWindow(20, 7*142857142).WithBuckets(7), core.SlidingWindow(6, 3*time.Second).WithBuckets(3)},
	} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("%v/seed=%d", plans[0].Algorithm, seed), func(t *testing.T) {
				clock := coretest.NewClock(coretest.Epoch.Add(time.Duration(i) * 12345678901))
				lim := newLimiter(t, rdb, plans[0], withClock(clock.Now))
				ref, err := core.New(plans[0], core.WithClock(clock.Now))
				require.NoError(t, err)
				t.Cleanup(func() { _ = ref.Close() })
				rng := rand.New(rand.NewPCG(uint64(i), seed))
				keys := []string{"a", "b{x}", ""}
				ctx := context.Background()
				for step := range 600 {
					span := int64(plans[0].Window) / 3
					clock.Advance(time.Duration(rng.Int64N(span + 1)))
					k := keys[rng.IntN(len(keys))]
					p := plans[rng.IntN(len(plans))]
					what := fmt.Sprintf("step %d: key %q under %v at +%v", step, k, p, clock.Now().Sub(coretest.Epoch))
					switch r := rng.IntN(20); {
					case r == 0:
						used := rng.Int64N(p.Capacity() + 1)
						require.NoError(t, lim.Set(ctx, p, k, used), what)
						require.NoError(t, ref.Set(ctx, p, k, used), what)
					case r < 3:
						got, err := lim.Get(ctx, p, k)
						require.NoError(t, err, what)
						want, err := ref.Get(ctx, p, k)
						require.NoError(t, err, what)
						require.Equal(t, want, got, "Get: "+what)
					default:
						n := 1 + rng.Int64N(min(p.Capacity(), 4))
						got, gotErr := lim.AllowPolicy(ctx, p, k, n)
						want, wantErr := ref.AllowPolicy(ctx, p, k, n)
						require.Equal(t, wantErr == nil, gotErr == nil, "%s: error %v, want %v", what, gotErr, wantErr)
						if got.Source == core.SourceDenyCache {
							got.Source = core.SourceStore
						}
						require.Equal(t, want, got, "AllowPolicy(%d): %s", n, what)
					}
				}
			})
		}
	}
}

// TestStackedLimitersStayApart: two limiters of one algorithm on one prefix
// and one client key (per hour and per day, as stacked middlewares are)
// keep their own counts: the keys name each limiter's policy. Were they to
// share a key, each call would convert the other's state, and neither
// count would hold.
func TestStackedLimitersStayApart(t *testing.T) {
	ctx := context.Background()
	rdb := newClient(t, redistest.Addr(t))
	for _, p := range []core.Policy{
		core.TokenBucket(10, time.Hour), core.LeakyBucket(10, time.Hour).AsMeter(),
		core.FixedWindow(10, time.Hour), core.SlidingWindow(10, time.Hour),
	} {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			prefix := testPrefix()
			perHour := newLimiter(t, rdb, p.WithName("per-hour"), WithPrefix(prefix))
			daily := p.WithName("per-day")
			daily.Limit, daily.Window = 1000, 24*time.Hour
			if daily.Burst != 0 {
				daily.Burst = 1000
			}
			perDay := newLimiter(t, rdb, daily, WithPrefix(prefix))
			hourly := 0
			for i := range 15 {
				d, err := perHour.Allow(ctx, "203.0.113.7")
				require.NoError(t, err)
				if d.Allowed {
					hourly++
				}
				d, err = perDay.Allow(ctx, "203.0.113.7")
				require.NoError(t, err)
				require.True(t, d.Allowed, "per-day request %d", i+1)
				assert.Equal(t, int64(1000-i-1), d.Remaining, "per-day request %d", i+1)
			}
			assert.Equal(t, 10, hourly)
			u, err := perHour.Get(ctx, perHour.Policy(), "203.0.113.7")
			require.NoError(t, err)
			assert.Equal(t, int64(10), u.Used)
		})
	}
}
