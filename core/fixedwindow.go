package core

import (
	"sync/atomic"
	"time"
)

// fixedState is the per-key state of a fixed window, packed into one word
// so that an admission is one CompareAndSwap: the low bits hold the count
// admitted in the window (rule.countBits bits), the high bits the window
// number (Unix time / Window, so windows are aligned to the epoch and every
// process agrees on the boundaries), whole and signed: Validate leaves it
// enough bits for every window up to the end of int64 Unix nanoseconds
// (fixedWindowBits), so two window numbers never alias, however long a key
// goes unswept. The zero value is a key never seen; a stored count is never
// 0.
type fixedState struct {
	w atomic.Int64
}

func (r *rule) packFixed(window, count int64) int64 {
	return window<<r.countBits | count
}

// current returns the window a request at now counts in and the count
// already admitted there: the stored window while now is in it, or before
// it (a clock that stepped back cannot reopen a used-up window), else now's
// window, empty. So the division is paid only when the window rolls over.
func (s *fixedState) current(r *rule, word, now int64) (window, count int64) {
	window = word >> r.countBits
	if word != 0 && now-window*r.window < r.window {
		return window, word & r.countMask
	}
	return floorDiv(now, r.window), 0
}

func (s *fixedState) init(*rule) {}

func (s *fixedState) decide(r *rule, now, n int64, consume bool) (verdict, *verdict, bool) {
	for {
		word := s.w.Load()
		if word == retired {
			return verdict{}, nil, false
		}
		window, count := s.current(r, word, now)
		untilEnd := durationNs((window+1)*r.window - now)
		switch {
		case count+n > r.limit:
			return verdict{remaining: max(0, r.limit-count), reset: untilEnd, wait: untilEnd}, nil, true
		case !consume && count == 0:
			return verdict{allowed: true, remaining: r.limit}, nil, true
		case !consume:
			return verdict{allowed: true, remaining: r.limit - count, reset: untilEnd}, nil, true
		case s.w.CompareAndSwap(word, r.packFixed(window, count+n)):
			return verdict{allowed: true, remaining: r.limit - count - n, reset: untilEnd}, nil, true
		}
	}
}

// live returns the window a state word counts in and its count, and
// whether that window is now's, the one before it (whose count a
// conversion may still carry into another policy's window: see convert)
// or a later one. A word that is not live is the same as a new key's.
func (r *rule) live(word, now int64) (window, count int64, ok bool) {
	if word == 0 {
		return 0, 0, false
	}
	window = word >> r.countBits
	return window, word & r.countMask, window >= floorDiv(now, r.window)-1
}

func (s *fixedState) untilIdle(r *rule, now int64) int64 {
	window, _, live := r.live(s.w.Load(), now)
	if !live {
		return 0
	}
	return (window+2)*r.window - now
}

func (s *fixedState) retire(r *rule, now int64, mode retireMode, into *fixedState) bool {
	word, ok := retireWord(&s.w, func(word int64) bool {
		switch mode {
		case retireIdle:
			_, _, live := r.live(word, now)
			return live
		case retireUnlimited:
			_, count := s.current(r, word, now)
			return count+1 > r.limit
		}
		return false
	})
	if ok && into != nil {
		into.raise(r, now, word)
	}
	return ok
}

func (s *fixedState) absorb(r *rule, now int64, src *fixedState) {
	s.raise(r, now, src.w.Load())
}

// raise makes s at least as used as the state word, seen at now: the later
// window wins, and in the same window the larger count. A word that is not
// live is no use to anyone. Only states no lock-free reader can reach are
// raised, under the shard's mutex.
func (s *fixedState) raise(r *rule, now, word int64) {
	w2, c2, ok := r.live(word, now)
	if !ok {
		return
	}
	w1, c1, ok := r.live(s.w.Load(), now)
	if !ok || w2 > w1 || (w2 == w1 && c2 > c1) {
		s.w.Store(r.packFixed(w2, c2))
	}
}

// convert counts, in to's current window, what might still lie in it of
// the requests the state counted under from (see "Policies per call" in
// doc.go): see carry.
func (s *fixedState) convert(from, to *rule, now int64, src *fixedState) {
	if k, n := src.carry(from, to, now); n > 0 {
		s.w.Store(to.packFixed(k, n))
	}
}

// carry returns to's current window and the count the state, decided
// under from, carries into it at now: the count of the stored window if
// that window overlaps to's current one, even when it has ended by from's
// reckoning (it is live: the requests in a window before that are all
// more than one Window old); and from's Limit for the window before the
// stored one, which the state no longer knows, when that window overlaps
// too and the stored window is from's current one. A count above what
// to's word holds (or above 2^32-1) is kept at that most, which still
// denies. Both current windows are taken at the later of now and the
// start of the stored window (a caller whose clock reading is behind
// another's).
func (s *fixedState) carry(from, to *rule, now int64) (k, n int64) {
	window, count, live := from.live(s.w.Load(), now)
	if !live {
		return 0, 0
	}
	start := window * from.window
	at := max(now, start)
	k = floorDiv(at, to.window)
	lo, hi := k*to.window, (k+1)*to.window
	if start < hi && start+from.window > lo {
		n = count
	}
	if window == floorDiv(at, from.window) && start-from.window < hi && start > lo {
		n += from.limit
	}
	return k, min(n, maxFixedLimit(time.Duration(to.window)))
}

// admitsAt returns the earliest instant, not before now, at which the
// state, decided under from and left alone, carried into to's window then
// leaves room for a cost of n. Each term of the carry only stops counting
// as time passes: from's Limit when the stored window ends (end) or to's
// window holding its start does, its count at to's first window from end
// on, and everything two windows after its start (it is no longer live);
// so the earliest of these instants (or now) that leaves room is the one.
func (s *fixedState) admitsAt(from, to *rule, now, n int64) int64 {
	if n == fullQuota {
		n = to.capacity
	}
	window, _, live := from.live(s.w.Load(), now)
	if !live {
		return now
	}
	start := window * from.window
	end := start + from.window
	first := end + from.window
	next := func(t int64) int64 { return (floorDiv(t, to.window) + 1) * to.window } // to's first window after t's
	for _, t := range [...]int64{now, end, next(max(now, start)), next(end - 1)} {
		if _, c := s.carry(from, to, t); t >= now && t < first && c+n <= to.limit {
			first = t
		}
	}
	return first
}

// usage is the count of the current window.
func (s *fixedState) usage(r *rule, now int64) int64 {
	_, count := s.current(r, s.w.Load(), now)
	return count
}

func (s *fixedState) set(r *rule, now, used int64) {
	if used > 0 {
		s.w.Store(r.packFixed(floorDiv(now, r.window), used))
	}
}
