package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
)

// TestMemoryPerKey measures what one key costs in Redis (MEMORY USAGE:
// the value, the key name and the overhead, with a 14-byte user key and
// the default prefix) and holds it to the figures in docs/design.md ("Redis store: memory per key").
func TestMemoryPerKey(t *testing.T) {
	rdb := newClient(t, redistest.Addr(t))
	ctx := context.Background()
	for _, tc := range []struct {
		p   core.Policy
		max int64
	}{
		{core.FixedWindow(100, time.Minute), 136},
		{core.SlidingWindow(100, time.Minute), 168},
		{core.SlidingWindow(100, time.Minute).WithBuckets(60), 408},
		{core.TokenBucket(100, time.Minute), 136},
		{core.LeakyBucket(100, time.Minute), 136},
	} {
		t.Run(tc.p.String(), func(t *testing.T) {
			lim, err := New(rdb, tc.p, WithTimeout(testTimeout)) // the default prefix: the key as users get it
			require.NoError(t, err)
			t.Cleanup(func() { _ = lim.Close() })
			user := "203.0.113.7" // an IPv4 key from package keyfunc (the address)
			t.Cleanup(func() { _ = lim.Reset(ctx, user) })
			_, err = lim.Allow(ctx, user)
			require.NoError(t, err)
			bytes, err := rdb.MemoryUsage(ctx, lim.keys.key(user)).Result()
			require.NoError(t, err)
			t.Logf("%-40s %3d bytes  key %s", tc.p, bytes, lim.keys.key(user))
			assert.LessOrEqual(t, bytes, tc.max)
		})
	}
}
