package core

import (
	"context"
	"hash/maphash"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkDesign measures, side by side, the alternatives weighed in
// docs/design.md, "core: the seed's counter optimisations".
func BenchmarkDesign(b *testing.B) {
	const limit = 1 << 62
	// One word checked and incremented with CompareAndSwap: exact.
	b.Run("hotkey=cas", func(b *testing.B) {
		var word atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				for {
					v := word.Load()
					if v >= limit || word.CompareAndSwap(v, v+1) {
						break
					}
				}
			}
		})
	})
	// Eight padded cells: each caller sums them to check the limit, then
	// adds to its own cell. Cheaper under contention, but two callers can
	// both see room for the last unit: not exact.
	b.Run("hotkey=striped8", func(b *testing.B) {
		type cell struct {
			n atomic.Int64
			_ [56]byte
		}
		var cells [8]cell
		var next atomic.Uint32
		b.RunParallel(func(pb *testing.PB) {
			mine := &cells[next.Add(1)%8]
			for pb.Next() {
				var sum int64
				for i := range cells {
					sum += cells[i].n.Load()
				}
				if sum < limit {
					mine.n.Add(1)
				}
			}
		})
	})
	now := time.Now().UnixNano()
	var sink int64
	b.Run("window=div", func(b *testing.B) {
		w := int64(time.Second)
		for i := 0; b.Loop(); i++ {
			sink += floorDiv(now+int64(i), w)
		}
	})
	b.Run("window=shift", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			sink += (now + int64(i)) >> 30 // ~1.07 s windows
		}
	})
	_ = sink
}

// BenchmarkRegistry weighs the registry's lock-free table (reg=table, the
// MemoryLimiter itself) against the two plain structures it could be: a
// sync.Map of entries (reg=syncmap) and 64 shards of maps under a
// sync.RWMutex (reg=shards). The alternatives carry everything a decision
// for a present key pays for in the table: the clock read once, the key's
// rule compared, the token bucket's one-word state with its retired check,
// and the whole Decision; eviction, the key bound and policy changes run on
// the slow path only, which these scenarios never take. Each reports
// cpu-ns/op (the process's CPU time per decision, steadier than wall time
// on a shared machine) and bytes/key (heap per key after 200,000 keys).
// The hot key runs from GOMAXPROCS goroutines: use -cpu 1,2,4,8,16.
func BenchmarkRegistry(b *testing.B) {
	p := TokenBucket(1<<30, time.Hour)
	regs := []struct {
		name string
		new  func() protoLimiter
	}{
		{"table", func() protoLimiter {
			l := MustNew(p, WithMaxKeys(1_000_000))
			return protoLimiter{l.AllowN, func() { _ = l.Close() }}
		}},
		{"syncmap", func() protoLimiter { return protoLimiter{newSyncMapProto(p).allowN, func() {}} }},
		{"shards", func() protoLimiter { return protoLimiter{newShardsProto(p).allowN, func() {}} }},
	}
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(100_000+i)
	}
	for _, reg := range regs {
		l := reg.new()
		l.allow("192.0.2.1")
		for _, k := range keys {
			l.allow(k)
		}
		b.Run("reg="+reg.name+"/case=onekey-seq", func(b *testing.B) {
			CPUPerOp(b, func() {
				for b.Loop() {
					l.allow("192.0.2.1")
				}
			})
		})
		b.Run("reg="+reg.name+"/case=onekey-parallel", func(b *testing.B) {
			CPUPerOp(b, func() {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						l.allow("192.0.2.1")
					}
				})
			})
		})
		b.Run("reg="+reg.name+"/case=keys100k-parallel", func(b *testing.B) {
			CPUPerOp(b, func() {
				b.RunParallel(func(pb *testing.PB) {
					x := uint32(time.Now().UnixNano()) | 1
					for pb.Next() {
						x ^= x << 13
						x ^= x >> 17
						x ^= x << 5
						l.allow(keys[int(x)%len(keys)])
					}
				})
			})
		})
		l.close()
		b.Run("reg="+reg.name+"/case=memory", func(b *testing.B) {
			var perKey float64
			for b.Loop() {
				before := heapBytes()
				l := reg.new()
				for _, k := range keys {
					l.allow(string([]byte(k)))
				}
				perKey = float64(heapBytes()-before) / float64(len(keys))
				runtime.KeepAlive(l)
				l.close()
			}
			b.ReportMetric(perKey, "bytes/key")
		})
	}
}

// cpuPerOp runs f, the benchmark's loop, and reports the CPU time of the
// whole process per operation.
func CPUPerOp(b *testing.B, f func()) {
	cpu := func() int64 {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return ru.Utime.Nano() + ru.Stime.Nano()
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := cpu()
	f()
	b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op")
}

func heapBytes() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// protoLimiter is AllowN of a registry, and its Close.
type protoLimiter struct {
	allowN func(ctx context.Context, key string, n int64) (Decision, error)
	close  func()
}

func (p protoLimiter) allow(key string) {
	if d, _ := p.allowN(context.Background(), key, 1); !d.Allowed {
		panic("denied under allow-all")
	}
}

// protoEntry is a key's entry in the alternatives: its rule and its state.
type protoEntry struct {
	rule  *rule
	state gcraState
}

// protoClock is the MemoryLimiter's clock: the monotonic clock since base.
type protoClock struct {
	rule   rule
	base   time.Time
	baseNs int64
}

func newProtoClock(p Policy) protoClock {
	r, err := compile(p)
	if err != nil {
		panic(err)
	}
	base := time.Now()
	return protoClock{rule: r, base: base, baseNs: base.UnixNano()}
}

func (c *protoClock) now() int64 { return c.baseNs + int64(time.Since(c.base)) }

type syncMapProto struct {
	protoClock
	m sync.Map // string -> *protoEntry
}

func newSyncMapProto(p Policy) *syncMapProto { return &syncMapProto{protoClock: newProtoClock(p)} }

func (s *syncMapProto) allowN(_ context.Context, key string, n int64) (d Decision, _ error) {
	now := s.now()
	for {
		v, ok := s.m.Load(key)
		if !ok {
			// The slow path: a new key (the table's takes a shard mutex
			// here to enforce the key bound).
			v, _ = s.m.LoadOrStore(key, &protoEntry{rule: &s.rule})
		}
		e := v.(*protoEntry)
		if e.rule == &s.rule {
			if vd, _, ok := e.state.decide(e.rule, now, n, true); ok {
				s.rule.fill(&d, vd, nil, now)
				return d, nil
			}
		}
	}
}

type shardsProto struct {
	protoClock
	seed   maphash.Seed
	shards [64]struct {
		mu sync.RWMutex
		m  map[string]*protoEntry
		_  [32]byte
	}
}

func newShardsProto(p Policy) *shardsProto {
	s := &shardsProto{protoClock: newProtoClock(p), seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = make(map[string]*protoEntry)
	}
	return s
}

func (s *shardsProto) allowN(_ context.Context, key string, n int64) (d Decision, _ error) {
	now := s.now()
	sh := &s.shards[maphash.String(s.seed, key)>>58]
	for {
		sh.mu.RLock()
		e := sh.m[key]
		sh.mu.RUnlock()
		if e == nil {
			sh.mu.Lock()
			if e = sh.m[key]; e == nil {
				e = &protoEntry{rule: &s.rule}
				sh.m[key] = e
			}
			sh.mu.Unlock()
		}
		if e.rule == &s.rule {
			if vd, _, ok := e.state.decide(e.rule, now, n, true); ok {
				s.rule.fill(&d, vd, nil, now)
				return d, nil
			}
		}
	}
}
