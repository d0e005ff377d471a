package core

import (
	"hash/maphash"
	"math"
	"math/bits"
	"strings"
	"sync"
	"time"
)

// The registry holds the keys of one limiter: a sync.Map per shard. A
// decision for a key already present takes no lock: a Load and an atomic
// update of the key's state (a CompareAndSwap, or the sliding window's
// small mutex). Writers (a new key, a policy change, eviction, Reset, Set,
// the janitor) take the shard's mutex. Removing a key that readers may be
// holding is safe because its state is first retired: set to a value no
// decision accepts, so a reader that found the entry fails, and takes the
// slow path, which finds the key gone or replaced.

// keys is what a MemoryLimiter asks of its registry beyond decisions, for
// any algorithm.
type keys interface {
	reset(key string, now int64)
	set(r *rule, key string, now, used int64)
	get(r *rule, key string, now int64) (verdict, int64)
	len() int
	sweep(now int64)
}

// stateOf is what the registry needs of a per-key state type.
type stateOf[S any] interface {
	*S
	// init prepares a zero state for use (the sliding window's ring).
	init(r *rule)
	// decide applies a request atomically; ok is false if the state was
	// retired, and then nothing was consumed.
	decide(r *rule, now, n int64, consume bool) (v verdict, ok bool)
	// idle reports whether the state equals a new key's at now.
	idle(r *rule, now int64) bool
	// untilIdle is the time from now until idle holds, with no further
	// traffic (<= 0: it holds now).
	untilIdle(r *rule, now int64) int64
	// retire marks the state so that no later decide accepts it, if the
	// condition of mode holds; it reports whether it did. When into is not
	// nil, into absorbs what the retired state had used.
	retire(r *rule, now int64, mode retireMode, into *S) bool
	// absorb makes the state at least as used as src, at now and after:
	// whatever it then admits, src would have admitted too.
	absorb(r *rule, now int64, src *S)
	// convert makes the state, new and unreachable by readers, what src
	// (decided under from) becomes under to at now, as "Policies per
	// call" in doc.go says; with retire set it also retires src in the
	// same atomic step. It reports false if src was already retired.
	convert(from, to *rule, now int64, src *S, retire bool) bool
	// usage is Usage.Used at now; it may advance the state as a decision
	// would, consuming nothing.
	usage(r *rule, now int64) int64
	// set makes the state, new and unreachable by readers, one that has
	// used exactly used units at now.
	set(r *rule, now, used int64)
}

type retireMode uint8

const (
	retireIdle      retireMode = iota // only a key equal to a new one (lossless)
	retireUnlimited                   // only a key that would admit a unit request now
	retireAlways                      // Reset, Set
)

// entry is one key's state and the rule the state was last decided under,
// which never changes (a key whose policy changes gets a new entry, its
// state converted; see convert).
type entry[S any] struct {
	rule  *rule
	state S
}

// sameRule reports whether two rules enforce the same policy.
func sameRule(a, b *rule) bool { return a == b || a.policy == b.policy }

type shard[S any] struct {
	mu sync.Mutex
	// keys maps a key to its *entry[S]; written under mu. Entries are
	// retired and removed in one critical section, so an entry found
	// holding mu is never retired.
	keys sync.Map
	n    int // the keys held, under mu
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
	return g
}

func (g *registry[S, P]) shard(key string) *shard[S] {
	return &g.shards[maphash.String(g.seed, key)>>g.shift]
}

// load returns key's entry, or nil.
func (sh *shard[S]) load(key string) *entry[S] {
	v, _ := sh.keys.Load(key)
	e, _ := v.(*entry[S])
	return e
}

// decide applies a request under the rule of the call: r, or, when r is
// nil, the rule of p, a policy given with the call (AllowPolicy). For a
// key last decided under the same policy it takes no lock and allocates
// nothing, and p is only compared with the key's policy:
// p's rule is looked up (resolve) only when they differ or the key is new.
// Otherwise, under the shard's write lock, the key's state is converted to
// the call's rule (decideLocked), as is a key found retired. It returns the rule the verdict was
// decided under; the error is resolve's.
func (g *registry[S, P]) decide(r *rule, p *Policy, key string, now, n int64, consume bool) (verdict, *rule, error) {
	sh := g.shard(key)
	if e := sh.load(key); e != nil && (e.rule == r || e.rule.policy == *p) {
		if d, ok := P(&e.state).decide(e.rule, now, n, consume); ok {
			return d, e.rule, nil
		}
	}
	if r == nil {
		var err error
		if r, err = g.resolve(*p); err != nil {
			return verdict{}, nil, err
		}
	}
	return g.decideLocked(sh, r, key, now, n, consume), r, nil
}

