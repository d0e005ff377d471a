package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
)

func TestDenyCache(t *testing.T) {
	addr := redistest.Addr(t)
	ctx := context.Background()
	p := core.TokenBucket(2, time.Minute) // a unit every 30s

	// setup returns a limiter with the deny cache, its round-trip
	// counter, and a limiter without it on the same keys and clock: the
	// reference for what Redis says.
	setup := func(t *testing.T, opts ...Option) (*Limiter, *recorder, *Limiter, *coretest.Clock) {
		clock := coretest.NewClock(coretest.Epoch)
		rec := &recorder{}
		c := newClient(t, addr)
		addHook(c, rec)
		prefix := WithPrefix(testPrefix())
		lim := newLimiter(t, c, p, append([]Option{prefix, withClock(clock.Now)}, opts...)...)
		ref := newLimiter(t, newClient(t, addr), p, prefix, withClock(clock.Now), WithDenyCacheSize(0))
		return lim, rec, ref, clock
	}

	t.Run("a denied key is answered locally until RetryAfter passes", func(t *testing.T) {
		lim, rec, ref, clock := setup(t)
		d, err := lim.AllowN(ctx, "k", 2)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		first, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		require.False(t, first.Allowed)
		require.Equal(t, 30*time.Second, first.RetryAfter)
		sent := rec.roundTrip.Load()

		for i := range 10 {
			clock.Advance(time.Second)
			d, err := lim.Allow(ctx, "k")
			require.NoError(t, err)
			want, err := ref.Peek(ctx, "k") // what Redis would say
			require.NoError(t, err)
			assert.Equal(t, core.SourceDenyCache, d.Source, "the cache answered")
			want.Source = core.SourceDenyCache
			assert.Equal(t, want, d, "after %ds", i+1)
			assert.Equal(t, first.RetryAfter-time.Duration(i+1)*time.Second, d.RetryAfter, "RetryAfter shrinks with the clock")
		}
		assert.Equal(t, sent, rec.roundTrip.Load(), "no round trip while the denial is cached")

		clock.Advance(20 * time.Second) // RetryAfter has passed
		d, err = lim.Allow(ctx, "k")
		require.NoError(t, err)
		assert.True(t, d.Allowed)
		assert.Equal(t, sent+1, rec.roundTrip.Load())
	})

	t.Run("a cached denial's At is Redis's, moved on by the local clock", func(t *testing.T) {
		local := coretest.NewClock(coretest.Epoch) // the scripts read the server's TIME
		lim := newLimiter(t, newClient(t, addr), p, withLocalClock(local.Now))
		_, err := lim.AllowN(ctx, "k", 2)
		require.NoError(t, err)
		first, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, core.SourceStore, first.Source)
		assert.WithinDuration(t, time.Now(), first.At, time.Minute, "the server's TIME (on this host)")
		local.Advance(5 * time.Second)
		d, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, core.SourceDenyCache, d.Source)
		assert.Equal(t, first.At.Add(5*time.Second), d.At)
	})

	t.Run("other costs still ask Redis", func(t *testing.T) {
		lim, rec, _, _ := setup(t)
		_, err := lim.AllowN(ctx, "k", 2)
		require.NoError(t, err)
		d, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		require.False(t, d.Allowed)
		sent := rec.roundTrip.Load()
		d, err = lim.AllowN(ctx, "k", 2)
		require.NoError(t, err)
		assert.False(t, d.Allowed)
		assert.Equal(t, time.Minute, d.RetryAfter, "the RetryAfter of cost 2, from Redis")
		_, err = lim.Peek(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, sent+2, rec.roundTrip.Load())
	})

	t.Run("denials of larger costs are not cached", func(t *testing.T) {
		lim, rec, _, _ := setup(t)
		_, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		for range 3 {
			d, err := lim.AllowN(ctx, "k", 2)
			require.NoError(t, err)
			require.False(t, d.Allowed)
		}
		assert.Equal(t, int64(4), rec.roundTrip.Load())
		assert.Zero(t, lim.deny.len())
	})

	t.Run("Reset forgets the local denial", func(t *testing.T) {
		lim, _, _, _ := setup(t)
		_, err := lim.AllowN(ctx, "k", 2)
		require.NoError(t, err)
		d, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		require.False(t, d.Allowed)
		require.NoError(t, lim.Reset(ctx, "k"))
		d, err = lim.Allow(ctx, "k")
		require.NoError(t, err)
		assert.True(t, d.Allowed)
	})

	t.Run("switched off, every call is a round trip", func(t *testing.T) {
		lim, rec, _, _ := setup(t, WithDenyCacheSize(0))
		for range 10 {
			_, err := lim.Allow(ctx, "k")
			require.NoError(t, err)
		}
		assert.Equal(t, int64(10), rec.roundTrip.Load())
		assert.Nil(t, lim.deny)
	})

	t.Run("it holds at most its size and never fails a call", func(t *testing.T) {
		lim, _, _, _ := setup(t, WithDenyCacheSize(denyShards*2))
		for i := range 1000 {
			k := fmt.Sprint("k", i)
			_, err := lim.AllowN(ctx, k, 2)
			require.NoError(t, err)
			d, err := lim.Allow(ctx, k)
			require.NoError(t, err)
			require.False(t, d.Allowed)
		}
		assert.LessOrEqual(t, lim.deny.len(), denyShards*2)
		assert.Positive(t, lim.deny.len())
	})
}

func TestDenyCacheEviction(t *testing.T) {
	c := newDenyCache(denyShards) // one entry per shard
	c.put("a", denyEntry{until: 100}, 0, 0)
	sh := c.shard("a")
	other := ""
	for i := 0; other == ""; i++ {
		if k := fmt.Sprint(i); c.shard(k) == sh {
			other = k
		}
	}
	t.Run("a full shard drops a new denial", func(t *testing.T) {
		c.put(other, denyEntry{until: 100}, 50, 0)
		_, _, ok := c.get(other, 0, 50)
		assert.False(t, ok)
		_, _, ok = c.get("a", 0, 50)
		assert.True(t, ok)
	})
	t.Run("a full shard makes room by dropping expired entries", func(t *testing.T) {
		c.put(other, denyEntry{until: 300}, 200, 0)
		_, _, ok := c.get(other, 0, 200)
		assert.True(t, ok)
		assert.Equal(t, 1, len(sh.m))
	})
	t.Run("an entry answers until its time", func(t *testing.T) {
		_, _, ok := c.get(other, 0, 299)
		assert.True(t, ok)
		_, _, ok = c.get(other, 0, 300)
		assert.False(t, ok)
	})
}

// len counts the cached denials.
func (c *denyCache) len() int {
	total := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		total += len(sh.m)
		sh.mu.RUnlock()
	}
	return total
}
