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

// request is one call of a batch: cost n, or Peek for n == 0.
type request struct {
	key string
	n   int64
}

// sendBatch decides reqs in one round trip of lim's batcher, as it does
// with calls that queued up together, and returns their Decisions.
func sendBatch(t *testing.T, lim *Limiter, reqs []request) []core.Decision {
	t.Helper()
	calls := make([]*call, len(reqs))
	for i, r := range reqs {
		c := getCall()
		c.Key, c.N = lim.keys.key(r.key), r.n
		c.Now = lim.clock().UnixNano()
		calls[i] = c
	}
	lim.b.exec(context.Background(), calls)
	out := make([]core.Decision, len(reqs))
	for i, c := range calls {
		require.NoError(t, c.err, "call %d", i)
		out[i] = c.Res
		out[i].Limit, out[i].Policy = lim.policy.Limit, lim.policy
	}
	return out
}

// sequential decides reqs one after the other with the in-memory limiter:
// what the batch must answer.
func sequential(t *testing.T, ref core.Limiter, reqs []request) []core.Decision {
	t.Helper()
	out := make([]core.Decision, len(reqs))
	for i, r := range reqs {
		var err error
		if r.n == 0 {
			out[i], err = ref.Peek(context.Background(), r.key)
		} else {
			out[i], err = ref.AllowN(context.Background(), r.key, r.n)
		}
		require.NoError(t, err)
	}
	return out
}

func TestBatch(t *testing.T) {
	t.Parallel()
	rdb := newClient(t, redistest.Addr(t))
	rec := &recorder{}
	addHook(rdb, rec)
	testBatch(t, rdb, rec)
}

