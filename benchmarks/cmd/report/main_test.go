package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sample = `goos: linux
BenchmarkOneKeySeq/lib=ours-token/case=allow-2   1000  30.0 ns/op  0 B/op  0 allocs/op
BenchmarkOneKeySeq/lib=ours-token/case=allow-2   1000  50.0 ns/op  0 B/op  0 allocs/op
BenchmarkOneKeySeq/lib=ours-token/case=allow-2   1000  40.0 ns/op  0 B/op  0 allocs/op
BenchmarkOneKeySeq/lib=sethvargo/case=allow-2    1000 100.0 ns/op  0 B/op  0 allocs/op
BenchmarkOneKeySeq/lib=xtime/case=allow-2        1000 120.0 ns/op  0 B/op  0 allocs/op
BenchmarkMemKeys/lib=ours-token/keys=1000000 1 70.0 B/key 0.0 B/key-after-ttl 100.0 %released 1000000 keys-stored
BenchmarkMemKeys/lib=sethvargo/keys=1000000 1 140.0 B/key 56.0 B/key-after-ttl 60.0 %released
BenchmarkMemKeys/lib=httprate/keys=1000000 1 38.0 B/key 38.0 B/key-after-ttl 0.0 %released
PASS
`

func TestReportReadsMediansAndJudgesTargets(t *testing.T) {
	res := make(results)
	res.read(strings.NewReader(sample))

	t.Run("takes the median of the samples of one benchmark", func(t *testing.T) {
		m, ok := res.median("OneKeySeq/lib=ours-token/case=allow", "ns/op")
		require.True(t, ok)
		assert.Equal(t, 40.0, m)
	})
	t.Run("reads the units of memkeys lines", func(t *testing.T) {
		m, ok := res.median("MemKeys/lib=sethvargo/keys=1000000", "%released")
		require.True(t, ok)
		assert.Equal(t, 60.0, m)
	})

	var out strings.Builder
	r := &report{results: res, w: &out}
	r.inMemory("1. One key, sequential, all allowed", "OneKeySeq", "/case=allow")
	r.memory()
	t.Run("compares ours with the fastest peer", func(t *testing.T) {
		assert.Contains(t, out.String(), "| ours-token | 40.0 | 0 | 0 | 0.40× |")
		assert.Contains(t, r.goals[0], "0.40× sethvargo")
		assert.Contains(t, r.goals[0], ": met")
	})
	t.Run("compares memory with the best peer storing whole keys, not httprate's hashes", func(t *testing.T) {
		assert.Contains(t, r.goals[1], "0.50× sethvargo")
		assert.Contains(t, r.goals[1], ": met")
	})
}
