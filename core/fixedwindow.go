package core

import "sync/atomic"

// fixedState is the per-key state of a fixed window, packed into one word
// so that an admission is one CompareAndSwap: the high 32 bits hold the low
// 32 bits of the window number (Unix time / Window, so windows are aligned to
// the epoch and every process agrees on the boundaries), the low 32 bits the
// count admitted in it (hence Limit <= MaxWindowLimit).
//
// Truncating the window number means a key idle for exactly a multiple of
// 2^32 windows (49 days of 1 ms windows, 136 years of 1 s windows) would see
// its old count again; the registry evicts a key one window after its last
// use, long before. The zero value is a key never seen.
type fixedState struct {
	w atomic.Int64
}

func packFixed(window, count int64) int64 {
	return int64(uint64(uint32(window))<<32 | uint64(uint32(count)))
}

// current returns the window a request at now counts in and the count
// already admitted there. A clock that stepped back into an earlier window
// stays in the stored one, so it cannot reopen a used-up window.
func (s *fixedState) current(r *rule, word, now int64) (window, count int64) {
	window = floorDiv(now, r.window)
	if word == 0 {
		return window, 0
	}
	ahead := int32(uint32(window) - uint32(word>>32))
	switch {
	case ahead > 0:
		return window, 0
	case ahead < 0:
		window -= int64(ahead) // the stored window, later than now's
	}
	return window, int64(uint32(word))
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
			d.remaining = r.limit - count
			d.reset = untilEnd
			d.retry = untilEnd
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
		if s.w.CompareAndSwap(word, packFixed(window, count+n)) {
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
	if word == 0 {
		return true
	}
	window := floorDiv(now, r.window)
	return int32(uint32(window)-uint32(word>>32)) > 0
}

func (s *fixedState) retire(r *rule, now int64, mode retireMode) bool {
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
	return s.w.CompareAndSwap(word, retired)
}