func TestBatchCluster(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.Cluster(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	rec := &recorder{}
	addHook(rdb, rec)
	testBatch(t, rdb, rec)

	t.Run("keys of many slots on one node share a script call", func(t *testing.T) {
		assert.Positive(t, rec.cross.Load(), "cross-slot script calls")
	})

	t.Run("a batch refused by a node is decided key by key", func(t *testing.T) {
		p := core.FixedWindow(3, time.Minute)
		clock := coretest.NewClock(coretest.Epoch)
		lim := newLimiter(t, rdb, p, withClock(clock.Now))
		ref := core.MustNew(p, core.WithClock(clock.Now))
		t.Cleanup(func() { _ = ref.Close() })
		// Keys of several nodes in one cross-slot call, which goes to the
		// first key's node: that node refuses the keys it does not serve.
		var reqs []request
		for i := range 12 {
			reqs = append(reqs, request{fmt.Sprintf("user%d", i%6), int64(i % 3)})
		}
		calls := make([]*call, len(reqs))
		for i, r := range reqs {
			c := getCall()
			c.Key, c.N = lim.keys.key(r.key), r.n
			c.Now = clock.Now().UnixNano()
			c.state.Store(callSent)
			calls[i] = c
		}
		nodes := map[string]bool{}
		for _, c := range calls {
			node, err := rdb.MasterForKey(context.Background(), c.Key)
			require.NoError(t, err)
			nodes[node.Options().Addr] = true
		}
		require.Greater(t, len(nodes), 1, "the keys span several nodes")
		refused := rec.refused.Load()
		lim.b.run(context.Background(), []*group{{calls: calls, cross: true}})
		assert.Greater(t, rec.refused.Load(), refused, "the node refused the batch")
		want := sequential(t, ref, reqs)
		for i, c := range calls {
			require.NoError(t, c.err, "call %d", i)
			c.Res.Limit, c.Res.Policy = p.Limit, p
			assert.Equal(t, want[i], c.Res, "call %d: %+v", i, reqs[i])
		}
	})
}

// testBatch checks batches against sequential calls of the in-memory
// limiter at the same instants.
func testBatch(t *testing.T, rdb redis.UniversalClient, rec *recorder) {
	t.Run("one key several times is decided in order, exactly", func(t *testing.T) {
		for _, p := range []core.Policy{
			core.TokenBucket(5, time.Minute),
			core.LeakyBucket(5, time.Minute),
			core.FixedWindow(5, time.Minute),
			core.SlidingWindow(5, time.Minute),
		} {
			t.Run(p.String(), func(t *testing.T) {
				clock := coretest.NewClock(coretest.Epoch.Add(7 * time.Second))
				lim := newLimiter(t, rdb, p, withClock(clock.Now))
				ref := core.MustNew(p, core.WithClock(clock.Now))
				t.Cleanup(func() { _ = ref.Close() })
				reqs := []request{{"k", 1}, {"k", 2}, {"k", 0}, {"k", 1}, {"k", 3}, {"k", 1}, {"k", 0}, {"k", 1}}
				got := sendBatch(t, lim, reqs)
				assert.Equal(t, sequential(t, ref, reqs), got)
				var allowed []bool
				for i, d := range got {
					if reqs[i].n > 0 {
						allowed = append(allowed, d.Allowed)
					}
				}
				assert.Equal(t, []bool{true, true, true, false, true, false}, allowed, "1+2+1 fit in 5, then 3 does not, then 1 does, then none")
			})
		}
	})

	t.Run("mixed keys, costs and Peeks match sequential calls", func(t *testing.T) {
		policies := append(coretest.Policies(),
			core.SlidingWindow(9, 7*142857142).WithBuckets(7),
			core.TokenBucket(7, time.Minute).WithBurst(4),
			core.FixedWindow(5, 1500*time.Microsecond+7),
		)
		for i, p := range policies {
			t.Run(p.String(), func(t *testing.T) {
				clock := coretest.NewClock(coretest.Epoch.Add(time.Duration(i) * 12345678901))
				lim := newLimiter(t, rdb, p, withClock(clock.Now))
				ref := core.MustNew(p, core.WithClock(clock.Now))
				t.Cleanup(func() { _ = ref.Close() })
				rng := rand.New(rand.NewPCG(uint64(i), 9))
				keys := []string{"a", "b{x}", "", "c", "d", "e", "f", "g"}
				for round := range 30 {
					clock.Advance(time.Duration(rng.Int64N(int64(p.Recovery()) / 3)))
					reqs := make([]request, 1+rng.IntN(40))
					for j := range reqs {
						reqs[j] = request{keys[rng.IntN(len(keys))], rng.Int64N(p.Capacity() + 1)}
					}
					require.Equal(t, sequential(t, ref, reqs), sendBatch(t, lim, reqs), "round %d: %v", round, reqs)
				}
			})
		}
	})

	t.Run("concurrent calls share script calls and stay exact", func(t *testing.T) {
		p := core.FixedWindow(100, time.Hour)
		clock := coretest.NewClock(coretest.Epoch)
		lim := newLimiter(t, rdb, p, withClock(clock.Now), WithDenyCacheSize(0))
		const callers, each = 64, 20
		sent := rec.commands.Load()
		var admitted atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range callers {
			wg.Go(func() {
				<-start
				for i := range each {
					d, err := lim.Allow(context.Background(), fmt.Sprintf("key%d", (g+i)%8))
					if !assert.NoError(t, err) {
						return
					}
					if d.Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		assert.Equal(t, int64(8*100), admitted.Load(), "8 keys, 100 each, of 1280 calls")
		assert.Less(t, rec.commands.Load()-sent, int64(callers*each), "script calls for %d decisions", callers*each)
	})
}

// TestBatchRefusal: which errors make a cross-slot call fall back to
// calls key by key (the script has changed nothing), and which do not
// (the script may have run).
func TestBatchRefusal(t *testing.T) {
	for _, tc := range []struct {
		err    error
		refuse bool
	}{
		{proto("ERR Error running script (call to f_x): @user_script:5: Script attempted to access a non local key in a cluster node"), true},
		{proto("MOVED 3999 127.0.0.1:6381"), true},
		{proto("ASK 3999 127.0.0.1:6381"), true},
		{proto("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{proto("CROSSSLOT Keys in request don't hash to the same slot"), true},
		{proto("ERR Error compiling script (new function): user_script:1: unexpected symbol near '#'"), true},
		{proto("ERR some other error"), false},
		{context.DeadlineExceeded, false},
		{fmt.Errorf("read tcp: i/o timeout"), false},
	} {
		assert.Equal(t, tc.refuse, isClusterRefusal(tc.err), "%v", tc.err)
	}
}

// proto returns an error reply of the server, as go-redis returns it (a
// redis.Error).
func proto(msg string) error { return redisError(msg) }

type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}
