package core

import (
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The registry holds the keys of one limiter: a hash table split into
// shards, each an open-addressing table that readers search without any lock.
//
// Why not a map under a sync.RWMutex (the usual design, and this package's
// first), or a sync.Map: a read lock and its unlock are two atomic writes
// to a word that every reader of the shard shares, so on one hot key every
// decision writes that cache line besides the key's state; and a sync.Map
// is a trie, several dependent loads deep at 100,000 keys, with nearly
// twice the memory per key. Here a decision
// for a present key hashes once, reads the table with atomic loads only
// (a slot, the entry, the key's bytes), and the one write on the path is
// the key's own CompareAndSwap. BenchmarkRegistry measures the three side
// by side; benchmarks/README.md has the figures.
//
// Writers (a new key, eviction, Reset, the janitor) take the shard's mutex.
// Removing a key that readers may be holding is safe because the state is
// first retired: its word is set to a value no decision accepts, so a reader
// that found the entry before it was removed fails its CompareAndSwap, sees
// the entry is retired and takes the slow path, which finds the key gone and
// inserts a fresh one.

// keys is what a MemoryLimiter asks of its registry beyond decisions, for
// any algorithm.
type keys interface {
	reset(key string, now int64)
	set(r *rule, key string, now, used int64)
	settle(r *rule, key string, now int64, st settlement)
	get(r *rule, key string, now int64) (verdict, int64)
	len() int
	sweep(now int64)
}

// stateOf is what the registry needs of a per-key state type. Only decide
// meets a retired state: every other method is called holding the shard's
// mutex, on a state of an entry in the table (a state is retired and its
// entry removed in one critical section, and once only), an inherited
// state or a new one, none of them retired.
type stateOf[S any] interface {
	*S
	// init prepares a zero state for use (the sliding window's ring).
	init(r *rule)
	// decide applies a request atomically; ok is false if the state was
	// retired, and then nothing was consumed. parts are the verdicts of
	// the parts of a policy made with AllOf (allState), nil otherwise: not
	// a field of verdict, which stays four words that the compiler keeps
	// in registers on the hot path.
	decide(r *rule, now, n int64, consume bool) (v verdict, parts *verdict, ok bool)
	// untilIdle is the time from now until the state equals a new key's,
	// with no further traffic (<= 0: it does now, the key is idle).
	untilIdle(r *rule, now int64) int64
	// retire marks the state so that no later decide accepts it, if the
	// condition of mode holds; it reports whether it did. When into is not
	// nil, into absorbs what the retired state had used.
	retire(r *rule, now int64, mode retireMode, into *S) bool
	// absorb makes the state at least as used as src, at now and after:
	// whatever it then admits, src would have admitted too.
	absorb(r *rule, now int64, src *S)
	// convert makes the state, new and unreachable by readers, what src
	// (decided under from, not retired) becomes under to at now, as
	// "Policies per call" in doc.go says.
	convert(from, to *rule, now int64, src *S)
	// admitsAt returns the earliest instant, not before now, at which the
	// state (decided under from, not retired), left alone, converted to
	// `to` then admits a request of cost n (n = fullQuota: is back to its
	// full quota under to). Convert's count only falls as time passes.
	admitsAt(from, to *rule, now, n int64) int64
	// usage is Usage.Used at now; it may advance the state as a decision
	// would, consuming nothing.
	usage(r *rule, now int64) int64
	// set makes the state, new and unreachable by readers, one that has
	// used exactly used units at now.
	set(r *rule, now, used int64)
	// settle applies a settlement (Settler.Settle), under the shard's
	// mutex; decisions may run concurrently.
	settle(r *rule, now int64, st settlement)
}

// testBeforeRetire, when set (tests only), runs in a one-word state's
// retire between reading the word and swapping it, where a concurrent
// decision can make the swap fail.
var testBeforeRetire func()

// fullQuota is the cost admitsAt takes for "back to the full quota": each
// rule's capacity, that of each part of a policy made with AllOf.
const fullQuota = -1

type retireMode uint8

const (
	retireIdle      retireMode = iota // only a key equal to a new one (lossless)
	retireUnlimited                   // only a key that would admit a unit request now
	retireAlways                      // Reset
)

// entry is one key: its state and the rule the state was last decided
// under, which never changes (a key whose policy changes gets a new entry,
// its state converted; see convert).
type entry[S any] struct {
	key   string
	rule  *rule
	state S
}

// sameRule reports whether two rules enforce the same policy.
func sameRule(a, b *rule) bool { return a == b || a.policy == b.policy }

// slot is one cell of a shard's table. hash 0 means empty; a slot whose
// entry is nil but hash is set is a tombstone, which keeps probe chains
// intact until the table is rebuilt.
type slot[S any] struct {
	hash  atomic.Uint64
	entry atomic.Pointer[entry[S]]
}

type table[S any] struct {
	mask  uint64
	slots []slot[S]
}

// minTable is the smallest table; tables grow when 3/4 of their slots are
// used (so a probe always meets an empty slot) and are rebuilt at half load.
const minTable = 16

type shard[S any] struct {
	mu    sync.Mutex
	table atomic.Pointer[table[S]]
	live  int // entries present; under mu
	used  int // live entries plus tombstones; under mu
	// latest is the latest instant the shard's writers have acted at; under
	// mu. Writers act at max(now, latest), so that a request holding a clock
	// reading older than an eviction cannot decide on a fresh state at a
	// time when its key was not yet idle.
	latest int64
	// inherited holds, per policy, a state at least as used as every key
	// of that policy that the shard does not hold: keys evicted while
	// still in use (makeRoom) and keys that found no room. A new key
	// starts at least as used as each of them, converted to its own
	// policy, so that eviction never hands back quota. Under mu; at most
	// maxHeirs, the idle ones dropped by sweep.
	inherited []heir[S]
	// 64 bytes in all, one cache line: a writer of one shard does not
	// evict its neighbours' table pointers from the readers' caches.
}

// heir is a shard's inherited state for one policy.
type heir[S any] struct {
	rule  *rule
	state *S
}

// maxHeirs bounds the policies a shard keeps inherited states for. Keys
// of a further policy are not evicted while in use, and, when such a key
// finds a full shard of limited keys, it is denied until one of the
// inherited states is idle (see decideInherited).
const maxHeirs = 16

// lock locks the shard of key and returns it, the key's hash and the
// instant its writers act at (see shard.latest); the caller unlocks.
func (g *registry[S, P]) lock(key string, now int64) (*shard[S], uint64, int64) {
	h := g.hash(key)
	sh := &g.shards[h>>g.shift]
	sh.mu.Lock()
	return sh, h, sh.at(now)
}

// at returns the instant a writer acts at, holding sh.mu.
func (sh *shard[S]) at(now int64) int64 {
	sh.latest = max(sh.latest, now)
	return sh.latest
}

type registry[S any, P stateOf[S]] struct {
	rule *rule // the limiter's own policy
	// resolve returns the rule of a policy given with a call (AllowPolicy):
	// validated, of the registry's algorithm, shared by the calls that
	// give the same policy.
	resolve  func(Policy) (*rule, error)
	seed     maphash.Seed
	shift    uint // shard index = hash >> shift
	perShard int
	shards   []shard[S]
}

// evictSample is how many entries a full shard looks at to make room.
const evictSample = 32

func newRegistry[S any, P stateOf[S]](r *rule, resolve func(Policy) (*rule, error), maxKeys int) *registry[S, P] {
	// Enough shards that writers rarely meet, few enough that each holds at
	// least 64 keys so that the per-shard bound stays close to maxKeys.
	n := 256
	for n > 1 && maxKeys/n < 64 {
		n /= 2
	}
	g := &registry[S, P]{
		rule:     r,
		resolve:  resolve,
		seed:     maphash.MakeSeed(),
		shift:    uint(64 - bits.TrailingZeros(uint(n))),
		perShard: max(1, maxKeys/n),
		shards:   make([]shard[S], n),
	}
	for i := range g.shards {
		g.shards[i].table.Store(newTable[S](minTable))
	}
	return g
}

func newTable[S any](size int) *table[S] {
	return &table[S]{mask: uint64(size - 1), slots: make([]slot[S], size)}
}

func (g *registry[S, P]) hash(key string) uint64 {
	return max(maphash.String(g.seed, key), 1) // 0 marks an empty slot
}

// lookup finds key in t without locking, returning its slot and entry
// (nil when absent).
func lookup[S any](t *table[S], h uint64, key string) (*slot[S], *entry[S]) {
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		sh := s.hash.Load()
		if sh == 0 {
			return nil, nil
		}
		if sh == h {
			if e := s.entry.Load(); e != nil && e.key == key {
				return s, e
			}
		}
	}
}

