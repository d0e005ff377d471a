// Package cow is a map read without a lock and written by copying, for the
// few entries the request path reads on every call and adds rarely: the
// rules and header renderers of the policies a program gives per call.
package cow

import (
	"maps"
	"sync"
	"sync/atomic"
)

// Map holds at most Max entries; the zero value with Max set is ready.
// Entries are never removed: it suits keys a program has few of (its
// plans), and the bound keeps one that makes a key per client from growing
// it without end.
type Map[K comparable, V any] struct {
	Max int
	m   atomic.Pointer[map[K]V]
	mu  sync.Mutex
}

// Load returns k's value: one atomic load and a map lookup.
func (c *Map[K, V]) Load(k K) (V, bool) {
	if m := c.m.Load(); m != nil {
		v, ok := (*m)[k]
		return v, ok
	}
	var zero V
	return zero, false
}

// LoadOrStore returns k's value, storing v first when k is absent and the
// map holds fewer than Max entries. When the map is full, v is returned and
// not kept.
func (c *Map[K, V]) LoadOrStore(k K, v V) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[K]V
	if p := c.m.Load(); p != nil {
		old = *p
	}
	if have, ok := old[k]; ok {
		return have
	}
	if len(old) >= c.Max {
		return v
	}
	next := maps.Clone(old)
	if next == nil {
		next = make(map[K]V, 1)
	}
	next[k] = v
	c.m.Store(&next)
	return v
}

// Len returns the number of entries kept.
func (c *Map[K, V]) Len() int {
	if m := c.m.Load(); m != nil {
		return len(*m)
	}
	return 0
}
