package core_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/internal/testkit/assert"
	"github.com/go-ratelimit/ratelimit/internal/testkit/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
)

var allAlgorithms = []core.Policy{
	core.FixedWindow(100, time.Hour), core.SlidingWindow(100, time.Hour),
	core.TokenBucket(100, time.Hour), core.LeakyBucket(100, time.Hour).AsMeter(),
}

// TestKeyMovedToAnotherPlanKeepsWhatItUsed: 80 of free's 100 used, then
// the key is decided under pro (10,000 per hour): 9,920 remain, per
// algorithm (the sliding window's geometry is the same, so nothing moves
// between buckets), and Get says 80 used before and 81 after.
func TestKeyMovedToAnotherPlanKeepsWhatItUsed(t *testing.T) {
	ctx := context.Background()
	for _, free := range allAlgorithms {
		t.Run(free.Algorithm.String(), func(t *testing.T) {
			free := free.WithName("free")
			pro := free.WithName("pro")
			pro.Limit = 10_000
			if pro.Burst != 0 {
				pro.Burst = 10_000
			}
			lim, _ := frozen(t, free)
			for range 80 {
				d, err := lim.AllowPolicy(ctx, free, "k", 1)
				require.NoError(t, err)
				require.True(t, d.Allowed)
			}
			u, err := lim.Get(ctx, pro, "k")
			require.NoError(t, err)
			assert.Equal(t, int64(80), u.Used)
			assert.Equal(t, int64(9_920), u.Remaining)
			assert.Equal(t, "pro", u.Policy.Name)

			d, err := lim.AllowPolicy(ctx, pro, "k", 1)
			require.NoError(t, err)
			assert.True(t, d.Allowed)
			assert.Equal(t, int64(9_919), d.Remaining)
			assert.Equal(t, int64(10_000), d.Limit)
			assert.Equal(t, "pro", d.Policy.Name)

			// Back under the limiter's own policy: 81 used of 100.
			d, err = lim.Allow(ctx, "k")
			require.NoError(t, err)
			assert.True(t, d.Allowed)
			assert.Equal(t, int64(18), d.Remaining)
		})
	}
}

// TestAlternatingPoliciesStayExact: goroutines on one key alternate two
// policies that differ only by name, so that nearly every call converts
// the key's state, on a frozen clock: exactly Limit pass, as with one
// policy. A conversion that lost or duplicated usage would show here.
func TestAlternatingPoliciesStayExact(t *testing.T) {
	ctx := context.Background()
	for _, p := range allAlgorithms {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			a, b := p.WithName("a"), p.WithName("b")
			lim, _ := frozen(t, p)
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 100 {
						q := a
						if (g+i)%2 == 1 {
							q = b
						}
						if d, err := lim.AllowPolicy(ctx, q, "k", 1); err == nil && d.Allowed {
							admitted.Add(1)
						}
						if i%10 == 0 {
							_, _ = lim.Allow(ctx, "k") // the own policy: a third one
						}
					}
				}()
			}
			wg.Wait()
			u, err := lim.Get(ctx, p, "k")
			require.NoError(t, err)
			assert.Equal(t, int64(100), u.Used)
			assert.LessOrEqual(t, admitted.Load(), int64(100))
			assert.Equal(t, int64(0), u.Remaining)
		})
	}
}

// TestPlanLimitChangedWhileTrafficRuns: a configuration reload raises a
// plan's limit from 10 to 20 per hour mid-window: a key that used 10 gets
// exactly 10 more, and lowering it back to 10 denies the next request.
func TestPlanLimitChangedWhileTrafficRuns(t *testing.T) {
	ctx := context.Background()
	for _, p := range allAlgorithms {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			small := p.WithName("plan")
			small.Limit, small.Burst = 10, min(small.Burst, 10)
			big := small
			big.Limit = 20
			if big.Burst != 0 {
				big.Burst = 20
			}
			if p.Algorithm == core.AlgSlidingWindow {
				small.Buckets, big.Buckets = 10, 10
			}
			lim, _ := frozen(t, p)
			count := func(q core.Policy, n int) int {
				ok := 0
				for range n {
					d, err := lim.AllowPolicy(ctx, q, "k", 1)
					require.NoError(t, err)
					if d.Allowed {
						ok++
					}
				}
				return ok
			}
			assert.Equal(t, 10, count(small, 15))
			assert.Equal(t, 10, count(big, 15))
			assert.Equal(t, 0, count(small, 1))
		})
	}
}

// TestSetThenAllow: Set grants and takes credits in units of cost; Get
// never changes the state.
func TestSetThenAllow(t *testing.T) {
	ctx := context.Background()
	for _, p := range allAlgorithms {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			lim, _ := frozen(t, p)
			require.NoError(t, lim.Set(ctx, p, "k", 97))
			for range 3 {
				u, err := lim.Get(ctx, p, "k")
				require.NoError(t, err)
				assert.Equal(t, int64(97), u.Used)
				assert.Equal(t, int64(3), u.Remaining)
			}
			ok := 0
			for range 5 {
				if d, _ := lim.Allow(ctx, "k"); d.Allowed {
					ok++
				}
			}
			assert.Equal(t, 3, ok)
			require.NoError(t, lim.Set(ctx, p, "k", 0))
			d, err := lim.Peek(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, int64(100), d.Remaining)
			require.NoError(t, lim.Set(ctx, p, "k", 100))
			d, _ = lim.Allow(ctx, "k")
			assert.False(t, d.Allowed)
		})
	}
}