// decide applies a request under the rule of the call: r, or, when r is
// nil, the rule of p, a policy given with the call (AllowPolicy). On the
// fast path, for a key last decided under the same policy, it takes no
// lock and allocates nothing, and p is only compared with the key's
// policy: p's rule is looked up (resolve) only when they differ or the key
// is new. Otherwise, under the shard's mutex, the key's state is converted
// to the call's rule (decideLocked). It returns the rule the verdict was
// decided under; the error is resolve's.
func (g *registry[S, P]) decide(r *rule, p *Policy, key string, now, n int64, consume bool) (verdict, *verdict, *rule, error) {
	h := g.hash(key)
	sh := &g.shards[h>>g.shift]
	if _, e := lookup(sh.table.Load(), h, key); e != nil && (e.rule == r || e.rule.policy == *p) {
		if d, pv, ok := P(&e.state).decide(e.rule, now, n, consume); ok {
			return d, pv, e.rule, nil
		}
	}
	if r == nil {
		var err error
		if r, err = g.resolve(*p); err != nil {
			return verdict{}, nil, nil, err
		}
	}
	d, pv := g.decideLocked(sh, h, r, key, now, n, consume)
	return d, pv, r, nil
}

// decideLocked is decide's slow path, for a key not in the table (or just
// retired, or last decided under another policy): under the shard's mutex
// it inserts the key, as a copy of the shard's inherited state, or moves
// it to r (move); when consume is false it reports what either would
// answer without storing anything.
func (g *registry[S, P]) decideLocked(sh *shard[S], h uint64, r *rule, key string, now, n int64, consume bool) (verdict, *verdict) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now = sh.at(now)
	// Entries are retired and removed in one critical section, so one
	// found under the lock is alive.
	if s, e := lookup(sh.table.Load(), h, key); e != nil {
		if sameRule(e.rule, r) {
			d, pv, _ := P(&e.state).decide(e.rule, now, n, consume)
			return d, pv
		}
		return g.move(sh, h, s, e, r, now, n, consume)
	}
	e, victim, room := g.newcomer(sh, h, r, now, consume)
	if !room {
		// Every key looked at is limited: the newcomer shares the
		// inherited state with the others that found no room.
		return g.decideInherited(sh, h, r, now, n, consume)
	}
	// Decided before any reader can reach e; a denial moves nothing in
	// (see move).
	d, pv, _ := P(&e.state).decide(r, now, n, consume)
	if !consume || !d.allowed {
		return g.inheritedWait(sh, r, victim, now, n, d, pv), pv
	}
	// Clone: the key may point into a larger buffer (a header line) that
	// the table must not keep alive.
	e.key = strings.Clone(key)
	g.insert(sh, h, e)
	return d, pv
}

