package core

import (
	"math"
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
//	the B buckets k-B+1..k hold at most Limit                  (the trailing window)
//	the B+1 buckets k-B..k hold at most Limit + ceil(Limit/B)  (the bucket before it too)
//
// The first is the usual bucketed sliding window; alone it admits up to
// 2*Limit in an interval of one Window (Limit at the very end of one bucket,
// Limit again when that bucket drops out B-1 buckets later). The second
// closes that gap: any interval of length Window meets at most B+1 buckets,
// so it holds at most Limit + ceil(Limit/B) (Policy.MaxInWindow). A client
// sending steadily at exactly Limit per Window satisfies both: B+1 buckets
// span Window*(1+1/B), in which it sends at most Limit + ceil(Limit/B).
//
// The counters are several words that must be read and written together, so
// unlike the one-word algorithms each key has a small mutex; see "Design
// notes" in doc.go for the measurement behind that choice.
type slidingState struct {
	mu     sync.Mutex
	head   int64    // newest bucket number written; 0 for a key never seen
	total  int64    // sum of counts, kept as buckets are added and dropped
	dead   bool     // retired (see registry.go)
	counts []uint32 // by bucket number modulo len(counts)
}

func (s *slidingState) init(r *rule) { s.counts = make([]uint32, r.ring) }

// advance moves the ring to bucket k, zeroing the buckets that fell out.
// The caller holds s.mu.
func (s *slidingState) advance(r *rule, k int64) {
	if k <= s.head {
		return
	}
	if s.head == 0 || k-s.head >= r.ring {
		clear(s.counts)
		s.total = 0
	} else {
		for b := s.head + 1; b <= k; b++ {
			s.total -= int64(s.counts[b%r.ring])
			s.counts[b%r.ring] = 0
		}
	}
	s.head = k
}

// sums returns the counts of the trailing B buckets and of all B+1, at the
// bucket the ring was advanced to.
func (s *slidingState) sums(r *rule) (trailing, all int64) {
	oldest := int64(s.counts[(s.head+1)%r.ring]) // bucket head-B
	return s.total - oldest, s.total
}

func (s *slidingState) decide(r *rule, now, n int64, consume bool) (verdict, bool) {
	var d verdict
	k := floorDiv(now, r.interval)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return d, false
	}
	// A clock that stepped back counts in the newest bucket seen, so it
	// cannot revive buckets that already dropped out.
	k = max(k, s.head)
	s.advance(r, k)
	trailing, all := s.sums(r)
	if trailing+n > r.limit || all+n > r.cap2 {
		d.remaining = r.remaining(trailing, all)
		d.reset = s.untilFull(r, now)
		d.wait = s.untilAdmits(r, now, n)
		return d, true
	}
	d.allowed = true
	if consume {
		s.counts[k%r.ring] += uint32(n)
		s.total += n
		trailing += n
		all += n
	}
	d.remaining = r.remaining(trailing, all)
	d.reset = s.untilFull(r, now)
	return d, true
}

func (r *rule) remaining(trailing, all int64) int64 {
	return max(0, min(r.limit-trailing, r.cap2-all))
}

// untilFull returns the time from now until the key is back to its full
// quota, with no further traffic: until the newest non-empty bucket m has
// left the trailing window (at bucket m+B), and also left the B+1 buckets
// (at m+B+1) if it holds more than the Limit/B that the wider sum allows
// beyond Limit. Buckets only drop out at bucket boundaries.
func (s *slidingState) untilFull(r *rule, now int64) time.Duration {
	if s.total == 0 {
		return 0
	}
	m, i := s.head, s.head%r.ring // bucket m is counts[i]
	for s.counts[i] == 0 {
		m--
		if i == 0 {
			i = r.ring
		}
		i--
	}
	end := m + r.buckets
	if int64(s.counts[i]) > r.cap2-r.limit {
		end++
	}
	return durationNs(end*r.interval - now)
}