func TestPolicyCallErrors(t *testing.T) {
	ctx := context.Background()
	lim, _ := frozen(t, core.TokenBucket(10, time.Second))
	_, err := lim.AllowPolicy(ctx, core.FixedWindow(10, time.Second), "k", 1)
	assert.True(t, errors.Is(err, core.ErrAlgorithmMismatch), "%v", err)
	_, err = lim.AllowPolicy(ctx, core.TokenBucket(0, time.Second), "k", 1)
	assert.Error(t, err)
	_, err = lim.AllowPolicy(ctx, core.TokenBucket(10, time.Second), "k", 0)
	assert.True(t, errors.Is(err, core.ErrInvalidCost), "%v", err)
	d, err := lim.AllowPolicy(ctx, core.TokenBucket(10, time.Second).WithName("x"), "k", 11)
	assert.True(t, errors.Is(err, core.ErrCostExceedsCapacity), "%v", err)
	assert.False(t, d.Allowed)
	assert.Equal(t, time.Duration(0), d.RetryAfter)
	assert.Equal(t, "x", d.Policy.Name)
	for _, used := range []int64{-1, 11} {
		err = lim.Set(ctx, core.TokenBucket(10, time.Second), "k", used)
		assert.True(t, errors.Is(err, core.ErrInvalidUsage), "used %d: %v", used, err)
	}
	_, err = lim.Get(ctx, core.SlidingWindow(10, time.Second), "k")
	assert.True(t, errors.Is(err, core.ErrAlgorithmMismatch), "%v", err)
	require.NoError(t, lim.Close())
	_, err = lim.AllowPolicy(ctx, core.TokenBucket(10, time.Second), "k", 1)
	assert.True(t, errors.Is(err, core.ErrClosed), "%v", err)
}

// TestManyDistinctPolicies: a program that builds a policy per client
// (beyond the limiter's cache of compiled policies) still gets exact
// decisions.
func TestManyDistinctPolicies(t *testing.T) {
	ctx := context.Background()
	lim, _ := frozen(t, core.FixedWindow(1, time.Minute))
	for i := range 3000 {
		p := core.FixedWindow(int64(1+i%7), time.Minute).WithName("c" + strconv.Itoa(i))
		key := strconv.Itoa(i)
		ok := 0
		for range 8 {
			if d, err := lim.AllowPolicy(ctx, p, key, 1); err == nil && d.Allowed {
				ok++
			}
		}
		require.Equal(t, 1+i%7, ok, "client %d", i)
	}
}

// TestPlansUnderMaxKeys: keys on three plans flood a small limiter; it
// stays bounded and a key at its plan's limit stays limited.
func TestPlansUnderMaxKeys(t *testing.T) {
	ctx := context.Background()
	for _, p := range allAlgorithms {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			lim, clock := frozen(t, p, core.WithMaxKeys(64))
			plans := []core.Policy{p.WithName("a"), p.WithName("b"), p.WithName("c")}
			plans[1].Limit, plans[1].Burst = 50, min(plans[1].Burst, 50)
			for range 50 {
				_, _ = lim.AllowPolicy(ctx, plans[1], "abuser", 1)
			}
			d, _ := lim.AllowPolicy(ctx, plans[1], "abuser", 1)
			require.False(t, d.Allowed)
			for i := range 5000 {
				_, _ = lim.AllowPolicy(ctx, plans[i%3], "flood-"+strconv.Itoa(i), 1)
				if i%100 == 0 {
					clock.Advance(time.Millisecond)
				}
			}
			assert.LessOrEqual(t, lim.Len(), 64)
			d, _ = lim.AllowPolicy(ctx, plans[1], "abuser", 1)
			assert.False(t, d.Allowed)
		})
	}
}

// TestMorePoliciesThanAShardKeeps: a one-key limiter holds a limited key;
// newcomers of 16 policies find no room and are counted in inherited
// states, one per policy (limited together, as one key); a
// newcomer of a 17th policy is denied, told to retry when the first of
// those states has recovered, and admitted then.
func TestMorePoliciesThanAShardKeeps(t *testing.T) {
	ctx := context.Background()
	own := core.FixedWindow(1, time.Minute)
	lim, clock := frozen(t, own, core.WithMaxKeys(1))
	d, err := lim.Allow(ctx, "holder")
	require.NoError(t, err)
	require.True(t, d.Allowed) // limited now: never evicted
	// One Window for all: a state converted to another Window would count
	// the Limit of the window before its own (see "Policies per call").
	plan := func(i int) core.Policy {
		return core.FixedWindow(int64(100+i), time.Second).WithName("p" + strconv.Itoa(i))
	}
	for i := range 16 {
		d, err := lim.AllowPolicy(ctx, plan(i), "k"+strconv.Itoa(i), 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed, "policy %d", i)
	}
	d, err = lim.AllowPolicy(ctx, plan(16), "k16", 1)
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.Equal(t, int64(0), d.Remaining)
	// The inherited states are idle one second after their window (1 s,
	// epoch-aligned) ends: their counts may still lie in another policy's
	// window until then.
	wait := 2*time.Second - time.Duration(coretest.Epoch.UnixNano()%int64(time.Second))
	assert.Equal(t, wait, d.RetryAfter)
	p, err := lim.Peek(ctx, "k16") // the limiter's own policy has none either
	require.NoError(t, err)
	assert.False(t, p.Allowed)
	assert.Equal(t, wait, p.RetryAfter)
	clock.Advance(d.RetryAfter)
	d, err = lim.AllowPolicy(ctx, plan(16), "k16", 1)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.Equal(t, 1, lim.Len())
}