// move decides a call under r on e, a key held under another policy,
// holding sh.mu: it converts the key's state to r only when the call is
// admitted and consumes. A denial, as a look, leaves the key where it is
// (see look), and the next call converts it afresh. Stored on a denial, a
// conversion would carry the denial's instant: under a delaying leaky
// bucket its one word (the later of the queue's end and the debt
// rescaled) would be multiplied by the ratio of two rates on every trip
// between them, and a store whose clock stepped back after the denial
// would stand still at it, where the requests before it had aged out.
func (g *registry[S, P]) move(sh *shard[S], h uint64, s *slot[S], e *entry[S], r *rule, now, n int64, consume bool) (verdict, *verdict) {
	if d, pv, _ := look[S, P](e.rule, r, now, n, &e.state); !consume || !d.allowed {
		return d, pv
	}
	// Retired first, into a copy: a decision in flight on the key then
	// either counts in the copy or fails and comes here.
	src := newState[S, P](e.rule)
	P(&e.state).retire(e.rule, now, retireAlways, src)
	c := &entry[S]{key: e.key, rule: r}
	P(&c.state).init(r)
	P(&c.state).convert(e.rule, r, now, src)
	sh.remove(s)
	g.insert(sh, h, c)
	d, pv, _ := P(&c.state).decide(r, now, n, true)
	return d, pv
}