// untilAdmits returns the time from now until a request of cost n would be
// admitted, with no further traffic: the start of the first future bucket
// at which both sums leave room for n.
func (s *slidingState) untilAdmits(r *rule, now, n int64) time.Duration {
	trailing, all := s.sums(r)
	// At bucket head+j, bucket head-B+j-1 leaves the B+1 sum and bucket
	// head-B+j leaves the trailing sum. Bucket head-B is counts[i].
	i := (s.head + 1) % r.ring
	for j := int64(1); j < r.ring; j++ {
		all -= int64(s.counts[i])
		if i++; i == r.ring {
			i = 0
		}
		trailing -= int64(s.counts[i])
		if trailing+n <= r.limit && all+n <= r.cap2 {
			return durationNs((s.head+j)*r.interval - now)
		}
	}
	// Every bucket has left by head+B+1; n <= Limit then always passes.
	return durationNs((s.head+r.ring)*r.interval - now)
}

// idle is called with the shard's lock held, which excludes retire; decide
// may run concurrently, hence the state's own lock.
func (s *slidingState) idle(r *rule, now int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.isIdle(r, now)
}

func (s *slidingState) untilIdle(r *rule, now int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead || s.head == 0 {
		return 0
	}
	return (s.head+r.ring)*r.interval - now
}

func (s *slidingState) isIdle(r *rule, now int64) bool {
	return !s.dead && (s.head == 0 || floorDiv(now, r.interval)-s.head >= r.ring)
}

func (s *slidingState) retire(r *rule, now int64, mode retireMode, into *slidingState) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return false
	}
	if mode != retireAlways && !s.isIdle(r, now) {
		if mode == retireIdle {
			return false
		}
		s.advance(r, max(floorDiv(now, r.interval), s.head))
		trailing, all := s.sums(r)
		if trailing+1 > r.limit || all+1 > r.cap2 {
			return false
		}
	}
	s.dead = true
	if into != nil {
		into.absorbLocked(r, now, s)
	}
	return true
}

func (s *slidingState) absorb(r *rule, now int64, src *slidingState) {
	src.mu.Lock()
	defer src.mu.Unlock()
	if !src.dead {
		s.absorbLocked(r, now, src)
	}
}

// absorbLocked makes s at least as used as src, bucket by bucket, from the
// later of the two heads and now's bucket on; the caller holds src.mu. Only
// states no lock-free reader can reach absorb, under the shard's mutex.
func (s *slidingState) absorbLocked(r *rule, now int64, src *slidingState) {
	if src.head == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := max(floorDiv(now, r.interval), s.head, src.head)
	s.advance(r, k)
	for b := k - r.buckets; b <= k; b++ {
		if b > src.head || src.head-b >= r.ring {
			continue // src holds nothing for bucket b
		}
		if c := src.counts[b%r.ring]; c > s.counts[b%r.ring] {
			s.total += int64(c - s.counts[b%r.ring])
			s.counts[b%r.ring] = c
		}
	}
}

// convert counts each of the key's buckets under from in the newest of
// to's buckets that it overlaps, but not after now's (see "Policies per
// call" in doc.go): every request lies in that bucket or an earlier one,
// so none counts for less time than it should, and a bucket older than
// to's ring drops out. With the same Window and Buckets the buckets stay
// as they are. A bucket's count above what a counter holds is kept at the
// most it holds, which still denies. Now is taken no earlier than the
// start of the newest bucket written (a caller whose clock reading is
// behind another's).
func (s *slidingState) convert(from, to *rule, now int64, src *slidingState, retire bool) bool {
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.dead {
		return false
	}
	if src.head != 0 {
		at := max(now, src.head*from.interval)
		src.advance(from, floorDiv(at, from.interval))
		k := floorDiv(at, to.interval)
		for b := max(src.head-from.buckets, 1); b <= src.head; b++ {
			c := src.counts[b%from.ring]
			j := min(floorDiv((b+1)*from.interval-1, to.interval), k)
			if c == 0 || k-j >= to.ring {
				continue
			}
			sum := min(uint64(s.counts[j%to.ring])+uint64(c), math.MaxUint32)
			s.total += int64(sum) - int64(s.counts[j%to.ring])
			s.counts[j%to.ring] = uint32(sum)
		}
		if s.total > 0 {
			s.head = k
		}
	}
	src.dead = retire
	return true
}

// usage is what the trailing window counts.
func (s *slidingState) usage(r *rule, now int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead || s.head == 0 {
		return 0
	}
	s.advance(r, max(floorDiv(now, r.interval), s.head))
	trailing, _ := s.sums(r)
	return trailing
}

func (s *slidingState) set(r *rule, now, used int64) {
	if used > 0 {
		s.head = floorDiv(now, r.interval)
		s.counts[s.head%r.ring] = uint32(used)
		s.total = used
	}
}
