package redisstore

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
)

// clusterInstance is an app instance of the cluster HA tests: a name and
// the options of its own cluster client.
type clusterInstance struct {
	name string
	opts func(addrs []string) *redis.ClusterOptions
}

var (
	clusterDefaults = clusterInstance{"cluster client, go-redis defaults", func(addrs []string) *redis.ClusterOptions {
		return &redis.ClusterOptions{Addrs: addrs}
	}}
	clusterCTE = clusterInstance{"cluster client, ContextTimeoutEnabled", func(addrs []string) *redis.ClusterOptions {
		return &redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true}
	}}
	// go-redis reloads a cluster client's slot map on MOVED and ASK, and
	// otherwise only every ClusterStateReloadInterval (60s by default
	// since v9.22): a master that died answers no MOVED, so its slots stay
	// mapped to it that long (redis/go-redis#3979).
	clusterReload1s = clusterInstance{"cluster client, ContextTimeoutEnabled, ClusterStateReloadInterval 1s", func(addrs []string) *redis.ClusterOptions {
		return &redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true, ClusterStateReloadInterval: time.Second}
	}}
)

// clusterInstances adds an app instance to load for each of insts, with a
// client of its own, all on one prefix.
func clusterInstances(t *testing.T, load *haLoad, addrs []string, insts ...clusterInstance) {
	prefix := WithPrefix(testPrefix())
	for _, in := range insts {
		rdb := redis.NewClusterClient(in.opts(addrs))
		t.Cleanup(func() { _ = rdb.Close() })
		load.lims = append(load.lims, newLimiter(t, rdb, haPolicy, prefix, WithTimeout(haTimeout), WithDenyCacheSize(0)))
		load.names = append(load.names, in.name)
	}
}

// checkSlotOf checks the test's own slot computation against the server's.
func checkSlotOf(t *testing.T, addr string) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for _, k := range []string{"w0-0", "w3-17", "w15-230", "shared-4"} {
		slot, err := c.ClusterKeySlot(context.Background(), "ratelimit:{"+k+"}:tb:10:24h0m0s:10").Result()
		require.NoError(t, err)
		require.Equal(t, int(slot), slotOf(k), "slot of %s", k)
	}
}

// TestClusterFailover kills (SIGKILL) one master of a three-master cluster
// with a replica per master under steady load from three app instances (see
// ha_test.go and the cluster clients above), and measures the
// over-admission per key, the time until decisions resume on the killed
// master's slots and on the others, and the longest call. It asserts that
// no call outlived the timeout by more than haMargin, that no key was
// admitted more than one extra quota, that keys on the other masters were
// never over-admitted, and that every instance's decisions resume on the
// killed master's slots: within 5s of the promotion with a 1s
// ClusterStateReloadInterval, within go-redis's default 60s otherwise. Run
// with -v for the figures; -short skips it.
func TestClusterFailover(t *testing.T) {
	redistest.RequireTimingTests(t)
	skipIfShort(t)
	const nodeTimeout = time.Second
	c := redistest.ClusterWithReplicas(t, nodeTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	checkSlotOf(t, c.Masters[0].Addr)
	owners, err := redistest.SlotOwners(ctx, c.Masters[0].Addr)
	require.NoError(t, err)
	victim := c.Masters[0].Addr
	const onVictim, onOthers = "on the killed master", "on the other masters"
	// The instance with go-redis's defaults resumes on the killed
	// master's slots only when its client reloads the slot map, up to 60s
	// after the kill.
	load := &haLoad{workers: 6, patience: 90 * time.Second, group: func(key string) string {
		if owners[slotOf(key)] == victim {
			return onVictim
		}
		return onOthers
	}}
	clusterInstances(t, load, c.Addrs(), clusterDefaults, clusterCTE, clusterReload1s)

	load.run()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			load.halt()
		}
	})
	load.waitWarm(t)
	killed := load.markEvent()
	c.Masters[0].Stop() // SIGKILL
	require.NoError(t, c.WaitPromoted(ctx, 0))
	promotedAfter := time.Since(killed)
	load.waitResumed(t, 50)
	time.Sleep(500 * time.Millisecond) // steady load after the promotion, for the figures
	load.halt()
	stopped = true

	r := load.sweep(t)
	t.Logf("cluster-node-timeout %v; the replica took over, the cluster state ok, %v after the kill",
		nodeTimeout, promotedAfter.Round(time.Millisecond))
	load.report(t, r)
	checkBounds(t, r)
	for key, extra := range r.over {
		assert.Equal(t, onVictim, load.groupOf(key), "key %s on a master that did not fail admitted %d extra", key, extra)
	}
	for _, name := range load.names {
		g := r.groups[name+", keys "+onVictim]
		require.NotNil(t, g, name)
		require.False(t, g.firstOK.IsZero(), "%s: no decision on the killed master's slots after the kill", name)
		if name == clusterReload1s.name {
			assert.Less(t, g.firstOK.Sub(killed), promotedAfter+5*time.Second, "%s: decisions resumed late", name)
		}
	}
}

