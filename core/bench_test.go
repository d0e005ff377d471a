package core_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// benchPolicies allow every request, so the benchmarks measure the admit
// path (the common one) rather than a cheap early denial.
func benchPolicies() map[string]core.Policy {
	const limit = 1 << 30
	return map[string]core.Policy{
		"fixed":   core.FixedWindow(limit, time.Hour),
		"sliding": core.SlidingWindow(limit, time.Hour),
		"token":   core.TokenBucket(limit, time.Hour),
		"leaky":   core.LeakyBucket(limit, time.Hour).AsMeter(),
	}
}

var benchAlgs = []string{"fixed", "sliding", "token", "leaky"}

// BenchmarkAllow measures one decision for a key already present, with
// one key and with 100,000, sequentially and from all Ps; it reports
// cpu-ns/op too.
func BenchmarkAllow(b *testing.B) {
	ctx := context.Background()
	for _, alg := range benchAlgs {
		p := benchPolicies()[alg]
		for _, nkeys := range []int{1, 100_000} {
			keys := make([]string, nkeys)
			for i := range keys {
				keys[i] = "client-" + strconv.Itoa(i)
			}
			lim, err := core.New(p, core.WithMaxKeys(2*nkeys+1024))
			if err != nil {
				b.Fatal(err)
			}
			for _, k := range keys {
				_, _ = lim.Allow(ctx, k)
			}
			b.Run(fmt.Sprintf("alg=%s/keys=%d/seq", alg, nkeys), func(b *testing.B) {
				core.CPUPerOp(b, func() {
					i := 0
					for b.Loop() {
						_, _ = lim.Allow(ctx, keys[i])
						if i++; i == nkeys {
							i = 0
						}
					}
				})
			})
			b.Run(fmt.Sprintf("alg=%s/keys=%d/parallel", alg, nkeys), func(b *testing.B) {
				core.CPUPerOp(b, func() {
					b.RunParallel(func(pb *testing.PB) {
						// xorshift: a cheap per-goroutine pseudo-random key.
						x := uint32(time.Now().UnixNano()) | 1
						for pb.Next() {
							x ^= x << 13
							x ^= x >> 17
							x ^= x << 5
							_, _ = lim.Allow(ctx, keys[int(x)%nkeys])
						}
					})
				})
			})
			_ = lim.Close()
		}
	}
}

// BenchmarkMemoryPerKey reports the heap bytes one idle key costs, its key
// string included ("client-123456", 13 bytes), after 200,000 keys.
func BenchmarkMemoryPerKey(b *testing.B) {
	const nkeys = 200_000
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(100_000+i)
	}
	ctx := context.Background()
	for _, alg := range benchAlgs {
		b.Run("alg="+alg, func(b *testing.B) {
			var perKey float64
			for b.Loop() {
				before := heapAlloc()
				lim, err := core.New(benchPolicies()[alg], core.WithMaxKeys(2*nkeys))
				if err != nil {
					b.Fatal(err)
				}
				for _, k := range keys {
					// A fresh string, as a request would bring.
					_, _ = lim.Allow(ctx, string([]byte(k)))
				}
				perKey = float64(heapAlloc()-before) / nkeys
				runtime.KeepAlive(lim)
				_ = lim.Close()
			}
			b.ReportMetric(perKey, "bytes/key")
		})
	}
}

func heapAlloc() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkPolicyCall measures what a policy chosen per call costs over the
// limiter's own: keys on three plans of one algorithm, each key always
// decided under its plan (call=plans, AllowPolicy), against the same keys
// under the limiter's one policy (call=own, AllowN); one key (the decision
// alone, in cache) and 100,000. The plans are looked up by index, so only
// the limiter's cost is measured.
func BenchmarkPolicyCall(b *testing.B) {
	ctx := context.Background()
	for _, nkeys := range []int{1, 100_000} {
		keys := make([]string, nkeys)
		for i := range keys {
			keys[i] = "client-" + strconv.Itoa(i)
		}
		for _, alg := range benchAlgs {
			own := benchPolicies()[alg]
			plans := []core.Policy{own.WithName("free"), own.WithName("pro"), own.WithName("team")}
			for _, call := range []string{"own", "plans"} {
				lim, err := core.New(own, core.WithMaxKeys(2*nkeys+1024))
				if err != nil {
					b.Fatal(err)
				}
				allow := func(i int) {
					if call == "own" {
						_, _ = lim.AllowN(ctx, keys[i], 1)
					} else {
						_, _ = lim.AllowPolicy(ctx, plans[i%3], keys[i], 1)
					}
				}
				for i := range keys {
					allow(i)
				}
				b.Run(fmt.Sprintf("keys=%d/alg=%s/call=%s", nkeys, alg, call), func(b *testing.B) {
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						allow(i)
						if i++; i == nkeys {
							i = 0
						}
					}
				})
				_ = lim.Close()
			}
		}
	}
}

// BenchmarkFloodDenial measures the denial of a new key that finds its
// shard full of limited keys (a flood of new keys), whose RetryAfter
// waits for the key its retry would evict: 65,536 limited keys, a stopped
// clock, and a new key per request.
func BenchmarkFloodDenial(b *testing.B) {
	ctx := context.Background()
	for _, alg := range []string{"fixed", "token"} {
		b.Run("alg="+alg, func(b *testing.B) {
			p := core.FixedWindow(3, time.Hour)
			if alg == "token" {
				p = core.TokenBucket(3, time.Hour)
			}
			at := time.Unix(1_700_000_000, 0)
			lim, err := core.New(p, core.WithMaxKeys(1<<16), core.WithClock(func() time.Time { return at }), core.WithSweepInterval(time.Hour))
			if err != nil {
				b.Fatal(err)
			}
			defer lim.Close()
			for i := range 1 << 17 { // every shard full, then its inherited state spent
				_, _ = lim.AllowN(ctx, "held-"+strconv.Itoa(i), 3)
			}
			keys := make([]string, 4096)
			for i := range keys {
				keys[i] = "new-" + strconv.Itoa(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if d, _ := lim.AllowN(ctx, keys[i%len(keys)], 1); d.Allowed {
					b.Fatal("a new key admitted in a full shard of spent keys")
				}
			}
		})
	}
}
