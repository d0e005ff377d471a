package core

import (
	"sync"
	"time"
)

// slidingState is the per-key state of a sliding window: a ring of
// Buckets+1 counters, each counting the requests admitted in one bucket of
// width Window/Buckets (buckets aligned to the Unix epoch), and the number of
// the newest bucket written. Expired buckets are zeroed as time moves on.
//
// A request in bucket k is admitted when both of these stay true:
//
//	the B buckets k-B+1..k hold at most Limit            (the trailing window)
//	the B+1 buckets k-B..k hold at most Limit + Limit/B  (the bucket before it too)
//
// The first is the usual bucketed sliding window; alone it admits up to
// 2*Limit in an interval of one Window (Limit at the very end of one bucket,
// Limit again when that bucket drops out B-1 buckets later). The second
// closes that gap: any interval of length Window meets at most B+1 buckets,
// so it holds at most Limit*(1+1/B). A client sending steadily at exactly
// Limit per Window satisfies both.
//
// The counters are several words that must be read and written together, so
// unlike the one-word algorithms each key has a small mutex; see "Design
// notes" in doc.go for the measurement behind that choice.
type slidingState struct {
	mu     sync.Mutex
	head   int64    // newest bucket number written; 0 for a key never seen
	counts []uint32 // by bucket number modulo len(counts)
}

func newSlidingState(r *rule) *slidingState {
	return &slidingState{counts: make([]uint32, r.ring)}
}

// advance moves the ring to bucket k, zeroing the buckets that fell out.
// The caller holds s.mu.
func (s *slidingState) advance(r *rule, k int64) {
	if k <= s.head {
		return
	}
	if s.head == 0 || k-s.head >= r.ring {
		clear(s.counts)
	} else {
		for b := s.head + 1; b <= k; b++ {
			s.counts[b%r.ring] = 0
		}
	}
	s.head = k
}

// sums returns the counts of the trailing B buckets and of all B+1, at the
// bucket the ring was advanced to.
func (s *slidingState) sums(r *rule) (trailing, all int64) {
	oldest := int64(s.counts[(s.head+1)%r.ring]) // bucket head-B
	for _, c := range s.counts {
		all += int64(c)
	}
	return all - oldest, all
}

func (s *slidingState) decide(r *rule, now, n int64, consume bool) Decision {
	d := r.decision()
	k := floorDiv(now, r.interval)
	s.mu.Lock()
	defer s.mu.Unlock()
	// A clock that stepped back counts in the newest bucket seen, so it
	// cannot revive buckets that already dropped out.
	k = max(k, s.head)
	s.advance(r, k)
	trailing, all := s.sums(r)
	if trailing+n > r.limit || all+n > r.cap2 {
		d.Remaining = r.remaining(trailing, all)
		d.ResetAfter = s.until(r, now, 0, r.limit)
		d.RetryAfter = s.until(r, now, n, n)
		return d
	}
	d.Allowed = true
	if consume {
		s.counts[k%r.ring] += uint32(n)
		trailing += n
		all += n
	}
	d.Remaining = r.remaining(trailing, all)
	d.ResetAfter = s.until(r, now, 0, r.limit)
	return d
}

func (r *rule) remaining(trailing, all int64) int64 {
	return max(0, min(r.limit-trailing, r.cap2-all))
}

// until returns the time from now until, with no further traffic, a request
// of cost n is admitted and at least want unit requests remain after it
// (n=0, want=Limit: until the key is back to full quota). Buckets only drop
// out at bucket boundaries, so the answer is the start of a future bucket.
func (s *slidingState) until(r *rule, now, n, want int64) time.Duration {
	trailing, all := s.sums(r)
	ok := func() bool {
		return trailing+n <= r.limit && all+n <= r.cap2 && r.remaining(trailing+n, all+n)+n >= want
	}
	if ok() {
		return 0
	}
	// At bucket head+j, bucket head-B+j leaves the B+1 sum and bucket
	// head-B+j+1 leaves the trailing sum.
	for j := int64(1); j <= r.ring; j++ {
		all -= int64(s.counts[(s.head-r.buckets+j-1+r.ring*2)%r.ring])
		if j < r.ring {
			trailing -= int64(s.counts[(s.head-r.buckets+j+r.ring*2)%r.ring])
		} else {
			trailing = 0
		}
		if ok() {
			return durationNs((s.head+j)*r.interval - now)
		}
	}
	return durationNs((s.head+r.ring)*r.interval - now) // unreachable for n <= Limit
}

func (s *slidingState) idle(r *rule, now int64) bool {
	return s.head == 0 || floorDiv(now, r.interval)-s.head >= r.ring
}