// look returns src, a state held under from, converted to `to` at now,
// and what a call of cost n under `to` gets on it without consuming. Its
// durations are measured on src left alone, which goes on recovering
// under from until a call under `to` is admitted: RetryAfter (on a
// denial) until, converted then, it admits n, and ResetAfter until it is
// back to its full quota. Both are exact: waiting RetryAfter admits, 1ns
// less does not.
func look[S any, P stateOf[S]](from, to *rule, now, n int64, src *S) (verdict, *verdict, *S) {
	c := converted[S, P](from, to, now, src)
	d, first, _ := P(c).decide(to, now, n, false)
	if a, ok := any(src).(partsMeasurer); ok {
		pv := partVerdicts{d} // a policy not made with AllOf has no first
		if first != nil {
			pv = to.partVerdicts(first)
		}
		a.measureParts(from, to, now, n, pv) // and the whole from its parts
		return pv.combine(d.allowed), first, c
	}
	measure[S, P](&d, src, from, to, now, n)
	return d, first, c
}

// partsMeasurer is the state of a policy made with AllOf (allState).
type partsMeasurer interface {
	measureParts(from, to *rule, now, n int64, pv partVerdicts)
}

// measure sets the durations of v, what a call of cost n under `to` got at
// now on src converted, to those of src, held under from, left alone (see
// look).
func measure[S any, P stateOf[S]](v *verdict, src *S, from, to *rule, now, n int64) {
	v.reset = durationNs(P(src).admitsAt(from, to, now, fullQuota) - now)
	if !v.allowed {
		v.wait = durationNs(P(src).admitsAt(from, to, now, n) - now)
	}
}

// newcomer returns the entry a new key under r starts from, holding sh.mu:
// a copy of the inherited state, after room was made in a full shard. With
// apply false (Peek, Get) it changes nothing and the entry also holds what
// victim, the key makeRoom would evict, had used, so that a look agrees
// with the next AllowN at one instant. room is false when the shard is
// full of limited keys.
func (g *registry[S, P]) newcomer(sh *shard[S], h uint64, r *rule, now int64, apply bool) (e, victim *entry[S], room bool) {
	if sh.live >= g.perShard {
		if room, victim = g.makeRoom(sh, h, now, apply, retireUnlimited); !room {
			return nil, nil, false
		}
	}
	e = &entry[S]{rule: r}
	P(&e.state).init(r)
	g.startFrom(sh, &e.state, r, now)
	if victim != nil {
		P(&e.state).absorb(r, now, converted[S, P](victim.rule, r, now, &victim.state))
	}
	return e, victim, true
}

