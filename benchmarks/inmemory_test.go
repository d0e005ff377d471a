package benchmarks

import (
	"sync/atomic"
	"testing"
)

// The in-memory scenarios. Every benchmark checks each answer against what
// its configuration must give (a cheap branch, the same for every library)
// and fails if one is wrong, so a misconfigured wrapper cannot post a time.

const (
	oneKey   = "192.0.2.1"
	manyKeys = 100_000
)

// Scenario 1: one key, one goroutine; every request allowed (allow-all), and
// every request denied (deny-most, its one admitted request spent before the
// timer starts).
func BenchmarkOneKeySeq(b *testing.B) {
	for _, lib := range Libs() {
		b.Run("lib="+lib.Name+"/case=allow", func(b *testing.B) {
			benchOneKeySeq(b, newLib(b, lib, AllowAll), true)
		})
		if lib.Denies {
			b.Run("lib="+lib.Name+"/case=deny", func(b *testing.B) {
				lim := newLib(b, lib, DenyMost)
				if ok, err := lim.Allow(oneKey); !ok || err != nil {
					b.Fatalf("the first request was not admitted: %v, %v", ok, err)
				}
				benchOneKeySeq(b, lim, false)
			})
		}
	}
}

func benchOneKeySeq(b *testing.B, lim Limiter, want bool) {
	b.ReportAllocs()
	wrong := 0
	for b.Loop() {
		if ok, err := lim.Allow(oneKey); ok != want || err != nil {
			wrong++
		}
	}
	if wrong > 0 {
		b.Fatalf("%d of %d answers were not allowed=%v", wrong, b.N, want)
	}
}

// Scenario 2: one key shared by every goroutine (a hot global limit), all
// allowed.
func BenchmarkOneKeyParallel(b *testing.B) {
	for _, lib := range Libs() {
		b.Run("lib="+lib.Name, func(b *testing.B) {
			lim := newLib(b, lib, AllowAll)
			runParallel(b, lim, func(*Rand) string { return oneKey })
		})
	}
}

// Scenario 3: 100,000 keys, all present before the timer starts, each
// goroutine picking a pseudo-random one per request, all allowed.
func BenchmarkManyKeysParallel(b *testing.B) {
	keys := ClientKeys(manyKeys)
	for _, lib := range Libs() {
		b.Run("lib="+lib.Name+"/keys=100000", func(b *testing.B) {
			lim := newLib(b, lib, AllowAll)
			for _, k := range keys {
				if ok, err := lim.Allow(k); !ok || err != nil {
					b.Fatalf("warm-up for %s: %v, %v", k, ok, err)
				}
			}
			runParallel(b, lim, func(r *Rand) string { return keys[r.Intn(len(keys))] })
		})
	}
}

// runParallel runs allow-all requests from GOMAXPROCS goroutines, each with
// its own generator, and fails the benchmark if any request was refused.
func runParallel(b *testing.B, lim Limiter, key func(*Rand) string) {
	var seed, wrong atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := NewRand(seed.Add(1))
		var bad uint64
		for pb.Next() {
			if ok, err := lim.Allow(key(&r)); !ok || err != nil {
				bad++
			}
		}
		wrong.Add(bad)
	})
	if n := wrong.Load(); n > 0 {
		b.Fatalf("%d requests were refused under allow-all", n)
	}
}
