package core

import (
	"encoding/binary"
	"fmt"
	"iter"
	"math"
	"sync"
	"unsafe"
)

// MaxParts is the most parts a policy made with AllOf may have.
const MaxParts = 4

// AllOf returns a policy made of parts (10 per second and 1,000 per day):
// a request is admitted only if every part admits it, and then charged to
// every part; denied, it is charged to none. Each part keeps its own
// promise ("What is promised" in the package documentation), and the
// Decision reports the part that binds (see [Decision.Parts]).
//
// The parts use one algorithm, the policy's, and have distinct labels
// ([Policy.Label]: name them); of leaky buckets, one at most delays, the
// others are meters ([Policy.AsMeter]): a request is served after the
// longest of its parts' delays, which a second delaying part would not
// count in its queue. A part cannot be made of parts. The
// policy's Algorithm, Limit, Window and knobs are its first part's, so
// name the part that best describes the limit first; its Name is its own
// (WithName). A limiter built with such a policy decides policies of one
// part too, as a policy of one part; one built with a policy of one part
// decides no policy of several ([ErrAlgorithmMismatch]).
//
// When a key moves between such policies (plans), each part keeps what it
// used if the new policy has a part of the same label, converted as a
// policy of one part would be ("Policies per call"); a part that is new
// starts empty. Equal parts make equal policies, so AllOf may be called
// per request.
func AllOf(parts ...Policy) Policy {
	if len(parts) == 0 {
		return Policy{}
	}
	p := parts[0]
	p.Name, p.parts = "", encodeParts(parts)
	return p
}

// Parts returns the parts of a policy made with AllOf, in order, and nil
// for a policy of one part.
func (p Policy) Parts() []Policy {
	if p.parts == "" {
		return nil
	}
	n, s := uvarint(p.parts)
	parts := make([]Policy, n)
	for i := range parts {
		parts[i], s = decodePart(s)
	}
	return parts
}

// decodePart decodes the part encodeParts wrote at the start of s, without
// allocating (its strings are s's), and returns the rest of s.
func decodePart(s string) (q Policy, rest string) {
	q.Algorithm, q.Meter = Algorithm(s[0]), s[1]&1 != 0
	nested := s[1]&2 != 0
	s = s[2:]
	for _, f := range [...]*int64{&q.Limit, (*int64)(&q.Window), &q.Burst, &q.Buckets} {
		var u uint64
		u, s = uvarint(s)
		*f = int64(u>>1) ^ -int64(u&1) // as binary.AppendVarint wrote it
	}
	q.Name, s = decodeString(s)
	if nested {
		q.parts, s = decodeString(s)
	}
	return q, s
}

// uvarint decodes what binary.AppendUvarint wrote at the start of s, and
// returns the rest of s.
func uvarint(s string) (u uint64, rest string) {
	for shift := 0; ; shift += 7 {
		c := s[0]
		s = s[1:]
		if u |= uint64(c&0x7f) << shift; c < 0x80 {
			return u, s
		}
	}
}

// decodeString decodes what appendString wrote at the start of s, and
// returns the rest of s.
func decodeString(s string) (string, string) {
	l, s := uvarint(s)
	return s[:l], s[l:]
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// encodeParts writes parts into the string a Policy holds them in, so that
// a Policy stays comparable and equal parts give equal policies.
func encodeParts(parts []Policy) string {
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(parts)))
	for _, q := range parts {
		meter := byte(0)
		if q.Meter {
			meter = 1
		}
		if q.parts != "" {
			meter |= 2 // a part made of parts, kept whole: Validate refuses it
		}
		b = append(b, byte(q.Algorithm), meter)
		for _, n := range []int64{q.Limit, int64(q.Window), q.Burst, q.Buckets} {
			b = binary.AppendVarint(b, n)
		}
		b = appendString(b, q.Name)
		if q.parts != "" {
			b = appendString(b, q.parts)
		}
	}
	return string(b)
}

// partsCapacity is the smallest capacity of the parts encoded in s,
// without allocating: AllowPolicy checks it on every call.
func partsCapacity(s string) int64 {
	c := int64(math.MaxInt64) // AllOf encodes one part at least
	n, s := uvarint(s)
	for range n {
		var q Policy
		q, s = decodePart(s)
		q.parts = "" // a part made of parts counts by its own numbers
		c = min(c, q.Capacity())
	}
	return c
}

