package redisstore

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
)

// twin runs the same calls on a Redis limiter and on the in-memory one,
// on one test clock, and requires the same decisions, whole and part by
// part (Source aside).
type twin struct {
	t     *testing.T
	red   *Limiter
	mem   *core.MemoryLimiter
	clock *coretest.Clock
}

func newTwin(t *testing.T, rdb redis.UniversalClient, p core.Policy, opts ...Option) *twin {
	clock := coretest.NewClock(coretest.Epoch)
	mem, err := core.New(p, core.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close() })
	red := newLimiter(t, rdb, p, append([]Option{withClock(clock.Now)}, opts...)...)
	return &twin{t: t, red: red, mem: mem, clock: clock}
}

// allow is AllowPolicy(p, key, n) on both (Peek when n is 0).
func (w *twin) allow(p core.Policy, key string, n int64) core.Decision {
	w.t.Helper()
	got, want := w.decide(p, key, n)
	sameDecision(w.t, want, got)
	return got
}

// decide returns Redis's decision and the in-memory limiter's.
func (w *twin) decide(p core.Policy, key string, n int64) (got, want core.Decision) {
	w.t.Helper()
	ctx := context.Background()
	var errGot, errWant error
	if n == 0 {
		got, errGot = w.red.Peek(ctx, key)
		want, errWant = w.mem.Peek(ctx, key)
	} else {
		got, errGot = w.red.AllowPolicy(ctx, p, key, n)
		want, errWant = w.mem.AllowPolicy(ctx, p, key, n)
	}
	require.NoError(w.t, errGot)
	require.NoError(w.t, errWant)
	return got, want
}

// settle settles d, Redis's admission, on both.
func (w *twin) settle(key string, d core.Decision, charged, cost int64) {
	w.t.Helper()
	require.NoError(w.t, w.red.Settle(context.Background(), key, d, charged, cost))
	require.NoError(w.t, w.mem.Settle(context.Background(), key, d, charged, cost))
}

// sameDecision requires got equal to want, whole and part by part, but
// for where each was made.
func sameDecision(t *testing.T, want, got core.Decision) {
	t.Helper()
	whole := func(d core.Decision) [8]any {
		return [8]any{d.Allowed, d.Limit, d.Remaining, d.ResetAfter, d.RetryAfter, d.Delay, d.Policy, d.At}
	}
	require.Equal(t, whole(want), whole(got), "at +%v", got.At.Sub(coretest.Epoch))
	wantParts, gotParts := want.Parts(), got.Parts()
	require.Len(t, gotParts, len(wantParts))
	for i := range gotParts {
		wantParts[i].Source, gotParts[i].Source = 0, 0
		require.Equal(t, wantParts[i], gotParts[i], "part %d at +%v", i, got.At.Sub(coretest.Epoch))
	}
}

// composites returns, for each algorithm the scripts implement, a policy
// of two parts: 3 per second ("sec") and 4 per hour ("hour").
func composites() []core.Policy {
	var ps []core.Policy
	for _, mk := range []func(int64, time.Duration) core.Policy{core.FixedWindow, core.SlidingWindow, core.TokenBucket} {
		ps = append(ps, core.AllOf(mk(3, time.Second).WithName("sec"), mk(4, time.Hour).WithName("hour")))
	}
	return ps
}

// TestCompositeDecidesAllOrNothingInOneCall: under a policy made with
// core.AllOf, each decision is one script call over all of the key's
// parts, whose keys share one hash tag; a denial by either part charges
// neither; and every decision is the in-memory limiter's.
func TestCompositeDecidesAllOrNothingInOneCall(t *testing.T) {
	for _, p := range composites() {
		t.Run(p.Algorithm.String(), func(t *testing.T) {
			rdb := newClient(t, redistest.Addr(t))
			rec := &recorder{}
			var keys [][]string
			rec.onCmd = func(cmd redis.Cmder) {
				if isScriptCall(cmd) {
					keys = append(keys, scriptKeys(cmd))
				}
			}
			addHook(rdb, rec)
			w := newTwin(t, rdb, p, WithDenyCacheSize(0))
			w.allow(p, "warm", 0) // loads the script (EVALSHA, NOSCRIPT, EVAL)
			rec.commands.Store(0)
			keys = nil
			for range 3 {
				require.True(t, w.allow(p, "k", 1).Allowed)
			}
			before := w.allow(p, "k", 0)
			d := w.allow(p, "k", 1)
			require.False(t, d.Allowed, "the second's part denies")
			assert.Equal(t, int64(1), d.Parts()[1].Remaining, "the hour's part admits and is not charged")
			assert.Equal(t, before.Parts(), w.allow(p, "k", 0).Parts(), "the denial charged no part")

			w.clock.Advance(time.Second)
			require.True(t, w.allow(p, "k", 1).Allowed)
			w.clock.Advance(time.Second)
			before = w.allow(p, "k", 0)
			d = w.allow(p, "k", 1)
			require.False(t, d.Allowed, "the hour's part denies")
			assert.Equal(t, int64(3), d.Parts()[0].Remaining, "the second's part admits and is not charged")
			assert.Equal(t, before.Parts(), w.allow(p, "k", 0).Parts(), "the denial charged no part")

			assert.Equal(t, int64(10), rec.commands.Load(), "one script call per decision")
			for _, ks := range keys {
				require.Len(t, ks, 2)
				assert.Equal(t, hashTag(ks[0]), hashTag(ks[1]), "one slot: %q", ks)
			}
		})
	}
}

