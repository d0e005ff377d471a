package benchmarks

import (
	"testing"
	"time"
)

var clockSink int64

// BenchmarkClock is the floor under every in-memory limiter: each reads the
// clock at least once per decision, ours the monotonic clock alone
// (time.Since), most peers time.Now (wall and monotonic). On a virtual
// machine where reading the clock traps, this floor is most of a decision.
func BenchmarkClock(b *testing.B) {
	b.Run("read=monotonic", func(b *testing.B) {
		base := time.Now()
		for b.Loop() {
			clockSink += int64(time.Since(base))
		}
	})
	b.Run("read=now", func(b *testing.B) {
		for b.Loop() {
			clockSink += time.Now().UnixNano()
		}
	})
}
