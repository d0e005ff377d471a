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

const redisSample = `BenchmarkRedis/client=default/lib=evalsha/callers=1-2     1000  40000 ns/op  25000 decisions/s  18000 srv-cpu-ns/op  1800 srv-script-ns/op  280 B/op  9 allocs/op
BenchmarkRedis/client=default/lib=evalsha/callers=2-2     1000  20000 ns/op  50000 decisions/s  13000 srv-cpu-ns/op  1600 srv-script-ns/op  280 B/op  9 allocs/op
BenchmarkRedis/client=default/lib=evalsha/callers=64-2    1000  16000 ns/op  60000 decisions/s  11000 srv-cpu-ns/op  1300 srv-script-ns/op  280 B/op  9 allocs/op
BenchmarkRedis/client=default/lib=ours/callers=1-2        1000  80000 ns/op  12500 decisions/s  36000 srv-cpu-ns/op 15000 srv-script-ns/op  900 B/op 20 allocs/op
BenchmarkRedis/client=default/lib=ours/callers=2-2        1000  40000 ns/op  25000 decisions/s  30000 srv-cpu-ns/op 15000 srv-script-ns/op  900 B/op 20 allocs/op
BenchmarkRedis/client=default/lib=ours/callers=64-2       1000   8000 ns/op 120000 decisions/s   7000 srv-cpu-ns/op  6000 srv-script-ns/op  300 B/op  6 allocs/op
BenchmarkRedis/client=default/lib=ulule/callers=1-2       1000  50000 ns/op  20000 decisions/s  26000 srv-cpu-ns/op  7700 srv-script-ns/op  480 B/op 17 allocs/op
BenchmarkRedis/client=default/lib=ulule/callers=2-2       1000  25000 ns/op  40000 decisions/s  20000 srv-cpu-ns/op  7200 srv-script-ns/op  480 B/op 17 allocs/op
BenchmarkRedis/client=default/lib=ulule/callers=64-2      1000  18000 ns/op  55000 decisions/s  15000 srv-cpu-ns/op  5700 srv-script-ns/op  480 B/op 17 allocs/op
BenchmarkRedis/client=ctxtimeout/lib=ours/callers=1-2     1000  79000 ns/op  12600 decisions/s  36000 srv-cpu-ns/op 15000 srv-script-ns/op  900 B/op 20 allocs/op
`

func TestReportRedis(t *testing.T) {
	res := make(results)
	res.read(strings.NewReader(redisSample))
	var out strings.Builder
	r := &report{results: res, w: &out}
	r.redis()
	t.Run("prints one table per client setting, the default one first", func(t *testing.T) {
		def := strings.Index(out.String(), "client=default")
		ctx := strings.Index(out.String(), "client=ctxtimeout")
		require.True(t, def >= 0 && ctx > def, out.String())
	})
	t.Run("compares ours with the bare EVALSHA and the best peer", func(t *testing.T) {
		assert.Contains(t, out.String(), "| ours | 80.0 | 2.00× | 25000 | 0.62× | 120000 | 2.00× | 20 | 36.0 / 30.0 / 7.0 | 15.0 / 15.0 / 6.0 |")
	})
	t.Run("judges the targets on the default client", func(t *testing.T) {
		require.Len(t, r.goals, 4)
		assert.Contains(t, r.goals[0], "2.00× bare EVALSHA")
		assert.Contains(t, r.goals[0], "MISSED")
		assert.Contains(t, r.goals[1], "0.62× best peer ulule")
		assert.Contains(t, r.goals[2], "2.00× bare EVALSHA (60000); target ≥ 1.50×: met")
		assert.Contains(t, r.goals[3], "7.0 µs")
	})
}

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