// hashTag is what Redis hashes of key: its first {...}.
func hashTag(key string) string {
	_, rest, _ := strings.Cut(key, "{")
	tag, _, _ := strings.Cut(rest, "}")
	return tag
}

// TestCompositePlanMove: a key moved between policies made with AllOf
// keeps each part that stays, matched by name, and a new part starts
// empty, as in memory.
func TestCompositePlanMove(t *testing.T) {
	for _, free := range composites() {
		t.Run(free.Algorithm.String(), func(t *testing.T) {
			parts := free.Parts()
			mk := func(limit int64, window time.Duration, name string) core.Policy {
				q := parts[0]
				q.Limit, q.Window, q.Burst, q.Name = limit, window, limit, name
				if q.Algorithm != core.AlgTokenBucket {
					q.Burst = 0
				}
				return q
			}
			pro := core.AllOf(mk(6, time.Second, "sec"), mk(2, time.Minute, "minute"), mk(10, time.Hour, "hour"))
			w := newTwin(t, newClient(t, redistest.Addr(t)), free)
			for range 3 {
				require.True(t, w.allow(free, "k", 1).Allowed)
			}
			d := w.allow(pro, "k", 1)
			require.True(t, d.Allowed)
			assert.Equal(t, int64(6-4), d.Parts()[0].Remaining, "sec kept what it used")
			assert.Equal(t, int64(2-1), d.Parts()[1].Remaining, "minute is new: empty")
			assert.Equal(t, int64(10-4), d.Parts()[2].Remaining, "hour kept what it used")
			w.allow(pro, "k", 1)
			require.False(t, w.allow(pro, "k", 1).Allowed, "minute is spent")
			w.clock.Advance(time.Second)
			// Back on free, denied: hour kept its 5 used of 4. Each
			// part tells when the key, recovering under pro meanwhile,
			// passes (core's rule for a denial under another policy).
			d, want := w.decide(free, "k", 1)
			require.False(t, d.Allowed)
			for i := range want.Parts() {
				sameDecision(t, want.Parts()[i], d.Parts()[i])
			}
			assert.Equal(t, d.RetryAfter, d.Parts()[1].RetryAfter)
			assert.Equal(t, want.RetryAfter, d.RetryAfter)
			assert.Equal(t, want.ResetAfter, d.ResetAfter)
		})
	}
}