// inheritedWait returns d, what a call of cost n under r at now got
// without consuming on a state that startFrom built (and that absorbed
// victim, for a look), holding sh.mu, with its durations measured on the
// states it was built from: they stay under their own policies, each
// recovering at its own rate, so it is back to full when each of them,
// converted then, is, and admits n when each does (see look). A look sees
// victim as the next AllowN will, absorbed into its policy's inherited
// state. That is exact for one state and for the one-word states
// (absorbing keeps the most used); a sliding window built from several
// keeps each bucket's largest count, which the latest of their instants
// may not admit, and is told when each is back to full instead. Under a
// policy made with AllOf (first, its parts' verdicts), each part is so
// measured, and the whole combined from them.
func (g *registry[S, P]) inheritedWait(sh *shard[S], r *rule, victim *entry[S], now, n int64, d verdict, first *verdict) verdict {
	srcs := sh.inherited
	if victim != nil {
		merged := heir[S]{rule: victim.rule, state: newState[S, P](victim.rule)}
		srcs = make([]heir[S], 0, len(sh.inherited)+1)
		for _, h := range sh.inherited {
			if sameRule(h.rule, victim.rule) {
				P(merged.state).absorb(victim.rule, now, h.state)
			} else {
				srcs = append(srcs, h)
			}
		}
		P(merged.state).absorb(victim.rule, now, &victim.state)
		srcs = append(srcs, merged)
	}
	// Several sliding-window states, absorbed into one, are told when each
	// is back to full (r's algorithm is that of its parts too).
	untilFull := r.policy.Algorithm == AlgSlidingWindow && len(srcs) >= 2
	if first != nil {
		return measureAllFrom(srcs, r, now, n, r.partVerdicts(first), d.allowed, untilFull)
	}
	d.reset = 0
	if !d.allowed {
		d.wait = 0 // one that admits keeps its Delay
	}
	for _, h := range srcs {
		one := d
		measure[S, P](&one, h.state, h.rule, r, now, n)
		d.reset, d.wait = max(d.reset, one.reset), max(d.wait, one.wait)
	}
	if untilFull && !d.allowed {
		d.wait = d.reset
	}
	return d
}

// retryWait is inheritedWait for a key that found no room and is not
// admitted (or a look). The shard is full: the retry makes room by
// evicting a key into the inherited state and starts from that key's usage
// too (newcomer), so a wait measured on the inherited states alone could
// send it back before that key admits n. It asks makeRoom, without
// applying it, which key it would evict at the retry's instant, and
// decides the call on the state the retry would start from, each part
// anew; while that lengthens the wait, again at the later instant: a few
// turns, as a shard's sample is a few keys. The decision keeps what is
// true now (Remaining, ResetAfter: see retryFrom) with the retry's wait.
// Not for a sliding window, whose look at a later instant would advance
// its ring (see WithMaxKeys).
func (g *registry[S, P]) retryWait(sh *shard[S], h uint64, r *rule, now, n int64, d verdict, first *verdict) (verdict, *verdict) {
	d = g.inheritedWait(sh, r, nil, now, n, d, first)
	later, lp, moved := d, first, false
	for range evictSample {
		if d.allowed || r.policy.Algorithm == AlgSlidingWindow {
			break
		}
		at := now + min(int64(later.wait), math.MaxInt64-now)
		room, next := g.makeRoom(sh, h, at, false, retireUnlimited)
		if !room || next == nil {
			break // the retry starts from the inherited states alone
		}
		st := newState[S, P](r)
		g.startFrom(sh, st, r, now)
		P(st).absorb(r, now, converted[S, P](next.rule, r, now, &next.state))
		v, pv, _ := P(st).decide(r, now, n, false)
		if v = g.inheritedWait(sh, r, next, now, n, v, pv); v.wait <= later.wait {
			break
		}
		later, lp, moved = v, pv, true
	}
	if !moved {
		return d, first
	}
	return retryFrom(r, d, first, later, lp)
}

// retryFrom is the denial d (first, its parts' verdicts) told the wait of
// later (lp), the verdict of the state its retry starts from: what passes
// now and when it is full again stay d's, part by part under AllOf, where
// whether each part denies and how long it waits are the retry's.
func retryFrom(r *rule, d verdict, first *verdict, later verdict, lp *verdict) (verdict, *verdict) {
	if first == nil {
		d.wait = later.wait
		return d, nil
	}
	parts, nowParts := r.partVerdicts(lp), r.partVerdicts(first)
	for j := range parts {
		parts[j].remaining, parts[j].reset = nowParts[j].remaining, nowParts[j].reset
	}
	return parts.combine(false), lp
}

