package script_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/script"
)

// request is one call of a batch: cost n, or Peek for n == 0.
type request struct {
	key string
	n   int64
}

// decide decides reqs in one script call of form cross or keyed, at now,
// and returns their Decisions.
func decide(t *testing.T, rdb *redis.Client, s script.Script, p core.Policy, prefix string, now time.Time, cross bool, reqs []request) []core.Decision {
	t.Helper()
	calls := make([]*script.Call, len(reqs))
	for i, r := range reqs {
		calls[i] = &script.Call{Part: script.Part{Key: prefix + r.key}, N: r.n, Now: now.UnixNano()}
	}
	cmd := script.Command(context.Background(), &s, calls, cross, true)
	require.NoError(t, rdb.Process(context.Background(), cmd))
	require.NoError(t, script.Parse(cmd.Val(), calls))
	out := make([]core.Decision, len(reqs))
	for i, c := range calls {
		out[i] = c.Res
		out[i].Limit, out[i].Policy = p.Limit, p
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

// TestBatch: one script call decides its calls as separate calls at the
// same instant would, in order, in both forms.
func TestBatch(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	for _, cross := range []bool{false, true} {
		t.Run(fmt.Sprintf("cross=%v", cross), func(t *testing.T) { testBatch(t, rdb, cross) })
	}
}

func testBatch(t *testing.T, rdb *redis.Client, cross bool) {
	t.Run("one key several times is decided in order, exactly", func(t *testing.T) {
		for i, p := range []core.Policy{
			core.TokenBucket(5, time.Minute),
			core.LeakyBucket(5, time.Minute),
			core.FixedWindow(5, time.Minute),
			core.SlidingWindow(5, time.Minute),
		} {
			t.Run(p.String(), func(t *testing.T) {
				s := script.New(p, time.Hour)
				now := coretest.Epoch.Add(7 * time.Second)
				ref := core.MustNew(p, core.WithClock(func() time.Time { return now }))
				t.Cleanup(func() { _ = ref.Close() })
				reqs := []request{{"k", 1}, {"k", 2}, {"k", 0}, {"k", 1}, {"k", 3}, {"k", 1}, {"k", 0}, {"k", 1}}
				got := decide(t, rdb, s, p, fmt.Sprintf("batch-%v-%d-%d:", cross, i, time.Now().UnixNano()), now, cross, reqs)
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
				s := script.New(p, time.Hour)
				clock := coretest.NewClock(coretest.Epoch.Add(time.Duration(i) * 12345678901))
				ref := core.MustNew(p, core.WithClock(clock.Now))
				t.Cleanup(func() { _ = ref.Close() })
				prefix := fmt.Sprintf("mixed-%v-%d-%d:", cross, i, time.Now().UnixNano())
				rng := rand.New(rand.NewPCG(uint64(i), 9))
				keys := []string{"a", "b{x}", "", "c", "d", "e", "f", "g"}
				for round := range 30 {
					clock.Advance(time.Duration(rng.Int64N(int64(p.Recovery()) / 3)))
					reqs := make([]request, 1+rng.IntN(40))
					for j := range reqs {
						reqs[j] = request{keys[rng.IntN(len(keys))], rng.Int64N(p.Capacity() + 1)}
					}
					require.Equal(t, sequential(t, ref, reqs), decide(t, rdb, s, p, prefix, clock.Now(), cross, reqs), "round %d: %v", round, reqs)
				}
			})
		}
	})
}

// TestScriptsRunWithRedisCli: each file runs as it is with redis-cli
// --eval, on the example policy of its header: a fresh key is admitted,
// with or without the arguments E and now (E = 0, the server's TIME).
func TestScriptsRunWithRedisCli(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("no redis-cli")
	}
	host, port, _ := strings.Cut(redistest.Addr(t), ":")
	files, err := filepath.Glob("*.lua")
	require.NoError(t, err)
	require.Len(t, files, 3)
	for _, f := range files {
		for _, tail := range [][]string{nil, {"0", "", ""}} {
			key := fmt.Sprintf("cli-%s-%d", f, time.Now().UnixNano())
			args := append([]string{"-h", host, "-p", port, "--eval", f, key, ",", "1"}, tail...)
			out, err := exec.Command("redis-cli", args...).CombinedOutput()
			require.NoError(t, err, "%s %q: %s", f, tail, out)
			reply := strings.TrimSuffix(string(out), "\n") // raw: redis-cli writes to no terminal
			require.Len(t, reply, 40+16, "%s %q: one call's reply and the script's now: %q", f, tail, out)
			var one script.Call
			require.NoError(t, script.Parse(reply, []*script.Call{&one}))
			assert.True(t, one.Res.Allowed, "%s %q admits a fresh key", f, tail)
			assert.WithinDuration(t, time.Now(), one.Res.At, time.Minute, "%s %q: At is the server's TIME (on this host)", f, tail)
		}
	}
}