// TestSettleOnRedis: a refund gives back at most what is still taken and
// never past the window the cost was charged in; a debt is charged at
// once, never refused, and denies until paid off; each part of a policy
// made with AllOf settles. Every decision is the in-memory limiter's.
func TestSettleOnRedis(t *testing.T) {
	rdb := newClient(t, redistest.Addr(t))

	t.Run("token bucket refund, at most what is still taken", func(t *testing.T) {
		p := core.TokenBucket(10, 10*time.Second)
		w := newTwin(t, rdb, p)
		d := w.allow(p, "k", 6)
		w.settle("k", d, 6, 2)
		assert.Equal(t, int64(8), w.allow(p, "k", 0).Remaining)
		d = w.allow(p, "k", 3) // 5 left
		w.clock.Advance(4 * time.Second)
		w.settle("k", d, 3, 0) // 1 still taken: 1 back
		assert.Equal(t, int64(10), w.allow(p, "k", 0).Remaining)
		require.True(t, w.allow(p, "k", 10).Allowed)
		require.False(t, w.allow(p, "k", 1).Allowed, "no more than full")
	})

	t.Run("token bucket debt, never refused", func(t *testing.T) {
		p := core.TokenBucket(10, 10*time.Second)
		w := newTwin(t, rdb, p)
		d := w.allow(p, "k", 1)
		w.settle("k", d, 1, 15)
		peek := w.allow(p, "k", 0)
		require.False(t, peek.Allowed)
		assert.Equal(t, 6*time.Second, peek.RetryAfter, "15 taken of 10: a unit fits in 6 s")
		w.clock.Advance(6 * time.Second)
		require.True(t, w.allow(p, "k", 1).Allowed)
	})

	t.Run("delaying leaky bucket refund only while nothing is queued after it", func(t *testing.T) {
		p := core.LeakyBucket(1, time.Second).WithBurst(4)
		w := newTwin(t, rdb, p)
		w.allow(p, "k", 1)
		d := w.allow(p, "k", 1)
		require.Equal(t, time.Second, d.Delay)
		w.settle("k", d, 1, 0) // the last queued (canceled during its Delay): its turn back
		assert.Equal(t, int64(3), w.allow(p, "k", 0).Remaining)
		d = w.allow(p, "k", 1)
		w.allow(p, "k", 1) // queued after d: keeps its turn
		w.settle("k", d, 1, 0)
		assert.Equal(t, int64(1), w.allow(p, "k", 0).Remaining, "nothing back")
		w.clock.Advance(500 * time.Millisecond)
		w.settle("k", d, 1, 0)
		assert.Equal(t, int64(1), w.allow(p, "k", 0).Remaining, "nothing back, later either")

		both := core.AllOf(p.WithName("queue"), core.LeakyBucket(10, time.Minute).WithBurst(10).AsMeter().WithName("meter"))
		w = newTwin(t, rdb, both)
		d = w.allow(both, "k", 1)
		w.settle("k", d, 1, 0)
		parts := w.allow(both, "k", 0).Parts()
		assert.Equal(t, [2]int64{3, 10}, [2]int64{parts[0].Remaining, parts[1].Remaining}, "AllOf: nothing back to the delaying part, all to the meter")
	})

	t.Run("fixed window refund only in the window charged", func(t *testing.T) {
		p := core.FixedWindow(5, time.Minute)
		w := newTwin(t, rdb, p)
		old := w.allow(p, "k", 5)
		w.clock.Advance(time.Minute)
		d := w.allow(p, "k", 2)
		w.settle("k", old, 5, 0)
		assert.Equal(t, int64(3), w.allow(p, "k", 0).Remaining, "the old window's refund is gone")
		w.settle("k", d, 2, 1)
		assert.Equal(t, int64(4), w.allow(p, "k", 0).Remaining)
		w.settle("k", d, 1, 9)
		assert.False(t, w.allow(p, "k", 0).Allowed, "a debt past the limit")
	})

	t.Run("sliding window refund from the bucket charged, while it counts", func(t *testing.T) {
		p := core.SlidingWindow(10, time.Second) // buckets of 100 ms, a ring of 11
		w := newTwin(t, rdb, p)
		d := w.allow(p, "k", 4)
		w.clock.Advance(300 * time.Millisecond)
		w.allow(p, "k", 3)
		w.settle("k", d, 4, 1)
		assert.Equal(t, int64(6), w.allow(p, "k", 0).Remaining)
		w.clock.Advance(800 * time.Millisecond) // bucket 11: d's bucket no longer counts
		w.allow(p, "k", 2)
		w.settle("k", d, 1, 0)
		assert.Equal(t, int64(5), w.allow(p, "k", 0).Remaining, "nothing back from a bucket gone")
	})

	t.Run("a huge debt saturates on every algorithm", func(t *testing.T) {
		for _, p := range append(composites(), core.FixedWindow(10, time.Minute), core.SlidingWindow(10, time.Minute), core.TokenBucket(10, time.Minute)) {
			w := newTwin(t, rdb, p)
			d := w.allow(p, "k", 1)
			w.allow(p, "k", 1)
			w.settle("k", d, 1, math.MaxInt64)
			peek := w.allow(p, "k", 0)
			assert.False(t, peek.Allowed, "%v", p)
			assert.Equal(t, int64(0), peek.Remaining, "%v", p)
		}
	})

	t.Run("after a plan move, the parts the key still has", func(t *testing.T) {
		planA := core.AllOf(core.FixedWindow(10, time.Second).WithName("sec"), core.FixedWindow(100, 24*time.Hour).WithName("day"))
		planB := core.AllOf(core.FixedWindow(10, time.Second).WithName("sec"), core.FixedWindow(5, time.Minute).WithName("min"))
		for cost, want := range map[int64][2]int64{0: {9, 4}, 8: {1, 4}} { // a refund, a debt: B's parts' Remaining
			w := newTwin(t, rdb, planA, WithDenyCacheSize(0))
			first := w.allow(planA, "k", 4)
			w.allow(planB, "k", 1)
			w.settle("k", first, 4, cost)
			d := w.allow(planB, "k", 5)
			require.False(t, d.Allowed)
			assert.Equal(t, want, [2]int64{d.Parts()[0].Remaining, d.Parts()[1].Remaining}, "settled at %d: sec takes it, min (new) does not", cost)
		}
	})

	t.Run("each part of a policy made with AllOf", func(t *testing.T) {
		for _, p := range composites() {
			w := newTwin(t, rdb, p)
			d := w.allow(p, "k", 3)
			w.settle("k", d, 3, 1)
			peek := w.allow(p, "k", 0)
			assert.Equal(t, []int64{2, 3}, []int64{peek.Parts()[0].Remaining, peek.Parts()[1].Remaining}, "%v", p)
			w.settle("k", d, 1, 4)
			require.False(t, w.allow(p, "k", 0).Allowed, "%v: a debt on both parts", p)
		}
	})
}