// measureAllFrom is inheritedWait under a policy made with AllOf: each
// part's durations in pv are the longest its sources tell (see look), and
// the whole is combined from the parts.
func measureAllFrom[S any](srcs []heir[S], r *rule, now, n int64, pv partVerdicts, admitted, untilFull bool) verdict {
	for j := range pv {
		pv[j].reset = 0
		if !pv[j].allowed {
			pv[j].wait = 0 // a part that admits keeps its Delay
		}
	}
	one := slices.Clone(pv)
	for _, h := range srcs {
		copy(one, pv)
		any(h.state).(partsMeasurer).measureParts(h.rule, r, now, n, one)
		for j := range pv {
			pv[j].reset, pv[j].wait = max(pv[j].reset, one[j].reset), max(pv[j].wait, one[j].wait)
		}
	}
	for j := range pv {
		if untilFull && !pv[j].allowed {
			pv[j].wait = pv[j].reset
		}
	}
	return pv.combine(admitted)
}

// decideInherited decides a key under r that found no room, holding
// sh.mu: on a state at least as used as every inherited state, whose
// usage, when it admits, goes into the inherited state of r, which the
// keys of r that found no room so share. If the shard already keeps
// maxHeirs inherited states, none of them r's, the request is denied
// until one of them is idle: there is nowhere to count it.
func (g *registry[S, P]) decideInherited(sh *shard[S], h uint64, r *rule, now, n int64, consume bool) (verdict, *verdict) {
	if i, _ := g.heirSlot(sh, r, now); i < 0 {
		var wait int64 = math.MaxInt64
		for _, h := range sh.inherited {
			wait = min(wait, max(P(h.state).untilIdle(h.rule, now), 1))
		}
		return verdict{reset: time.Duration(wait), wait: time.Duration(wait)}, nil
	}
	c := newState[S, P](r)
	g.startFrom(sh, c, r, now)
	d, pv, _ := P(c).decide(r, now, n, consume)
	if !consume || !d.allowed {
		return g.retryWait(sh, h, r, now, n, d, pv)
	}
	// The call moved the key to r (a key's state follows the policy of
	// its last admission), and r's inherited state now holds what it had
	// used, converted.
	P(g.heir(sh, r, now)).absorb(r, now, c)
	return d, pv
}

// startFrom makes st, a new state under r that no reader can reach, at
// least as used as each inherited state of the shard converted to r,
// holding sh.mu.
func (g *registry[S, P]) startFrom(sh *shard[S], st *S, r *rule, now int64) {
	for _, h := range sh.inherited {
		if sameRule(h.rule, r) {
			P(st).absorb(r, now, h.state)
		} else {
			P(st).absorb(r, now, converted[S, P](h.rule, r, now, h.state))
		}
	}
}

// newState returns a new state under r.
func newState[S any, P stateOf[S]](r *rule) *S {
	st := new(S)
	P(st).init(r)
	return st
}

// converted returns a new state, what src (held under from) becomes under
// `to` at now (see stateOf.convert).
func converted[S any, P stateOf[S]](from, to *rule, now int64, src *S) *S {
	c := newState[S, P](to)
	P(c).convert(from, to, now, src)
	return c
}

// heirSlot returns, holding sh.mu, the index of r's inherited state
// (found), else of the slot one would take: len(sh.inherited) while there
// is room, or an idle state of another policy, which can go without loss;
// -1 when there is neither.
func (g *registry[S, P]) heirSlot(sh *shard[S], r *rule, now int64) (i int, found bool) {
	free := -1
	if len(sh.inherited) < maxHeirs {
		free = len(sh.inherited)
	}
	for i, h := range sh.inherited {
		if sameRule(h.rule, r) {
			return i, true
		}
		if free < 0 && P(h.state).untilIdle(h.rule, now) <= 0 {
			free = i
		}
	}
	return free, false
}

// heir returns the shard's inherited state for r, holding sh.mu, making
// one if there is none and a slot for it (see heirSlot); nil otherwise.
func (g *registry[S, P]) heir(sh *shard[S], r *rule, now int64) *S {
	i, found := g.heirSlot(sh, r, now)
	switch {
	case i < 0:
		return nil
	case i == len(sh.inherited):
		sh.inherited = append(sh.inherited, heir[S]{rule: r, state: newState[S, P](r)})
	case !found:
		sh.inherited[i] = heir[S]{rule: r, state: newState[S, P](r)}
	}
	return sh.inherited[i].state
}

