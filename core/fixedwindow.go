package core

import "sync/atomic"

// fixedState is the per-key state of a fixed window, packed into one word
// so that an admission is one CompareAndSwap: the low bits hold the count
// admitted in the window (rule.countBits bits, just enough for Limit), the
// high bits the low bits of the window number (Unix time / Window, so windows
// are aligned to the epoch and every process agrees on the boundaries).
//
// The window number is kept in the remaining bits, which Validate makes
// enough for every window up to the end of int64 Unix nanoseconds and a
// sign (fixedWindowBits), so two window numbers never alias, however long a
// key goes unswept. The zero value is a key never seen; a stored count is
// never 0.
type fixedState struct {
	w atomic.Int64
}

func (r *rule) packFixed(window, count int64) int64 {
	return window<<r.countBits | count
}

// current returns the window a request at now counts in and the count
// already admitted there. A clock that stepped back into an earlier window
// stays in the stored one, so it cannot reopen a used-up window.
func (s *fixedState) current(r *rule, word, now int64) (window, count int64) {
	window = floorDiv(now, r.window)
	if word == 0 {
		return window, 0
	}
	// The stored window's distance behind now's, sign-extended from the
	// bits the word keeps of it.
	behind := (window<<r.countBits - word&^r.countMask) >> r.countBits
	switch {
	case behind > 0:
		return window, 0
	case behind < 0:
		window -= behind // the stored window, later than now's
	}
	return window, word & r.countMask
}

func (s *fixedState) init(*rule) {}

func (s *fixedState) decide(r *rule, now, n int64, consume bool) (verdict, bool) {
	for {
		// A fresh verdict each attempt: a lost CompareAndSwap must not
		// leave Allowed set for the retry.
		var d verdict
		word := s.w.Load()
		if word == retired {
			return verdict{}, false
		}
		window, count := s.current(r, word, now)
		untilEnd := durationNs((window+1)*r.window - now)
		if count+n > r.limit {
			d.remaining = max(0, r.limit-count)
			d.reset = untilEnd
			d.wait = untilEnd
			return d, true
		}
		d.allowed = true
		if !consume {
			d.remaining = r.limit - count
			if count > 0 {
				d.reset = untilEnd
			}
			return d, true
		}
		if s.w.CompareAndSwap(word, r.packFixed(window, count+n)) {
			d.remaining = r.limit - count - n
			d.reset = untilEnd
			return d, true
		}
	}
}

func (s *fixedState) idle(r *rule, now int64) bool {
	word := s.w.Load()
	if word == retired {
		return false
	}
	_, count := s.current(r, word, now)
	return count == 0
}

func (s *fixedState) retire(r *rule, now int64, mode retireMode, into *fixedState) bool {
	for {
		word := s.w.Load()
		if word == retired {
			return false
		}
		if mode != retireAlways {
			_, count := s.current(r, word, now)
			if count > 0 && (mode == retireIdle || count+1 > r.limit) {
				return false
			}
		}
		if testBeforeRetire != nil {
			testBeforeRetire()
		}
		if s.w.CompareAndSwap(word, retired) {
			if into != nil {
				into.raise(r, now, word)
			}
			return true
		}
	}
}

func (s *fixedState) absorb(r *rule, now int64, src *fixedState) {
	if word := src.w.Load(); word != retired {
		s.raise(r, now, word)
	}
}

// raise makes s at least as used as the state word, seen at now: the later
// window wins, and in the same window the larger count. A count in a window
// before now's is no use to anyone. Only states no lock-free reader can
// reach are raised, under the shard's mutex.
func (s *fixedState) raise(r *rule, now, word int64) {
	w2, c2 := s.current(r, word, now)
	if c2 == 0 {
		return
	}
	w1, c1 := s.current(r, s.w.Load(), now)
	if c1 == 0 || w2 > w1 || (w2 == w1 && c2 > c1) {
		s.w.Store(r.packFixed(w2, c2))
	}
}

// convert carries the count of the key's current window into to's current
// window (the stored window itself when both rules have the same window),
// even above to's Limit, so that a detour through a smaller limit gives
// nothing back.
func (s *fixedState) convert(from, to *rule, now int64, src *fixedState, retire bool) bool {
	for {
		word := src.w.Load()
		if word == retired {
			return false
		}
		window, count := src.current(from, word, now)
		var next int64
		if count > 0 {
			if from.window != to.window {
				window = floorDiv(now, to.window)
			}
			next = to.packFixed(window, min(count, to.countMask))
		}
		s.w.Store(next)
		if !retire || src.w.CompareAndSwap(word, retired) {
			return true
		}
	}
}

// usage is the count of the current window.
func (s *fixedState) usage(r *rule, now int64) int64 {
	word := s.w.Load()
	if word == retired {
		return 0
	}
	_, count := s.current(r, word, now)
	return count
}

func (s *fixedState) set(r *rule, now, used int64) {
	if used > 0 {
		s.w.Store(r.packFixed(floorDiv(now, r.window), used))
	}
}
