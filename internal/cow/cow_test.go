package cow

import (
	"strconv"
	"sync"
	"testing"

	"github.com/go-ratelimit/ratelimit/internal/testkit/assert"
)

func TestMap(t *testing.T) {
	c := Map[string, int]{Max: 2}
	_, ok := c.Load("a")
	assert.False(t, ok)
	assert.Equal(t, 1, c.LoadOrStore("a", 1))
	assert.Equal(t, 1, c.LoadOrStore("a", 9), "the first value stays")
	assert.Equal(t, 2, c.LoadOrStore("b", 2))
	assert.Equal(t, 3, c.LoadOrStore("c", 3), "full: returned, not kept")
	_, ok = c.Load("c")
	assert.False(t, ok)
	v, ok := c.Load("b")
	assert.True(t, ok)
	assert.Equal(t, 2, v)
	assert.Equal(t, 2, c.Len())
}

// TestMapConcurrent: concurrent stores of one key agree on one value, and
// the bound holds.
func TestMapConcurrent(t *testing.T) {
	c := Map[string, *int]{Max: 50}
	var wg sync.WaitGroup
	got := make([][]*int, 8)
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				v := new(int)
				got[g] = append(got[g], c.LoadOrStore(strconv.Itoa(i), v))
				c.Load(strconv.Itoa(i))
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 50, c.Len())
	for i := range 50 {
		for g := range got {
			assert.Same(t, got[0][i], got[g][i], "key %d", i)
		}
	}
}
