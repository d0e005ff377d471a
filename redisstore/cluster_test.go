package redisstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
)

// TestCluster runs the conformance suite on a real three-master Redis
// Cluster through a cluster client, and shows that the keys it used spread
// over all three masters and that user keys with braces cannot choose
// their slot.
func TestCluster(t *testing.T) {
	addrs := redistest.Cluster(t)
	var mu sync.Mutex
	used := map[string]bool{} // Redis keys the scripts ran on
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	addHook(rdb, &recorder{onCmd: func(cmd redis.Cmder) {
		if isScriptCall(cmd) {
			mu.Lock()
			for _, k := range scriptKeys(cmd) {
				used[k] = true
			}
			mu.Unlock()
		}
	}})
	ctx := context.Background()

	t.Run("conformance", func(t *testing.T) { conformance(t, rdb) })

	t.Run("the keys used landed on every master", func(t *testing.T) {
		masters := map[string]int{}
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, used)
		for key := range used {
			node, err := rdb.MasterForKey(ctx, key)
			require.NoError(t, err)
			masters[node.Options().Addr]++
		}
		assert.ElementsMatch(t, addrs, keysOf(masters), "keys per master: %v", masters)
	})

	t.Run("user keys with braces cannot choose the slot", func(t *testing.T) {
		lim := newLimiter(t, rdb, core.FixedWindow(2, time.Minute))
		slots := map[int64]bool{}
		for i := range 20 {
			// Were the user's braces a hash tag, all of these would
			// share the slot of "victim".
			user := fmt.Sprintf("{victim}%d", i)
			for j := range 3 {
				d, err := lim.Allow(ctx, user)
				require.NoError(t, err)
				assert.Equal(t, j < 2, d.Allowed, "%s request %d", user, j+1)
			}
			slot, err := rdb.ClusterKeySlot(ctx, lim.keys.key(user)).Result()
			require.NoError(t, err)
			slots[slot] = true
		}
		assert.Greater(t, len(slots), 10, "20 keys tagged {victim} spread over %d slots", len(slots))
		for _, hostile := range []string{"{}", "}{", "{{}}", "}", "{", "a{b}c", ""} {
			d, err := lim.Allow(ctx, hostile)
			require.NoError(t, err, "key %q", hostile)
			assert.True(t, d.Allowed, "key %q", hostile)
			assert.Equal(t, int64(1), d.Remaining, "key %q has its own state", hostile)
		}
	})
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
