package core

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// gcraState is the whole per-key state of a token or leaky bucket: one word,
// the theoretical arrival time (TAT) of the Generic Cell Rate Algorithm, in
// Unix nanoseconds. The bucket is full when tat <= now; each unit of cost
// pushes tat one interval (Window/Limit) further, and a request is admitted
// while tat stays within tau (Burst intervals) of now. Integer nanoseconds
// throughout: no float drift, and one CompareAndSwap per admitted request.
//
// The zero value is a full bucket.
type gcraState struct {
	tat atomic.Int64
}

// retired is a state word no decision accepts (see registry.go). It is not
// a time any clock gives, nor a packed fixed-window word (whose count is >= 1).
const retired = math.MinInt64

func (s *gcraState) init(*rule) {}

// decide applies a request of cost n at now, consuming it when consume is
// set and the request is admitted. A clock that steps backwards cannot mint
// capacity: the state is measured from max(tat, now).
func (s *gcraState) decide(r *rule, now, n int64, consume bool) (verdict, *verdict, bool) {
	for {
		tat := s.tat.Load()
		if tat == retired {
			return verdict{}, nil, false
		}
		base := max(tat, now)
		next := base + n*r.interval
		switch {
		case next-now > r.tau:
			return verdict{remaining: max(0, (r.tau-(base-now))/r.interval), reset: durationNs(base - now), wait: durationNs(next - r.tau - now)}, nil, true
		case !consume:
			return verdict{allowed: true, remaining: (r.tau - (base - now)) / r.interval, reset: durationNs(base - now)}, nil, true
		case s.tat.CompareAndSwap(tat, next):
			d := verdict{allowed: true, remaining: (r.tau - (next - now)) / r.interval, reset: durationNs(next - now)}
			if r.delay {
				// Leaky bucket: the request leaves when the ones
				// queued before it have left.
				d.wait = durationNs(base - now)
			}
			return d, nil, true
		}
	}
}

func (s *gcraState) untilIdle(_ *rule, now int64) int64 { return s.tat.Load() - now }

func (s *gcraState) retire(r *rule, now int64, mode retireMode, into *gcraState) bool {
	tat, ok := retireWord(&s.tat, func(tat int64) bool {
		// Kept: a key in use (retireIdle), or one a unit request would
		// find limited (retireUnlimited).
		return mode == retireIdle && tat > now || mode == retireUnlimited && max(tat, now)+r.interval-now > r.tau
	})
	if ok && into != nil {
		into.raise(tat)
	}
	return ok
}

// retireWord sets a one-word state to retired unless it is already or keep
// says the word it holds must stay, retrying when a concurrent decision
// changes it first; it returns the word it retired.
func retireWord(w *atomic.Int64, keep func(word int64) bool) (int64, bool) {
	for {
		word := w.Load()
		if word == retired || keep(word) {
			return 0, false
		}
		if testBeforeRetire != nil {
			testBeforeRetire()
		}
		if w.CompareAndSwap(word, retired) {
			return word, true
		}
	}
}

// absorb makes s at least as used as src: a TAT is a deadline, so the later
// of the two is the more used state at every instant.
func (s *gcraState) absorb(_ *rule, _ int64, src *gcraState) {
	s.raise(src.tat.Load()) // retired, the earliest of words, raises nothing
}

// raise moves s's TAT to tat if that is later. Only states that no
// lock-free reader can reach are raised (a shard's inherited state, a new
// entry), under the shard's mutex.
func (s *gcraState) raise(tat int64) {
	if tat > s.tat.Load() {
		s.tat.Store(tat)
	}
}

// convert keeps the debt (tat - now, the units taken and not yet
// refilled, or queued and not yet served) in units of cost, rescaled from
// from's interval to to's, rounded up to the nanosecond so that a
// conversion never adds capacity, and at most MaxSpan, which still denies
// every request. Moved to a delaying leaky bucket, a key keeps the
// requests it has queued at their instants and schedules new ones after
// them: its TAT never moves earlier. The TAT is then the later of the
// queue's end and its debt rescaled, and one word cannot tell which, so a
// key moved back and forth between two rates without admitting would
// have its debt multiplied by their ratio on each trip: a denial leaves
// the key unconverted (see registry.move), and a conversion kept
// is followed by an admission.
func (s *gcraState) convert(from, to *rule, now int64, src *gcraState) {
	tat := src.tat.Load()
	next := tat // a full bucket under any rate, or the same rate
	if tat > now && from.interval != to.interval {
		q, exact := mulDiv(tat-now, to.interval, from.interval)
		if !exact {
			q++
		}
		next = now + min(q, maxSpan)
	}
	if to.delay {
		next = max(next, tat)
	}
	s.tat.Store(next)
}

// mulDiv returns x·num/den rounded down, at most 2^62, and whether it
// was exact (x >= 0, num >= 0, den > 0).
func mulDiv(x, num, den int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(x), uint64(num))
	if hi >= uint64(den) {
		return 1 << 62, false
	}
	q, rem := bits.Div64(hi, lo, uint64(den))
	return int64(min(q, 1<<62)), rem == 0
}

// admitsAt returns the earliest instant, not before now, at which the
// state, decided under from and left alone (refilling at from's rate),
// converted to `to` then (see convert) admits a cost of n: when its debt
// x = tat-t, rescaled, ceil(x·to/from intervals), leaves room for n under
// to's tau, that is when x <= floor((tau - n·interval)·from/to), and for
// a delaying leaky bucket also x <= tau - n·interval.
func (s *gcraState) admitsAt(from, to *rule, now, n int64) int64 {
	if n == fullQuota {
		n = to.capacity
	}
	room := to.tau - n*to.interval
	slack, _ := mulDiv(room, from.interval, to.interval)
	if to.delay {
		slack = min(slack, room)
	}
	return max(now, s.tat.Load()-slack)
}

// usage is the tokens taken and not yet refilled, rounded up.
func (s *gcraState) usage(r *rule, now int64) int64 {
	tat := s.tat.Load()
	if tat <= now {
		return 0
	}
	return ceilDiv(tat-now, r.interval)
}

func (s *gcraState) set(r *rule, now, used int64) {
	if used > 0 {
		s.tat.Store(now + used*r.interval)
	}
}
