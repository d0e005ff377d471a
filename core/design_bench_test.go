package core

import (
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkDesign measures the alternatives weighed in the "Design notes"
// of doc.go, side by side.
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
