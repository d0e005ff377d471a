package redisstore

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/script"
)

// BenchmarkRedis compares a decision with the ceiling: a bare EVALSHA of
// a script that returns 1, on the same client and server. Sequential
// (callers=1) and with 2 and 64 concurrent callers (SetParallelism(32) on 2
// cores), with up to flights round trips in flight (2 is the default).
// Every client has go-redis's default options. Every decision admits (the
// limits are huge) and writes its key, one of 1024.
//
//	go test -run '^$' -bench BenchmarkRedis -count 6 ./redisstore/ | tee new.txt
//	benchstat -col /flights new.txt
func BenchmarkRedis(b *testing.B) {
	addr := redistest.Addr(b)
	ctx := context.Background()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench-user-%d", i)
	}

	trivial := redis.NewScript("return 1")
	b.Run("op=evalsha-trivial", func(b *testing.B) {
		rdb := newClient(b, addr)
		if err := trivial.Load(ctx, rdb).Err(); err != nil {
			b.Fatal(err)
		}
		run(b, func(int) error { return rdb.EvalSha(ctx, trivial.Hash(), []string{"k"}).Err() })
	})

	// The script a lone decision sends, straight from the caller: the
	// floor for a lone decision, the script's own server time included.
	b.Run("op=evalsha-script/alg=TokenBucket", func(b *testing.B) {
		rdb := newClient(b, addr)
		p := core.TokenBucket(1e9, time.Second)
		s := script.New(p, 0)
		if err := rdb.ScriptLoad(ctx, s.Keyed.Src).Err(); err != nil {
			b.Fatal(err)
		}
		prefix := testPrefix()
		run(b, func(i int) error {
			return rdb.EvalSha(ctx, redis.NewScript(s.Keyed.Src).Hash(), []string{prefix + keys[i%len(keys)]}, 1, 0, "", "").Err()
		})
	})

	for _, p := range []core.Policy{
		core.FixedWindow(1<<28, time.Second),
		core.SlidingWindow(1<<31, time.Second),
		core.TokenBucket(1e9, time.Second),
		core.LeakyBucket(1e9, time.Second),
	} {
		for _, flights := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("op=allow/alg=%v/flights=%d", p.Algorithm, flights), func(b *testing.B) {
				lim := newLimiter(b, newClient(b, addr), p, withMaxFlights(flights), WithTimeout(time.Second))
				run(b, func(i int) error {
					d, err := lim.Allow(ctx, keys[i%len(keys)])
					if err == nil && !d.Allowed {
						err = fmt.Errorf("denied: %+v", d)
					}
					return err
				})
			})
		}
	}
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// run measures op sequentially and with 2 and 64 concurrent callers.
func run(b *testing.B, op func(i int) error) {
	b.Run("callers=1", func(b *testing.B) {
		b.ReportAllocs()
		start := cpuTime()
		i := 0
		for b.Loop() {
			if err := op(i); err != nil {
				b.Fatal(err)
			}
			i++
		}
		// This process's CPU time (not the server's), which other jobs
		// on a shared machine do not inflate as they do wall time.
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	})
	for _, callers := range []int{2, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0))) // exact on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if err := op(i); err != nil {
						b.Error(err)
						return
					}
					i += 7
				}
			})
		})
	}
}
