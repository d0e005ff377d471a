package redisstore

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// denyCache remembers, per user key, that a unit-cost request was denied
// and until when, so that further unit-cost requests for that key in this
// process are denied without a round trip to Redis.
//
// That is exact: other servers can only consume more, never give capacity
// back, so a request denied at t is still denied until t+RetryAfter. The
// entry's clock starts when the call was sent, before Redis decided, so the
// local expiry is never later than Redis's own.
//
// Only unit-cost denials are kept: for them Remaining is 0 until
// RetryAfter passes, under every algorithm, so the cached Decision is
// exactly what Redis would answer (absent other traffic). A larger cost
// can see Remaining grow before it fits, and a different cost has a
// different RetryAfter. Under a policy made with core.AllOf the entry
// keeps each part's decision and stands while all of them do: a denying
// part's until its RetryAfter, an admitting part's until its Remaining
// changes (steady).
//
// Reset must not be undone by a denial Redis produced before its DEL but
// answered after: each shard counts its forgets (gen), a caller reads the
// count before it sends its call (get) and hands it back to put, and put
// drops the denial when a forget came in between. Reset forgets the key
// once its DEL has been answered, so a denial produced before the DEL is
// either cached already (and forgotten) or dropped; a call sent after the
// forget is decided after the DEL, and its denial stands. A forget also
// drops the in-flight denials of the shard's other keys, which then cost
// one more round trip: Reset is an admin call, rare next to decisions.
//
// Each entry records the policy that denied (the limiter's own, or one
// given with AllowPolicy): a denial under one policy is never served for a
// call under another. A call that may consume under another policy (any
// cost: under a larger policy it may be admitted, and then it moves the key
// to its policy: see "Policies per call" in package core) forgets the
// entry as Reset does, before it is sent, so that the old policy's denials
// in flight are not cached either: the cached Decision stays exactly what
// Redis would answer, as with one policy.
//
// Memory is bounded: each shard holds at most perShard entries. A full
// shard first drops its expired entries; if none has expired, the new
// denial is simply not cached. The cache never blocks on Redis and never
// fails a call.
type denyCache struct {
	seed     maphash.Seed
	perShard int
	mixed    atomic.Bool // a denial under a policy given with a call was cached
	shards   [denyShards]denyShard
}

const denyShards = 64

type denyShard struct {
	mu  sync.RWMutex
	gen uint64 // forgets so far
	m   map[string]denyEntry
	_   [24]byte // keep neighbouring shards' locks off one cache line
}

// denyEntry is a cached unit-cost denial, in the limiter's local clock
// (nanoseconds).
type denyEntry struct {
	until   int64  // sent + RetryAfter: when a unit-cost request may pass
	resetAt int64  // sent + ResetAfter: when the key is full again
	at      int64  // the denial's At less sent: Redis's clock ahead of the local one
	pid     uint64 // the policy that denied: its pspec.id
	all     *allDenial
}

// allDenial is a denial under a policy made with core.AllOf: its parts'
// decisions, when the call was sent.
type allDenial struct {
	sent  int64
	parts []core.Decision
}

// steady is how long, absent traffic, d, a part's answer to a unit-cost
// request under q, keeps its Allowed and Remaining (its durations only
// shorten): a denial until its RetryAfter; a full part for ever; else
// until a unit comes back: a fixed window's at its end, a sliding
// window's at the next bucket's start (a ResetAfter ends on one), a
// bucket's when its TAT comes an interval closer.
func steady(q core.Policy, d core.Decision) time.Duration {
	switch {
	case !d.Allowed:
		return d.RetryAfter
	case d.ResetAfter == 0:
		return core.MaxSpan
	case q.Algorithm == core.AlgFixedWindow:
		return d.ResetAfter
	case q.Algorithm == core.AlgSlidingWindow:
		return (d.ResetAfter-1)%q.Interval() + 1
	}
	return d.ResetAfter - time.Duration(q.Burst-d.Remaining-1)*q.Interval()
}

func newDenyCache(maxEntries int) *denyCache {
	c := &denyCache{seed: maphash.MakeSeed(), perShard: max(1, maxEntries/denyShards)}
	for i := range c.shards {
		c.shards[i].m = make(map[string]denyEntry)
	}
	return c
}

func (c *denyCache) shard(key string) *denyShard {
	return &c.shards[maphash.String(c.seed, key)%denyShards]
}

// get returns the cached denial of key under policy pid if it is still in
// force at now, and the generation to pass to put for a denial of a call
// sent after get. A denial under another policy is forgotten.
func (c *denyCache) get(key string, pid uint64, now int64) (denyEntry, uint64, bool) {
	sh := c.shard(key)
	sh.mu.RLock()
	e, ok := sh.m[key]
	gen := sh.gen
	sh.mu.RUnlock()
	if ok && e.pid != pid {
		return e, c.forget(key), false
	}
	// until-now > 0 as well: a test clock stepped back by centuries is
	// more than 2^63 ns before until, and asks Redis.
	return e, gen, ok && now < e.until && e.until-now > 0
}

// put caches a denial of a call sent after the get that returned gen; it
// does nothing when key's shard forgot a key since that get, or when the
// shard is full of entries still in force.
func (c *denyCache) put(key string, e denyEntry, now int64, gen uint64) {
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.gen != gen {
		return
	}
	if _, ok := sh.m[key]; !ok && len(sh.m) >= c.perShard {
		for k, old := range sh.m {
			if now >= old.until {
				delete(sh.m, k)
			}
		}
		if len(sh.m) >= c.perShard {
			return
		}
	}
	if e.pid != 0 {
		c.mixed.Store(true)
	}
	// Clone: the key may point into a larger buffer (a header line) that
	// the cache must not keep alive.
	sh.m[strings.Clone(key)] = e
}

// other forgets key's denial if one is cached under another policy than
// pid, before a call under pid that may consume is sent. Without denials
// under policies given with calls, a call under the limiter's own policy
// has nothing to forget.
func (c *denyCache) other(key string, pid uint64) {
	if pid != 0 || c.mixed.Load() {
		c.get(key, pid, 0) // which forgets it
	}
}

// forget drops key's denial and turns away the denials of calls sent
// before it (see put). It returns the shard's new generation. A nil cache
// (switched off) has nothing to forget.
func (c *denyCache) forget(key string) uint64 {
	if c == nil {
		return 0
	}
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.gen++
	delete(sh.m, key)
	return sh.gen
}
