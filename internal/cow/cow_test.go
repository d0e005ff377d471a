package cow

import (
	"strconv"
	"sync"
	"testing"
)

func TestMap(t *testing.T) {
	c := Map[string, int]{Max: 2}
	if _, ok := c.Load("a"); ok {
		t.Errorf("Load(a) on an empty map: found")
	}
	for _, tc := range []struct {
		key        string
		value, got int
		why        string
	}{
		{"a", 1, 1, "stored"},
		{"a", 9, 1, "the first value stays"},
		{"b", 2, 2, "stored"},
		{"c", 3, 3, "full: returned, not kept"},
	} {
		if got := c.LoadOrStore(tc.key, tc.value); got != tc.got {
			t.Errorf("LoadOrStore(%s, %d) = %d, want %d (%s)", tc.key, tc.value, got, tc.got, tc.why)
		}
	}
	if _, ok := c.Load("c"); ok {
		t.Errorf("Load(c) after the map was full: found")
	}
	if v, ok := c.Load("b"); !ok || v != 2 {
		t.Errorf("Load(b) = %d, %v; want 2, true", v, ok)
	}
	if got := c.Len(); got != 2 {
		t.Errorf("Len() = %d, want 2", got)
	}
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
	if n := c.Len(); n != 50 {
		t.Errorf("Len() = %d, want 50", n)
	}
	for i := range 50 {
		for g := range got {
			if got[g][i] != got[0][i] {
				t.Errorf("key %d: goroutine %d got %p, goroutine 0 got %p", i, g, got[g][i], got[0][i])
			}
		}
	}
}
