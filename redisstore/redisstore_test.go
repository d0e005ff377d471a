package redisstore

import (
	"context"
	"net"
	"strconv"
	"strings"
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

func TestNewRejectsBadInput(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: New does not contact Redis
	t.Cleanup(func() { _ = rdb.Close() })
	p := core.TokenBucket(10, time.Second)
	cases := []struct {
		name string
		rdb  redis.UniversalClient
		p    core.Policy
		opts []Option
		want string
	}{
		{"a nil client", nil, p, nil, "redisstore: New needs a Redis client"},
		{"a typed nil client", (*redis.Client)(nil), p, nil, "redisstore: New needs a Redis client, got a nil *redis.Client"},
		{"a nil option", rdb, p, []Option{WithTimeout(time.Second), nil}, "redisstore: New: option 2 is nil"},
		{"an invalid policy", rdb, core.TokenBucket(0, time.Second), nil, "redisstore: core: TokenBucket limit must be > 0"},
		{"a recovery time beyond 2^52 ns", rdb, core.TokenBucket(1, 60*24*time.Hour).WithBurst(1), nil, "window must be <= 1250h59m59.627370496s (MaxSpan)"},
		{"issue 17's daily plan", rdb, core.TokenBucket(1, 24*time.Hour).WithBurst(25_000), nil, "burst 25000 at 1 per 24h0m0s takes longer than 1250h59m59.627370496s (MaxSpan) to refill"},
		{"too many buckets", rdb, core.SlidingWindow(10, time.Minute).WithBuckets(core.MaxBuckets + 1), nil, "redisstore: core: SlidingWindow buckets must be <= 4096"},
		{"a sliding window not divisible into its buckets", rdb, core.SlidingWindow(9, time.Second).WithBuckets(7), nil, "redisstore: core: SlidingWindow window 1s must be a whole number of nanoseconds per bucket"},
		// Its interval, 1e9/6e8 ns, would truncate to 1ns: about 1e9 per second.
		{"a token-bucket rate its nanosecond interval misstates by more than 0.1%", rdb, core.TokenBucket(600_000_000, time.Second), nil, "redisstore: core: TokenBucket rate 600000000 per 1s cannot be kept within 0.1%"},
		{"a leaky-bucket rate its nanosecond interval misstates by more than 0.1%", rdb, core.LeakyBucket(600_000_000, time.Second), nil, "redisstore: core: LeakyBucket rate 600000000 per 1s cannot be kept within 0.1%"},
		{"an empty prefix", rdb, p, []Option{WithPrefix("")}, "WithPrefix needs a non-empty prefix"},
		{"a prefix with a brace", rdb, p, []Option{WithPrefix("a{b")}, "may not contain '{' or '}'"},
		{"a zero timeout", rdb, p, []Option{WithTimeout(0)}, "WithTimeout must be > 0"},
		{"a negative deny cache size", rdb, p, []Option{WithDenyCacheSize(-1)}, "redisstore: WithDenyCacheSize must be >= 0 (0 switches the deny cache off), got -1"},
	}
	for _, tc := range cases {
		t.Run("rejects "+tc.name, func(t *testing.T) {
			l, err := New(tc.rdb, tc.p, tc.opts...)
			require.Error(t, err)
			assert.Nil(t, l)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestKeyLayout(t *testing.T) {
	l := newKeyLayout("app", core.SlidingWindow(100, time.Minute))
	cases := []struct{ user, redis string }{
		{"1.2.3.4", "app:{1.2.3.4}:sw:100:1m0s:10:v3"},
		{"", "app:{%}:sw:100:1m0s:10:v3"},
		{"{tag}", "app:{%7Btag%7D}:sw:100:1m0s:10:v3"},
		{"a}b{c", "app:{a%7Db%7Bc}:sw:100:1m0s:10:v3"},
		{"100%", "app:{100%25}:sw:100:1m0s:10:v3"},
		{"%7B", "app:{%257B}:sw:100:1m0s:10:v3"},
	}
	assert.Equal(t, "app:{k}:tb:5:1s:2:login:v3", newKeyLayout("app", core.TokenBucket(5, time.Second).WithBurst(2).WithName("login")).key("k"))
	for _, tc := range cases {
		assert.Equal(t, tc.redis, l.key(tc.user), "user key %q", tc.user)
	}
	t.Run("the hash tag is the whole user key, escaped", func(t *testing.T) {
		for _, tc := range cases {
			k := l.key(tc.user)
			open := strings.IndexByte(k, '{')
			closing := open + strings.IndexByte(k[open:], '}')
			assert.Equal(t, "app:", k[:open], "the first '{' is the library's")
			assert.Equal(t, ":sw:100:1m0s:10:v3", k[closing+1:], "the first '}' after it is the library's")
		}
	})
	t.Run("limiters of distinct policies never share a key", func(t *testing.T) {
		seen := map[string]core.Algorithm{}
		for _, p := range []core.Policy{
			core.FixedWindow(100, time.Minute), core.SlidingWindow(100, time.Minute),
			core.TokenBucket(100, time.Minute), core.LeakyBucket(100, time.Minute),
		} {
			k := newKeyLayout("app", p).key("k")
			_, dup := seen[k]
			assert.False(t, dup, "%v and %v share %s", p.Algorithm, seen[k], k)
			seen[k] = p.Algorithm
		}
		for _, pair := range [][2]core.Policy{
			{core.SlidingWindow(100, time.Minute), core.SlidingWindow(100, time.Minute).WithBuckets(6)},
			{core.TokenBucket(100, time.Minute), core.TokenBucket(100, time.Minute).WithBurst(5)},
			{core.FixedWindow(100, time.Second), core.FixedWindow(10, time.Minute)},
			{core.FixedWindow(5, time.Minute).WithName("login"), core.FixedWindow(5, time.Minute).WithName("signup")},
			{core.LeakyBucket(100, time.Minute), core.LeakyBucket(100, time.Minute).AsMeter()},
		} {
			assert.NotEqual(t, newKeyLayout("app", pair[0]).key("k"), newKeyLayout("app", pair[1]).key("k"))
		}
	})
}

func TestProductionKeys(t *testing.T) {
	rdb := newClient(t, redistest.Addr(t))
	ctx := context.Background()
	for _, p := range coretest.Policies() {
		t.Run(p.String(), func(t *testing.T) {
			lim := newLimiter(t, rdb, p)
			key := lim.keys.key("user")

			t.Run("Peek writes nothing", func(t *testing.T) {
				_, err := lim.Peek(ctx, "user")
				require.NoError(t, err)
				n, err := rdb.Exists(ctx, key).Result()
				require.NoError(t, err)
				assert.Zero(t, n)
			})
			t.Run("a write sets an expiry of the recovery time", func(t *testing.T) {
				d, err := lim.Allow(ctx, "user")
				require.NoError(t, err)
				require.True(t, d.Allowed)
				ttl, err := rdb.PTTL(ctx, key).Result()
				require.NoError(t, err)
				assert.Positive(t, ttl)
				assert.LessOrEqual(t, ttl, p.Recovery().Round(time.Millisecond))
			})
			t.Run("a denial does not write", func(t *testing.T) {
				for range p.Capacity() {
					_, err := lim.Allow(ctx, "user")
					require.NoError(t, err)
				}
				require.NoError(t, rdb.Persist(ctx, key).Err()) // a write would set the expiry again
				d, err := lim.AllowN(ctx, "user", 2)
				require.NoError(t, err)
				require.False(t, d.Allowed)
				ttl, err := rdb.PTTL(ctx, key).Result()
				require.NoError(t, err)
				assert.Equal(t, time.Duration(-1), ttl, "-1: no expiry, so the denial wrote nothing")
			})
			t.Run("Reset deletes the key", func(t *testing.T) {
				require.NoError(t, lim.Reset(ctx, "user"))
				n, err := rdb.Exists(ctx, key).Result()
				require.NoError(t, err)
				assert.Zero(t, n)
				d, err := lim.Allow(ctx, "user")
				require.NoError(t, err)
				assert.Equal(t, p.Capacity()-1, d.Remaining)
			})
		})
	}
}

// TestServerClock shows that decisions follow the Redis server's clock and
// that no app clock enters the production path: two limiters whose local
// clocks are two hours apart share one limit exactly, and a fixed window
// ends where the server's TIME says it does.
func TestServerClock(t *testing.T) {
	addr := redistest.Addr(t)
	ctx := context.Background()
	p := core.FixedWindow(10, time.Minute)
	prefix := WithPrefix(testPrefix())
	ahead := newLimiter(t, newClient(t, addr), p, prefix, withLocalClock(func() time.Time { return time.Now().Add(time.Hour) }))
	behind := newLimiter(t, newClient(t, addr), p, prefix, withLocalClock(func() time.Time { return time.Now().Add(-time.Hour) }))
	rdb := newClient(t, addr)

	t.Run("skewed app clocks share one limit", func(t *testing.T) {
		admitted := 0
		for i := range 30 {
			lim := ahead
			if i%2 == 1 {
				lim = behind
			}
			d, err := lim.Allow(ctx, "k")
			require.NoError(t, err)
			if d.Allowed {
				admitted++
			}
		}
		// The test may straddle a minute boundary of the server's clock:
		// then a second window admits up to 10 more.
		assert.Contains(t, []int{10, 20}, admitted)
	})
	t.Run("the window ends where the server's clock says", func(t *testing.T) {
		before, err := rdb.Time(ctx).Result()
		require.NoError(t, err)
		d, err := ahead.Allow(ctx, "other")
		require.NoError(t, err)
		after, err := rdb.Time(ctx).Result()
		require.NoError(t, err)
		end := before.Truncate(time.Minute).Add(time.Minute)
		if after.Truncate(time.Minute) != before.Truncate(time.Minute) {
			t.Skip("the calls straddled a window boundary; rerun")
		}
		assert.GreaterOrEqual(t, d.ResetAfter, end.Sub(after))
		assert.LessOrEqual(t, d.ResetAfter, end.Sub(before))
	})
	t.Run("a call carries no client time", func(t *testing.T) {
		var args []any
		hook := &recorder{onCmd: func(cmd redis.Cmder) {
			if cmd.Name() == "evalsha" {
				args = cmd.Args()
			}
		}}
		c := newClient(t, addr)
		addHook(c, hook)
		lim := newLimiter(t, c, p)
		_, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		// evalsha sha 1 key cost: neither E nor now, so the script reads TIME
		require.Len(t, args, 5, "%v", args)
	})
}

// TestServerClockSteppedBack runs the scripts' answer to a server clock
// that steps backwards (NTP, a failover to a server with a slower clock):
// it never adds capacity, like core's monotonic clock.
func TestServerClockSteppedBack(t *testing.T) {
	rdb := newClient(t, redistest.Addr(t))
	ctx := context.Background()
	for _, p := range []core.Policy{
		core.FixedWindow(3, time.Minute),
		core.SlidingWindow(3, time.Minute),
		core.TokenBucket(3, time.Minute),
		core.LeakyBucket(3, time.Minute).AsMeter(),
	} {
		t.Run(p.String(), func(t *testing.T) {
			clock := coretest.NewClock(coretest.Epoch.Add(59 * time.Second))
			lim := newLimiter(t, rdb, p, withClock(clock.Now), WithDenyCacheSize(0))
			d, err := lim.AllowN(ctx, "k", 3)
			require.NoError(t, err)
			require.True(t, d.Allowed)
			for _, back := range []time.Duration{time.Second, time.Minute, time.Hour} {
				clock.Advance(-back)
				d, err := lim.Allow(ctx, "k")
				require.NoError(t, err)
				assert.False(t, d.Allowed, "stepped back %v", back)
				assert.Positive(t, d.RetryAfter)
				clock.Advance(back)
			}
			clock.Advance(p.Recovery())
			d, err = lim.Allow(ctx, "k")
			require.NoError(t, err)
			assert.True(t, d.Allowed, "after the recovery time on the clock that came back")
		})
	}
}

func TestClose(t *testing.T) {
	rdb := newClient(t, redistest.Addr(t))
	lim, err := New(rdb, core.TokenBucket(1, time.Minute), WithPrefix(testPrefix()))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = lim.Allow(ctx, "k")
	require.NoError(t, err)
	require.NoError(t, lim.Close())
	require.NoError(t, lim.Close(), "Close is idempotent")
	_, err = lim.Allow(ctx, "k")
	assert.ErrorIs(t, err, core.ErrClosed)
	_, err = lim.Peek(ctx, "k")
	assert.ErrorIs(t, err, core.ErrClosed)
	assert.ErrorIs(t, lim.Reset(ctx, "k"), core.ErrClosed)
}

// TestNoScript flushes the server's script cache: the next calls, alone or
// pipelined together, reload the script and succeed.
func TestNoScript(t *testing.T) {
	rdb := newClient(t, redistest.Addr(t))
	lim := newLimiter(t, rdb, core.SlidingWindow(1000, time.Minute), WithTimeout(5*time.Second))
	ctx := context.Background()
	for _, callers := range []int{1, 50} {
		require.NoError(t, rdb.ScriptFlush(ctx).Err())
		var wg sync.WaitGroup
		var admitted atomic.Int64
		for i := range callers {
			wg.Go(func() {
				d, err := lim.Allow(ctx, strconv.Itoa(i))
				assert.NoError(t, err)
				if d.Allowed {
					admitted.Add(1)
				}
			})
		}
		wg.Wait()
		assert.Equal(t, int64(callers), admitted.Load())
	}
}

// recorder is a go-redis hook counting the script calls the client sends
// (not the connection handshake).
type recorder struct {
	commands  atomic.Int64 // script calls sent, pipelined or not
	roundTrip atomic.Int64 // single script calls and pipelines of them
	cross     atomic.Int64 // script calls in the cross-slot form
	onCmd     func(redis.Cmder)
}

// done counts what cmd was, once answered.
func (r *recorder) done(cmd redis.Cmder) {
	if !isScriptCall(cmd) {
		return
	}
	if cmd.Args()[2] == 0 {
		r.cross.Add(1)
	}
}

func isScriptCall(cmd redis.Cmder) bool { return cmd.Name() == "evalsha" || cmd.Name() == "eval" }

// scriptKeys returns the keys a script call decides: its KEYS, or the
// first half of its ARGV but for the clock in the cross-slot form.
func scriptKeys(cmd redis.Cmder) []string {
	args := cmd.Args()
	m := args[2].(int)
	if m == 0 {
		m = (len(args) - 5) / 2
	}
	var keys []string
	for _, k := range args[3 : 3+m] {
		keys = append(keys, k.(string))
	}
	return keys
}

func (r *recorder) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (r *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScriptCall(cmd) {
			r.commands.Add(1)
			r.roundTrip.Add(1)
		}
		if r.onCmd != nil {
			r.onCmd(cmd)
		}
		err := next(ctx, cmd)
		r.done(cmd)
		return err
	}
}

func (r *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if isScriptCall(cmd) {
				r.commands.Add(1)
			}
			if r.onCmd != nil {
				r.onCmd(cmd)
			}
		}
		if isScriptCall(cmds[0]) {
			r.roundTrip.Add(1)
		}
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			r.done(cmd)
		}
		return err
	}
}

// TestOwnClientLogsNothing: the limiter's own client is built from the
// user's options, which carry the user's client's push notification
// processor once that client exists; sharing it made go-redis log "failed to
// initialize maintnotifications" at the first call (review).
func TestOwnClientLogsNothing(t *testing.T) {
	rdb := newClient(t, redistest.Addr(t)) // as the README builds it, not used before
	before := pushLogLines.Load()
	l, err := New(rdb, core.TokenBucket(10, time.Second), WithPrefix(testPrefix()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	d, err := l.Allow(context.Background(), "k")
	require.NoError(t, err)
	require.True(t, d.Allowed)
	assert.Zero(t, pushLogLines.Load()-before, "go-redis log lines about maintnotifications")
}