// decideLocked is decide's slow path, for a key not held (or retired, or
// last decided under another policy): under the shard's mutex it inserts the key,
// as a copy of the shard's inherited state, or converts the key's state to
// r; when consume is false it reports what either would answer without
// storing anything.
func (g *registry[S, P]) decideLocked(sh *shard[S], r *rule, key string, now, n int64, consume bool) verdict {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now = sh.at(now)
	if e := sh.load(key); e != nil {
		if sameRule(e.rule, r) {
			d, _ := P(&e.state).decide(e.rule, now, n, consume)
			return d
		}
		c := &entry[S]{rule: r}
		P(&c.state).init(r)
		P(&c.state).convert(e.rule, r, now, &e.state, consume)
		if consume {
			sh.keys.Store(strings.Clone(key), c)
		}
		d, _ := P(&c.state).decide(r, now, n, consume)
		return d
	}
	e, room := g.newcomer(sh, r, now, consume)
	if !room {
		// Every key looked at is limited: the newcomer shares the
		// inherited state with the others that found no room.
		return g.decideInherited(sh, r, now, n, consume)
	}
	if consume {
		sh.insert(key, e)
	}
	d, _ := P(&e.state).decide(r, now, n, consume)
	return d
}

// insert stores e for a key not held, holding sh.mu. The key is cloned: it
// may point into a larger buffer (a header line) that the map must not keep
// alive.
func (sh *shard[S]) insert(key string, e *entry[S]) {
	sh.keys.Store(strings.Clone(key), e)
	sh.n++
}

// remove deletes a key held, whose state is retired, holding sh.mu.
func (sh *shard[S]) remove(key any) {
	sh.keys.Delete(key)
	sh.n--
}

// newcomer returns the entry a new key under r starts from, holding sh.mu:
// a copy of the inherited state, after room was made in a full shard. With
// apply false (Peek, Get) it changes nothing and the entry also holds what
// the key makeRoom would evict had used, so that a look agrees with the
// next AllowN at one instant. room is false when the shard is full of
// limited keys.
func (g *registry[S, P]) newcomer(sh *shard[S], r *rule, now int64, apply bool) (e *entry[S], room bool) {
	var victim *entry[S]
	if sh.n >= g.perShard {
		if room, victim = g.makeRoom(sh, now, apply); !room {
			return nil, false
		}
	}
	e = &entry[S]{rule: r}
	P(&e.state).init(r)
	g.startFrom(sh, &e.state, r, now)
	if victim != nil {
		var v S
		P(&v).init(r)
		P(&v).convert(victim.rule, r, now, &victim.state, false)
		P(&e.state).absorb(r, now, &v)
	}
	return e, true
}

// decideInherited decides a key under r that found no room, holding
// sh.mu: on a state at least as used as every inherited state, whose
// usage, when it admits, goes into the inherited state of r, which the
// keys of r that found no room so share. If the shard already keeps
// maxHeirs inherited states, none of them r's, the request is denied
// until one of them is idle: there is nowhere to count it.
func (g *registry[S, P]) decideInherited(sh *shard[S], r *rule, now, n int64, consume bool) verdict {
	if i, _ := g.heirSlot(sh, r, now); i < 0 {
		var wait int64 = math.MaxInt64
		for _, h := range sh.inherited {
			wait = min(wait, max(P(h.state).untilIdle(h.rule, now), 1))
		}
		return verdict{reset: time.Duration(wait), wait: time.Duration(wait)}
	}
	var c S
	P(&c).init(r)
	g.startFrom(sh, &c, r, now)
	d, _ := P(&c).decide(r, now, n, consume)
	if consume {
		// Denied too: the call moved the key to r (a key's state follows
		// the policy of its last call), and r's inherited state now
		// holds what it had used, converted.
		P(g.heir(sh, r, now)).absorb(r, now, &c)
	}
	return d
}

// startFrom makes st, a new state under r that no reader can reach, at
// least as used as each inherited state of the shard converted to r,
// holding sh.mu.
func (g *registry[S, P]) startFrom(sh *shard[S], st *S, r *rule, now int64) {
	for _, h := range sh.inherited {
		if sameRule(h.rule, r) {
			P(st).absorb(r, now, h.state)
			continue
		}
		var c S
		P(&c).init(r)
		P(&c).convert(h.rule, r, now, h.state, false)
		P(st).absorb(r, now, &c)
	}
}

// evict retires and removes key, if mode allows it, holding sh.mu, the
// inherited state of its policy absorbing what it had used; it reports
// false, and keeps the key, when mode does not allow it (a concurrent
// decision limited the key) or that policy has no inherited state and
// cannot get one (maxHeirs).
func (g *registry[S, P]) evict(sh *shard[S], key any, e *entry[S], now int64, mode retireMode) bool {
	in := g.heir(sh, e.rule, now)
	if in == nil || !P(&e.state).retire(e.rule, now, mode, in) {
		return false
	}
	sh.remove(key)
	return true
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
		if free < 0 && P(h.state).idle(h.rule, now) {
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
	case found:
		return sh.inherited[i].state
	case i < 0:
		return nil
	}
	st := new(S)
	P(st).init(r)
	if i == len(sh.inherited) {
		sh.inherited = append(sh.inherited, heir[S]{rule: r, state: st})
	} else {
		sh.inherited[i] = heir[S]{rule: r, state: st}
	}
	return st
}

// inheritedInUse reports whether an inherited state of the shard is not
// idle at now, holding sh.mu.
func (g *registry[S, P]) inheritedInUse(sh *shard[S], now int64) bool {
	for _, h := range sh.inherited {
		if !P(h.state).idle(h.rule, now) {
			return true
		}
	}
	return false
}