// insert adds e, holding sh.mu.
func (g *registry[S, P]) insert(sh *shard[S], h uint64, e *entry[S]) {
	t := sh.table.Load()
	if (sh.used+1)*4 > len(t.slots)*3 {
		t = g.rebuild(sh, (sh.live+1)*2)
	}
	if place(t, h, e) {
		sh.used++
	}
	sh.live++
}

// place stores e in the first free slot of t from h on, an empty one or a
// tombstone, and reports whether it was empty. The entry is stored before
// the hash, so a reader that sees the hash finds the entry.
func place[S any](t *table[S], h uint64, e *entry[S]) (empty bool) {
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if empty = s.hash.Load() == 0; empty || s.entry.Load() == nil {
			s.entry.Store(e)
			s.hash.Store(h)
			return empty
		}
	}
}

// rebuild publishes a fresh table of at least size slots (a power of two)
// holding the live entries, holding sh.mu. Readers still searching the old
// table find the same entries there.
func (g *registry[S, P]) rebuild(sh *shard[S], size int) *table[S] {
	size = max(minTable, 1<<bits.Len(uint(size-1)))
	old, t := sh.table.Load(), newTable[S](size)
	for i := range old.slots {
		if e := old.slots[i].entry.Load(); e != nil {
			place(t, old.slots[i].hash.Load(), e)
		}
	}
	sh.used = sh.live
	sh.table.Store(t)
	return t
}

// remove turns a slot into a tombstone, holding sh.mu.
func (sh *shard[S]) remove(s *slot[S]) {
	s.entry.Store(nil)
	sh.live--
}

// makeRoom evicts from a full shard, holding sh.mu. It looks at up to
// evictSample entries from a pseudo-random place and retires every idle one
// (lossless); if none is idle, it retires the least-used key that is not
// limited (the most Remaining), and the shard's inherited state absorbs what
// that key had used, so that neither it nor any other newcomer gets quota
// back by eviction; with mode retireAlways (Reset, Set) a limited key may go
// too. It reports whether room was made: false when every key looked at is
// limited. With apply false it changes nothing and returns the key it would
// have evicted (nil when an idle key would do).
func (g *registry[S, P]) makeRoom(sh *shard[S], h uint64, now int64, apply bool, mode retireMode) (room bool, victim *entry[S]) {
	// A retire loses only to a concurrent decision that changed the key
	// (a CompareAndSwap); look again rather than give up.
	for range 4 {
		t := sh.table.Load()
		var (
			best     *slot[S]
			most     int64
			freed    bool
			examined int
		)
		start := (h >> 20) & t.mask
		for k := uint64(0); k <= t.mask && examined < evictSample; k++ {
			s := &t.slots[(start+k)&t.mask]
			e := s.entry.Load()
			if e == nil {
				continue
			}
			examined++
			st := P(&e.state)
			if st.untilIdle(e.rule, now) <= 0 {
				if !apply {
					return true, nil
				}
				if st.retire(e.rule, now, retireIdle, nil) {
					sh.remove(s)
					freed = true
					continue
				}
			}
			if i, _ := g.heirSlot(sh, e.rule, now); i < 0 {
				continue // nowhere to keep what it used
			}
			if d, _, ok := st.decide(e.rule, now, 1, false); ok && (d.allowed || mode == retireAlways) && (best == nil || d.remaining > most) {
				best, most = s, d.remaining
			}
		}
		if freed {
			return true, nil
		}
		if best == nil {
			return false, nil
		}
		e := best.entry.Load()
		if !apply {
			return true, e
		}
		// The inherited state of its policy absorbs what it had used
		// (heirSlot found it a place above).
		if P(&e.state).retire(e.rule, now, mode, g.heir(sh, e.rule, now)) {
			sh.remove(best)
			return true, nil
		}
	}
	return false, nil
}

