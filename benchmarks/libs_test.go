package benchmarks

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newLib builds lib at l and closes it when the test ends.
func newLib(tb testing.TB, lib Lib, l Limit) Limiter {
	tb.Helper()
	lim, err := lib.New(l, DefaultConfig)
	require.NoError(tb, err, lib.Name)
	tb.Cleanup(lim.Close)
	return lim
}

// countAllowed sends n requests for key and returns how many passed.
func countAllowed(t *testing.T, lim Limiter, key string, n int) int {
	t.Helper()
	allowed := 0
	for range n {
		ok, err := lim.Allow(key)
		require.NoError(t, err)
		if ok {
			allowed++
		}
	}
	return allowed
}

// The benchmarks are only fair if every wrapper really does what its
// configuration says: these tests check it for each library.
func TestLibsAdmitAndDenyAsConfigured(t *testing.T) {
	for _, lib := range Libs() {
		t.Run(lib.Name+" admits every request of one key under allow-all", func(t *testing.T) {
			lim := newLib(t, lib, AllowAll)
			assert.Equal(t, 20_000, countAllowed(t, lim, "192.0.2.1", 20_000))
		})
		t.Run(lib.Name+" admits a thousand keys under allow-all", func(t *testing.T) {
			lim := newLib(t, lib, AllowAll)
			allowed := 0
			for i := range 1000 {
				allowed += countAllowed(t, lim, ClientKey(i), 1)
			}
			assert.Equal(t, 1000, allowed)
		})
		if !lib.Denies {
			t.Run(lib.Name+" never refuses, even under deny-most (it is a pacer)", func(t *testing.T) {
				lim := newLib(t, lib, DenyMost)
				assert.Equal(t, 101, countAllowed(t, lim, "192.0.2.1", 101))
			})
			continue
		}
		t.Run(lib.Name+" admits the first request of a key under deny-most and denies the next hundred", func(t *testing.T) {
			lim := newLib(t, lib, DenyMost)
			assert.Equal(t, 1, countAllowed(t, lim, "192.0.2.1", 101))
			assert.Equal(t, 1, countAllowed(t, lim, "192.0.2.2", 101), "a second key has its own quota")
		})
	}
}

func TestClientKeysAreDistinct(t *testing.T) {
	seen := make(map[string]bool)
	for i := range 1 << 20 {
		k := ClientKey(i)
		require.False(t, seen[k], "key %d (%s) repeats", i, k)
		seen[k] = true
	}
	assert.Equal(t, "10.0.1.2", ClientKey(258))
}

func TestRandStaysInRangeAndSpreads(t *testing.T) {
	r := NewRand(0)
	hits := make([]int, 10)
	for range 100_000 {
		n := r.Intn(10)
		require.True(t, n >= 0 && n < 10, fmt.Sprint(n))
		hits[n]++
	}
	for i, h := range hits {
		assert.InDelta(t, 10_000, h, 1_000, "bucket %d", i)
	}
}