// TestClusterResharding moves 2000 slots from one master to another with
// redis-cli --cluster reshard (MIGRATE key by key, ASK redirections while
// a slot moves, MOVED after) under steady load from two app instances (see
// ha_test.go). Callers see no errors but timeouts, no call outlives the
// timeout by more than haMargin, and keys stay exact: every key admits at
// most its quota, exactly its quota when none of its calls failed, whether
// its slot moved or not. Run with -v for the figures; -short skips it.
func TestClusterResharding(t *testing.T) {
	redistest.RequireTimingTests(t)
	skipIfShort(t)
	addrs := redistest.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	checkSlotOf(t, addrs[0])
	before, err := redistest.SlotOwners(ctx, addrs[0])
	require.NoError(t, err)
	from, to := addrs[0], addrs[1]
	const n = 2000
	// redis-cli moves the lowest slots of the source.
	var moving []int
	for s, owner := range before {
		if owner == from && len(moving) < n {
			moving = append(moving, s)
		}
	}
	movingSet := make([]bool, 16384)
	for _, s := range moving {
		movingSet[s] = true
	}
	const inMoving, outside = "in the moving slots", "outside the moving slots"
	load := &haLoad{workers: 8, group: func(key string) string {
		if movingSet[slotOf(key)] {
			return inMoving
		}
		return outside
	}}
	clusterInstances(t, load, addrs, clusterDefaults, clusterCTE)

	load.run()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			load.halt()
		}
	})
	load.waitWarm(t)
	started := load.markEvent()
	require.NoError(t, redistest.Reshard(ctx, from, to, n))
	took := time.Since(started)
	load.waitResumed(t, 50)
	time.Sleep(500 * time.Millisecond) // steady load after the move, for the figures
	load.halt()
	stopped = true

	after, err := redistest.SlotOwners(ctx, to)
	require.NoError(t, err)
	var moved []int
	for s := range after {
		if after[s] != before[s] {
			moved = append(moved, s)
		}
	}
	require.Equal(t, moving, moved, "the slots redis-cli moved")
	assert.True(t, slices.IndexFunc(moved, func(s int) bool { return after[s] != to }) < 0)

	r := load.sweep(t)
	t.Logf("redis-cli --cluster reshard moved %d slots in %v", n, took.Round(time.Millisecond))
	load.report(t, r)
	checkBounds(t, r)
	for kind := range r.errKinds {
		assert.Equal(t, "timeout", kind, "an error other than a timeout while slots moved")
	}
	var exact, inMovingKeys int
	for key, total := range r.total {
		assert.LessOrEqual(t, total, int64(haQuota), "key %s (%s)", key, load.groupOf(key))
		if r.errors[key] == 0 {
			assert.Equal(t, int64(haQuota), total, "key %s (%s) had no failed call", key, load.groupOf(key))
		}
		if total == haQuota {
			exact++
		}
		if load.groupOf(key) == inMoving {
			inMovingKeys++
		}
	}
	t.Logf("%d of %d keys admitted exactly their quota; %d keys in the moving slots", exact, len(r.total), inMovingKeys)
	require.NotZero(t, inMovingKeys, "no key in the moving slots: the test shows nothing")
}