// validateParts checks a policy made with AllOf.
func (p Policy) validateParts() error {
	parts := p.Parts()
	if len(parts) < 1 || len(parts) > MaxParts {
		return fmt.Errorf("core: AllOf takes 1 to %d parts, got %d", MaxParts, len(parts))
	}
	first := parts[0]
	first.Name, first.parts = p.Name, p.parts
	if first != p {
		return fmt.Errorf("core: a policy made with AllOf takes its numbers from its first part; set them on the parts (%v)", p)
	}
	labels := make(map[string]bool, len(parts))
	delaying := 0
	for i, q := range parts {
		if q.Algorithm == AlgLeakyBucket && !q.Meter {
			if delaying++; delaying > 1 {
				// Each would count the request served after its own
				// delay, where it is served after the longest: the
				// faster part's queue would grow past its Burst.
				return fmt.Errorf("core: AllOf takes one delaying leaky bucket at most: make part %d a meter (AsMeter)", i+1)
			}
		}
		if q.parts != "" {
			return fmt.Errorf("core: AllOf part %d is made of parts itself", i+1)
		}
		switch err := q.Validate(); {
		case err != nil:
			return fmt.Errorf("core: AllOf part %d: %w", i+1, err)
		case q.Algorithm != first.Algorithm:
			return fmt.Errorf("core: AllOf parts use one algorithm: part %d is a %v, part 1 a %v", i+1, q.Algorithm, first.Algorithm)
		case labels[q.Label()]:
			return fmt.Errorf("core: AllOf parts need distinct labels: two are %q (name them with WithName)", q.Label())
		}
		labels[q.Label()] = true
	}
	return nil
}

// allState is a key's state under a policy of several parts: one state per
// part, decided together under a mutex, so that a request is charged to
// every part or to none. The parts are those of the rule the state was
// last decided under (rule.parts).
type allState[S any, P stateOf[S]] struct {
	mu    sync.Mutex
	dead  bool // retired (see registry.go)
	parts []S
}

// partVerdicts are the verdicts of the parts of a decision, for
// Decision.Parts: element i is part i's. It is allocated at its exact
// length and holds no pointer, so that a composite decision costs one
// small allocation the garbage collector need not scan (a fixed array of
// MaxParts beside the rule cost a composite decision in memory 1.5x its
// time).
type partVerdicts []verdict

// partVerdicts returns the verdicts of r's parts that start at first:
// the decide methods pass on the first only, so that their results fit in
// registers and Decision stays comparable.
func (r *rule) partVerdicts(first *verdict) partVerdicts {
	return unsafe.Slice(first, len(r.parts))
}

func (s *allState[S, P]) init(r *rule) {
	s.parts = make([]S, len(r.parts))
	for i := range s.parts {
		P(&s.parts[i]).init(&r.parts[i])
	}
}

// decide asks every part without consuming, then, if every part admits
// and consume is set, charges each: under the mutex, no other decision
// comes between.
func (s *allState[S, P]) decide(r *rule, now, n int64, consume bool) (verdict, *verdict, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return verdict{}, nil, false
	}
	if r.policy.parts == "" {
		// A policy not made with AllOf (a plan of a composite limiter):
		// its verdict is the whole's, and its Decision has no Parts.
		v, _, _ := P(&s.parts[0]).decide(&r.parts[0], now, n, consume)
		return v, nil, true
	}
	pv := make(partVerdicts, len(r.parts))
	admitted := true
	for i := range s.parts {
		pv[i], _, _ = P(&s.parts[i]).decide(&r.parts[i], now, n, false)
		admitted = admitted && pv[i].allowed
	}
	if admitted && consume {
		for i := range s.parts {
			pv[i], _, _ = P(&s.parts[i]).decide(&r.parts[i], now, n, true)
		}
	}
	return pv.combine(admitted), &pv[0], true
}

// combine is the verdict of the whole: admitted when every part admits,
// waiting (RetryAfter, or a leaky bucket's Delay) as long as the longest,
// and otherwise the part that binds (see binding).
func (pv partVerdicts) combine(admitted bool) verdict {
	d := pv[pv.binding()]
	d.allowed, d.wait = admitted, 0
	for _, v := range pv {
		// A part that admits has no RetryAfter: its wait is a delay.
		if admitted || !v.allowed {
			d.wait = max(d.wait, v.wait)
		}
	}
	return d
}

// binding is the index of the part that binds: the fewest remaining, then
// the longest wait, then the longest reset.
func (pv partVerdicts) binding() int {
	b := 0
	for i := 1; i < len(pv); i++ {
		v, w := pv[i], pv[b]
		if v.remaining < w.remaining || v.remaining == w.remaining && (v.wait > w.wait || v.wait == w.wait && v.reset > w.reset) {
			b = i
		}
	}
	return b
}

func (s *allState[S, P]) untilIdle(r *rule, now int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.most(r, now, P.untilIdle)
}

// most is the largest of f's answers for the parts, holding s.mu.
func (s *allState[S, P]) most(r *rule, now int64, f func(P, *rule, int64) int64) int64 {
	var m int64
	for i := range s.parts {
		m = max(m, f(&s.parts[i], &r.parts[i], now))
	}
	return m
}

func (s *allState[S, P]) retire(r *rule, now int64, mode retireMode, into *allState[S, P]) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch mode {
	case retireIdle:
		if s.most(r, now, P.untilIdle) > 0 {
			return false
		}
	case retireUnlimited:
		for i := range s.parts {
			if v, _, _ := P(&s.parts[i]).decide(&r.parts[i], now, 1, false); !v.allowed {
				return false
			}
		}
	}
	s.dead = true
	if into != nil {
		into.absorbLocked(r, now, s)
	}
	return true
}