// TestSettleErrors: Settle checks its arguments as every store does, and
// a settlement Redis fails is one call, its error returned, not retried.
func TestSettleErrors(t *testing.T) {
	ctx := context.Background()
	s := newBreakerSetup(t, core.FixedWindow(5, time.Hour))
	d, err := s.lim.Allow(ctx, "k")
	require.NoError(t, err)
	assert.ErrorIs(t, s.lim.Settle(ctx, "k", d, 0, 1), core.ErrInvalidCost)
	assert.ErrorIs(t, s.lim.Settle(ctx, "k", core.Decision{Policy: d.Policy}, 1, 0), core.ErrNotAdmitted)
	s.calls.fail.Store(true)
	sent := s.calls.n.Load()
	assert.ErrorIs(t, s.lim.Settle(ctx, "k", d, 1, 0), errInjected)
	assert.Equal(t, sent+1, s.calls.n.Load(), "one call, not retried")
}

// TestSettleInFallback: a decision of the local fallback settles in the
// fallback, without a call to Redis, even while the breaker is open.
func TestSettleInFallback(t *testing.T) {
	ctx := context.Background()
	s := newBreakerSetup(t, core.FixedWindow(5, time.Hour))
	s.open(t)
	var first core.Decision
	for i := range 5 {
		d, err := s.lim.Allow(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, core.SourceFallback, d.Source)
		if i == 0 {
			first = d
		}
	}
	sent := s.calls.n.Load()
	require.NoError(t, s.lim.Settle(ctx, "k", first, 1, 0))
	d, err := s.lim.Allow(ctx, "k")
	require.NoError(t, err)
	assert.True(t, d.Allowed, "the refund is the fallback's")
	assert.Equal(t, sent, s.calls.n.Load(), "nothing sent to Redis")
}

// TestSettleForgetsCachedDenial: after a refund, this process's next call
// for the key asks Redis instead of repeating the denial it cached.
func TestSettleForgetsCachedDenial(t *testing.T) {
	ctx := context.Background()
	clock := coretest.NewClock(coretest.Epoch)
	lim := newLimiter(t, newClient(t, redistest.Addr(t)), core.FixedWindow(2, time.Hour), withClock(clock.Now))
	first, err := lim.AllowN(ctx, "k", 2)
	require.NoError(t, err)
	d, err := lim.Allow(ctx, "k")
	require.NoError(t, err)
	require.False(t, d.Allowed)
	d, err = lim.Allow(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, core.SourceDenyCache, d.Source, "the denial is cached")
	require.NoError(t, lim.Settle(ctx, "k", first, 2, 1))
	d, err = lim.Allow(ctx, "k")
	require.NoError(t, err)
	assert.True(t, d.Allowed, "the refund admits: the cached denial is forgotten")
	assert.Equal(t, core.SourceStore, d.Source)
}

// TestCompositeDenyCache: a denial under a policy made with AllOf is
// answered from the deny cache only while every part would answer the
// same: here the hour's part denies for long, and the second's part,
// which admits, refills a unit 1/3 s later, so Redis is asked again then.
func TestCompositeDenyCache(t *testing.T) {
	p := composites()[2] // token bucket: 3 per second and 4 per hour
	w := newTwin(t, newClient(t, redistest.Addr(t)), p)
	w.allow(p, "k", 3)
	w.clock.Advance(time.Second)
	w.allow(p, "k", 1)
	d := w.allow(p, "k", 1)
	require.False(t, d.Allowed)
	require.Equal(t, core.SourceStore, d.Source)
	w.clock.Advance(300 * time.Millisecond)
	d = w.allow(p, "k", 1)
	assert.Equal(t, core.SourceDenyCache, d.Source, "the same answer, cached")
	w.clock.Advance(100 * time.Millisecond)
	d = w.allow(p, "k", 1)
	assert.Equal(t, core.SourceStore, d.Source, "the second's part has refilled: Redis is asked")
	assert.Equal(t, int64(3), d.Parts()[0].Remaining)
}