// makeRoom evicts from a full shard, holding sh.mu. It looks at up to
// evictSample entries (in the sync.Map's order) and removes every idle one
// (lossless); if none is idle, it evicts the least-used key
// that is not limited (the most Remaining), and the shard's inherited state
// absorbs what that key had used, so that neither it nor any other
// newcomer gets quota back by eviction. It reports whether room was made:
// false when every key looked at is limited. With apply false it changes
// nothing and returns the key it would have evicted (nil when an idle key
// would do).
func (g *registry[S, P]) makeRoom(sh *shard[S], now int64, apply bool) (room bool, victim *entry[S]) {
	var (
		best     any
		most     int64
		freed    bool
		examined int
	)
	sh.keys.Range(func(k, v any) bool {
		e := v.(*entry[S])
		st := P(&e.state)
		if st.idle(e.rule, now) && (!apply || st.retire(e.rule, now, retireIdle, nil)) {
			freed = true
			if !apply {
				return false
			}
			sh.remove(k)
		} else if i, _ := g.heirSlot(sh, e.rule, now); i >= 0 {
			if d, _ := st.decide(e.rule, now, 1, false); d.allowed && (victim == nil || d.remaining > most) {
				best, victim, most = k, e, d.remaining
			}
		}
		examined++
		return examined < evictSample
	})
	switch {
	case freed:
		return true, nil
	case victim == nil:
		return false, nil
	case apply:
		return g.evict(sh, best, victim, now, retireUnlimited), nil
	}
	return true, victim
}

// reset forgets key. In a shard whose inherited state is in use, the key
// is put back as a new key of its own, so that its next request starts
// from a full quota rather than from the inherited one.
func (g *registry[S, P]) reset(key string, now int64) {
	sh := g.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now = sh.at(now)
	r := g.rule
	if e := sh.load(key); e != nil {
		P(&e.state).retire(e.rule, now, retireAlways, nil)
		sh.remove(key)
		r = e.rule
	}
	if g.inheritedInUse(sh, now) {
		g.put(sh, key, r, now, 0)
	}
}

// set makes key's usage under r exactly used units at now (Set).
func (g *registry[S, P]) set(r *rule, key string, now, used int64) {
	sh := g.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now = sh.at(now)
	if e := sh.load(key); e != nil {
		P(&e.state).retire(e.rule, now, retireAlways, nil)
		sh.remove(key)
	}
	g.put(sh, key, r, now, used)
}

// put inserts key under r with used units used at now, holding sh.mu,
// evicting another key from a full shard whatever its state (the first
// whose policy has or can get an inherited state) when every key looked at
// is limited.
func (g *registry[S, P]) put(sh *shard[S], key string, r *rule, now, used int64) {
	if sh.n >= g.perShard {
		if room, _ := g.makeRoom(sh, now, true); !room {
			sh.keys.Range(func(k, v any) bool {
				return !g.evict(sh, k, v.(*entry[S]), now, retireAlways)
			})
		}
	}
	e := &entry[S]{rule: r}
	P(&e.state).init(r)
	P(&e.state).set(r, now, used)
	sh.insert(key, e)
}

// get returns what a look at key under r finds at now: the verdict of a
// unit request and the usage, changing nothing (Get).
func (g *registry[S, P]) get(r *rule, key string, now int64) (verdict, int64) {
	sh := g.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now = sh.at(now)
	var st *S
	if e := sh.load(key); e != nil {
		st = &e.state
		if !sameRule(e.rule, r) {
			st = new(S)
			P(st).init(r)
			P(st).convert(e.rule, r, now, &e.state, false)
		}
	} else if e, room := g.newcomer(sh, r, now, false); room {
		st = &e.state
	} else {
		st = new(S)
		P(st).init(r)
		g.startFrom(sh, st, r, now)
		return g.decideInherited(sh, r, now, 1, false), P(st).usage(r, now)
	}
	d, _ := P(st).decide(r, now, 1, false)
	return d, P(st).usage(r, now)
}

func (g *registry[S, P]) len() int {
	total := 0
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		total += sh.n
		sh.mu.Unlock()
	}
	return total
}

// sweep evicts the idle keys of every shard, one shard at a time, so a
// request waits at most for one shard's sweep (maxKeys/256 entries). While
// a shard's inherited state is still in use its idle keys stay: a key
// evicted then would come back as a copy of that state, more used than it
// is.
func (g *registry[S, P]) sweep(now int64) {
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		at := sh.at(now)
		kept := sh.inherited[:0]
		for _, h := range sh.inherited {
			if !P(h.state).idle(h.rule, at) {
				kept = append(kept, h)
			}
		}
		clear(sh.inherited[len(kept):])
		sh.inherited = kept
		if len(sh.inherited) == 0 {
			sh.keys.Range(func(k, v any) bool {
				if e := v.(*entry[S]); P(&e.state).retire(e.rule, at, retireIdle, nil) {
					sh.remove(k)
				}
				return true
			})
		}
		sh.mu.Unlock()
	}
}