// reset forgets key. In a shard whose inherited state is in use, the key
// is put back as a new key of its own, so that its next request starts
// from a full quota rather than from the inherited one.
func (g *registry[S, P]) reset(key string, now int64) {
	sh, h, now := g.lock(key, now)
	defer sh.mu.Unlock()
	r := g.rule
	if e := g.drop(sh, h, key, now); e != nil {
		r = e.rule
	}
	if slices.ContainsFunc(sh.inherited, func(h heir[S]) bool { return P(h.state).untilIdle(h.rule, now) > 0 }) {
		g.put(sh, h, key, r, now, 0)
	}
}

// set makes key's usage under r exactly used units at now (Set): a new
// entry replaces the key's, whose state is retired first so that no
// decision in flight on it counts.
func (g *registry[S, P]) set(r *rule, key string, now, used int64) {
	sh, h, now := g.lock(key, now)
	defer sh.mu.Unlock()
	g.drop(sh, h, key, now)
	g.put(sh, h, key, r, now, used)
}

// drop retires and removes key, holding sh.mu, and returns its entry (nil
// when the shard does not hold it).
func (g *registry[S, P]) drop(sh *shard[S], h uint64, key string, now int64) *entry[S] {
	s, e := lookup(sh.table.Load(), h, key)
	if e != nil {
		P(&e.state).retire(e.rule, now, retireAlways, nil)
		sh.remove(s)
	}
	return e
}

// put inserts key under r with used units used at now, holding sh.mu,
// evicting another key from a full shard whatever its state.
func (g *registry[S, P]) put(sh *shard[S], h uint64, key string, r *rule, now, used int64) {
	if sh.live >= g.perShard {
		g.makeRoom(sh, h, now, true, retireAlways)
	}
	e := &entry[S]{key: strings.Clone(key), rule: r}
	P(&e.state).init(r)
	P(&e.state).set(r, now, used)
	g.insert(sh, h, e)
}

// get returns what a look at key under r finds at now: the verdict of a
// unit request and the usage, changing nothing (Get).
func (g *registry[S, P]) get(r *rule, key string, now int64) (verdict, int64) {
	sh, h, now := g.lock(key, now)
	defer sh.mu.Unlock()
	switch _, e := lookup(sh.table.Load(), h, key); {
	case e != nil && !sameRule(e.rule, r):
		d, _, c := look[S, P](e.rule, r, now, 1, &e.state)
		return d, P(c).usage(r, now)
	case e != nil:
		d, _, _ := P(&e.state).decide(r, now, 1, false)
		return d, P(&e.state).usage(r, now)
	}
	if e, victim, room := g.newcomer(sh, h, r, now, false); room {
		d, pv, _ := P(&e.state).decide(r, now, 1, false)
		return g.inheritedWait(sh, r, victim, now, 1, d, pv), P(&e.state).usage(r, now)
	}
	st := newState[S, P](r)
	g.startFrom(sh, st, r, now)
	d, _ := g.decideInherited(sh, h, r, now, 1, false)
	return d, P(st).usage(r, now)
}

func (g *registry[S, P]) len() int {
	total := 0
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		total += sh.live
		sh.mu.Unlock()
	}
	return total
}

// sweep evicts the idle keys of every shard, one shard at a time, so a
// writer waits at most for one shard's sweep (maxKeys/256 entries) and
// readers never wait. A shard whose table has become mostly empty (or full
// of tombstones) is rebuilt smaller, so its memory returns to the runtime.
// While a shard's inherited state is still in use its idle keys stay: a key
// evicted then would come back as a copy of that state, more used than it
// is.
func (g *registry[S, P]) sweep(now int64) {
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		at := sh.at(now)
		idle := func(h heir[S]) bool { return P(h.state).untilIdle(h.rule, at) <= 0 }
		sh.inherited = slices.DeleteFunc(sh.inherited, idle) // clears the tail
		t := sh.table.Load()
		if len(sh.inherited) == 0 {
			for j := range t.slots {
				s := &t.slots[j]
				if e := s.entry.Load(); e != nil && P(&e.state).retire(e.rule, at, retireIdle, nil) {
					sh.remove(s)
				}
			}
		}
		if size := len(t.slots); size > minTable && (sh.live*8 < size || (sh.used-sh.live)*4 > size) {
			g.rebuild(sh, sh.live*2)
		}
		sh.mu.Unlock()
	}
}
