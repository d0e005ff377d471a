package benchmarks

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Redis scenario talks to the server named by REDIS_ADDR (run.sh starts
// one); without it, to a throwaway redis-server this process starts on a free
// loopback port when the binary is on PATH; otherwise it is skipped.
var testRedis struct {
	once sync.Once
	addr string
	cmd  *exec.Cmd
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testRedis.cmd != nil {
		testRedis.cmd.Process.Kill()
		testRedis.cmd.Wait()
	}
	os.Exit(code)
}

func redisAddr(tb testing.TB) string {
	tb.Helper()
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		return addr
	}
	testRedis.once.Do(startRedis)
	if testRedis.err != nil {
		tb.Skipf("no Redis (%v): set REDIS_ADDR or install redis-server", testRedis.err)
	}
	return testRedis.addr
}

func startRedis() {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		testRedis.err = err
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		testRedis.err = err
		return
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(path, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		testRedis.err = err
		return
	}
	testRedis.cmd = cmd
	testRedis.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	rdb := redis.NewClient(&redis.Options{Addr: testRedis.addr})
	defer rdb.Close()
	for range 100 { // up to 5 s for the server to listen
		if rdb.Ping(context.Background()).Err() == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	testRedis.err = fmt.Errorf("redis-server on %s did not answer PING", testRedis.addr)
}

// newRedisLib builds lib on a fresh client of its own, on an empty database.
// Every client gets the same options: go-redis's defaults plus
// ContextTimeoutEnabled, which redisstore's docs ask for (its calls carry a
// deadline, and with it a lone call skips the batcher); the peers' calls
// carry no deadline, so it changes nothing for them.
func newRedisLib(tb testing.TB, lib RedisLib, l Limit) Limiter {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr(tb), ContextTimeoutEnabled: true})
	tb.Cleanup(func() { rdb.Close() })
	require.NoError(tb, rdb.FlushDB(context.Background()).Err())
	lim, err := lib.New(rdb, l)
	require.NoError(tb, err, lib.Name)
	tb.Cleanup(lim.Close)
	return lim
}

func TestRedisLibsAdmitAndDenyAsConfigured(t *testing.T) {
	for _, lib := range RedisLibs() {
		t.Run(lib.Name+" admits every request under allow-all", func(t *testing.T) {
			lim := newRedisLib(t, lib, AllowAll)
			assert.Equal(t, 200, countAllowed(t, lim, "192.0.2.1", 200))
		})
		if !lib.Denies {
			continue
		}
		t.Run(lib.Name+" admits the first request of a key under deny-most and denies the next twenty", func(t *testing.T) {
			lim := newRedisLib(t, lib, DenyMost)
			assert.Equal(t, 1, countAllowed(t, lim, "192.0.2.1", 21))
			assert.Equal(t, 1, countAllowed(t, lim, "192.0.2.2", 21), "a second key has its own quota")
		})
	}
}

// Scenario 6: one local redis-server, allow-all, keys picked at random from
// 1,000 clients, by 1 caller (sequential latency: ns/op), 2 and 64
// concurrent callers (throughput: decisions/s).
func BenchmarkRedis(b *testing.B) {
	keys := ClientKeys(1000)
	for _, lib := range RedisLibs() {
		for _, callers := range []int{1, 2, 64} {
			b.Run(fmt.Sprintf("lib=%s/callers=%d", lib.Name, callers), func(b *testing.B) {
				lim := newRedisLib(b, lib, AllowAll)
				runCallers(b, callers, lim, keys)
			})
		}
	}
}

// runCallers shares b.N allow-all requests among exactly n goroutines (not
// GOMAXPROCS multiples, as RunParallel would) and reports decisions/s.
func runCallers(b *testing.B, n int, lim Limiter, keys []string) {
	var next, wrong atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for g := range n {
		wg.Go(func() {
			r := NewRand(uint64(g))
			for next.Add(1) <= int64(b.N) {
				if ok, err := lim.Allow(keys[r.Intn(len(keys))]); !ok || err != nil {
					wrong.Add(1)
					if err != nil {
						firstErr.CompareAndSwap(nil, &err)
					}
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if w := wrong.Load(); w > 0 {
		err := error(nil)
		if p := firstErr.Load(); p != nil {
			err = *p
		}
		b.Fatalf("%d of %d requests were refused or failed under allow-all (first error: %v)", w, b.N, err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}
