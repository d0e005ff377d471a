package benchmarks

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
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

// newRedisLib builds lib on a fresh client of its own, made by client, on
// an empty database.
func newRedisLib(tb testing.TB, client RedisClient, lib RedisLib, l Limit) Limiter {
	tb.Helper()
	rdb := client.New(redisAddr(tb))
	tb.Cleanup(func() { rdb.Close() })
	require.NoError(tb, rdb.FlushDB(context.Background()).Err())
	lim, err := lib.New(rdb, l)
	require.NoError(tb, err, lib.Name)
	tb.Cleanup(lim.Close)
	return lim
}

func TestRedisLibsAdmitAndDenyAsConfigured(t *testing.T) {
	for _, client := range RedisClients() {
		for _, lib := range RedisLibs() {
			t.Run(client.Name+"/"+lib.Name+" admits every request under allow-all", func(t *testing.T) {
				lim := newRedisLib(t, client, lib, AllowAll)
				assert.Equal(t, 200, countAllowed(t, lim, "192.0.2.1", 200))
			})
			if !lib.Denies {
				continue
			}
			t.Run(client.Name+"/"+lib.Name+" admits the first request of a key under deny-most and denies the next twenty", func(t *testing.T) {
				lim := newRedisLib(t, client, lib, DenyMost)
				assert.Equal(t, 1, countAllowed(t, lim, "192.0.2.1", 21))
				assert.Equal(t, 1, countAllowed(t, lim, "192.0.2.2", 21), "a second key has its own quota")
			})
		}
	}
}

// redisKeys is how many client keys scenario 6 picks from.
const redisKeys = 100_000

// Scenario 6: one local redis-server, allow-all, keys picked at random from
// 100,000 clients, by 1 caller (sequential latency: ns/op), 2 and 64
// concurrent callers (throughput: decisions/s), with each client setting
// (the default one first). Each also reports the server's CPU time per
// decision (INFO cpu, main thread: srv-cpu-ns/op) and its time in scripts
// per decision (INFO commandstats, EVAL and EVALSHA: srv-script-ns/op).
func BenchmarkRedis(b *testing.B) {
	keys := ClientKeys(redisKeys)
	for _, client := range RedisClients() {
		for _, lib := range RedisLibs() {
			for _, callers := range []int{1, 2, 64} {
				b.Run(fmt.Sprintf("client=%s/lib=%s/callers=%d", client.Name, lib.Name, callers), func(b *testing.B) {
					lim := newRedisLib(b, client, lib, AllowAll)
					stats := redis.NewClient(&redis.Options{Addr: redisAddr(b)})
					defer stats.Close()
					runCallers(b, callers, lim, keys, stats)
				})
			}
		}
	}
}

// serverStats is what Redis reports about the time it spent.
type serverStats struct {
	cpu    time.Duration // main thread, user and system
	script time.Duration // in EVAL and EVALSHA, the commands they run included
}

func readServerStats(b *testing.B, rdb *redis.Client) serverStats {
	info, err := rdb.Info(context.Background(), "cpu", "commandstats").Result()
	require.NoError(b, err)
	var s serverStats
	for _, line := range strings.Split(info, "\r\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch name {
		case "used_cpu_sys_main_thread", "used_cpu_user_main_thread":
			secs, err := strconv.ParseFloat(value, 64)
			require.NoError(b, err, line)
			s.cpu += time.Duration(secs * 1e9)
		case "cmdstat_eval", "cmdstat_evalsha":
			for _, field := range strings.Split(value, ",") {
				if usec, ok := strings.CutPrefix(field, "usec="); ok {
					n, err := strconv.ParseInt(usec, 10, 64)
					require.NoError(b, err, line)
					s.script += time.Duration(n) * time.Microsecond
				}
			}
		}
	}
	return s
}

// runCallers shares b.N allow-all requests among exactly n goroutines (not
// GOMAXPROCS multiples, as RunParallel would) and reports decisions/s and
// the server's time per decision, read from stats.
func runCallers(b *testing.B, n int, lim Limiter, keys []string, stats *redis.Client) {
	var next, wrong atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	before := readServerStats(b, stats)
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
	after := readServerStats(b, stats)
	if w := wrong.Load(); w > 0 {
		err := error(nil)
		if p := firstErr.Load(); p != nil {
			err = *p
		}
		b.Fatalf("%d of %d requests were refused or failed under allow-all (first error: %v)", w, b.N, err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(after.cpu-before.cpu)/float64(b.N), "srv-cpu-ns/op")
	b.ReportMetric(float64(after.script-before.script)/float64(b.N), "srv-script-ns/op")
}