func (s *allState[S, P]) absorb(r *rule, now int64, src *allState[S, P]) {
	src.mu.Lock()
	defer src.mu.Unlock()
	s.absorbLocked(r, now, src)
}

// absorbLocked absorbs src, of the same rule, part by part; the caller
// holds src.mu, and s is unreachable by readers.
func (s *allState[S, P]) absorbLocked(r *rule, now int64, src *allState[S, P]) {
	for i := range s.parts {
		P(&s.parts[i]).absorb(&r.parts[i], now, &src.parts[i])
	}
}

// convert converts each part of `to` from the part of `from` with the same
// label; a part without one stays empty.
func (s *allState[S, P]) convert(from, to *rule, now int64, src *allState[S, P]) {
	src.mu.Lock()
	defer src.mu.Unlock()
	for i, j := range from.matches(to) {
		P(&s.parts[j]).convert(&from.parts[i], &to.parts[j], now, &src.parts[i])
	}
}

// admitsAt is the latest of the parts' (a new part admits at once).
func (s *allState[S, P]) admitsAt(from, to *rule, now, n int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := now
	for i, j := range from.matches(to) {
		t = max(t, P(&s.parts[i]).admitsAt(&from.parts[i], &to.parts[j], now, n))
	}
	return t
}

// measureParts measures each part's durations in pv on the part of s,
// held under from, that it was converted from, as look measures a single
// policy's: every part's RetryAfter and ResetAfter are exact, and so the
// whole's, combined from them. A new part's (empty) are exact already.
func (s *allState[S, P]) measureParts(from, to *rule, now, n int64, pv partVerdicts) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, j := range from.matches(to) {
		measure[S, P](&pv[j], &s.parts[i], &from.parts[i], &to.parts[j], now, n)
	}
}

// usage is the most used part's.
func (s *allState[S, P]) usage(r *rule, now int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.most(r, now, P.usage)
}

func (s *allState[S, P]) set(r *rule, now, used int64) {
	for i := range s.parts {
		P(&s.parts[i]).set(&r.parts[i], now, used)
	}
}

// matches yields i and j for each part j of `to` that has a part i of r
// (its "from") with the same label.
func (r *rule) matches(to *rule) iter.Seq2[int, int] {
	return func(yield func(i, j int) bool) {
		for j := range to.parts {
			for i := range r.parts {
				if r.parts[i].label == to.parts[j].label && !yield(i, j) {
					return
				}
			}
		}
	}
}

// allOf is the registry of a limiter of policies made with AllOf whose
// parts keep states of type S.
type allOf[S any, P stateOf[S]] = registry[allState[S, P], *allState[S, P]]

// Combine returns the decision under p, a policy made with AllOf, of a
// request whose parts a store decided one by one: parts[i] is what part i
// of p.Parts() answers (for a denial, what it would answer without
// consuming). The decision is as the in-memory limiter's ([Decision.Parts]);
// its Source and At are parts[0]'s. It is for stores that decide the parts
// themselves (redisstore); it returns an error when p is not made of
// len(parts) parts.
func Combine(p Policy, parts []Decision) (Decision, error) {
	r, err := combineRules.get(p, compile)
	switch {
	case err != nil:
		return Decision{}, err
	case p.parts == "" || len(r.parts) != len(parts):
		return Decision{}, fmt.Errorf("core: Combine: %v has %d parts, got %d decisions", p, len(r.parts), len(parts))
	}
	pv := make(partVerdicts, len(parts))
	admitted := true
	for i, d := range parts {
		wait := d.RetryAfter
		if d.Allowed {
			wait = d.Delay
		}
		pv[i] = verdict{allowed: d.Allowed, remaining: d.Remaining, reset: d.ResetAfter, wait: wait}
		admitted = admitted && d.Allowed
	}
	var d Decision
	r.fill(&d, pv.combine(admitted), &pv[0], 0)
	d.Source, d.At = parts[0].Source, parts[0].At
	return d, nil
}

// Refusal returns the denial of a cost n above the capacity of look's
// policy (ErrCostExceedsCapacity), made from look, the key's state as Peek
// reports it: no RetryAfter nor Delay, and under a policy made with AllOf
// each part whose capacity n exceeds refusing it too (Decision.Parts). The
// in-memory limiter refuses so; it is for the stores that look at the key
// themselves (redisstore).
func Refusal(look Decision, n int64) Decision {
	if parts := look.Parts(); parts != nil {
		for i, q := range look.Policy.Parts() {
			if n > q.Capacity() {
				parts[i].Allowed, parts[i].RetryAfter, parts[i].Delay = false, 0, 0
			}
		}
		look, _ = Combine(look.Policy, parts) // the parts of look's own policy
	}
	look.Allowed, look.RetryAfter, look.Delay = false, 0, 0
	return look
}

// combineRules keeps Combine's rules, by policy: compiling one decodes its
// parts and labels each (several allocations), on every decision of a store
// otherwise. A store's policies are few (its own, its plans').
var combineRules ruleCache
