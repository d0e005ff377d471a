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
// unlike the one-word algorithms each key has a small mutex; see docs/design.md,
// "core: the seed's counter optimisations", for the measurement behind that
// choice.
type slidingState struct {
	mu     sync.Mutex
	dead   bool     // retired (see registry.go)
	at     uint16   // head modulo len(counts), kept so as not to divide
	head   int64    // newest bucket number written; 0 for a key never seen
	total  int64    // sum of counts, kept as buckets are added and dropped
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
		s.at = uint16(k % r.ring)
	} else {
		for b := s.head; b < k; b++ {
			i := r.after(int64(s.at))
			s.total -= int64(s.counts[i])
			s.counts[i] = 0
			s.at = uint16(i)
		}
	}
	s.head = k
}

// after returns the counter after i in the ring.
func (r *rule) after(i int64) int64 {
	if i++; i == r.ring {
		return 0
	}
	return i
}

// sums returns the counts of the trailing B buckets and of all B+1, at the
// bucket the ring was advanced to.
func (s *slidingState) sums(r *rule) (trailing, all int64) {
	oldest := int64(s.counts[r.after(int64(s.at))]) // bucket head-B
	return s.total - oldest, s.total
}

func (s *slidingState) decide(r *rule, now, n int64, consume bool) (verdict, *verdict, bool) {
	var d verdict
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return d, nil, false
	}
	// The ring moves to now's bucket, dividing only when that is not the
	// newest bucket written. A clock that stepped back counts in the
	// newest bucket, so it cannot revive buckets that already dropped out.
	if now-s.head*r.interval >= r.interval {
		s.advance(r, floorDiv(now, r.interval))
	}
	trailing, all := s.sums(r)
	d.allowed = trailing+n <= r.limit && all+n <= r.cap2
	if !d.allowed {
		d.wait = s.untilAdmits(r, now, n)
	} else if consume {
		s.counts[s.at] += uint32(n)
		s.total += n
		trailing += n
		all += n
	}
	d.remaining = r.remaining(trailing, all)
	d.reset = s.untilFull(r, now)
	return d, nil, true
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
	m, i := s.head, int64(s.at) // bucket m is counts[i]
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
	i := r.after(int64(s.at))
	for j := int64(1); j < r.ring; j++ {
		all -= int64(s.counts[i])
		i = r.after(i)
		trailing -= int64(s.counts[i])
		if trailing+n <= r.limit && all+n <= r.cap2 {
			return durationNs((s.head+j)*r.interval - now)
		}
	}
	// Every bucket has left by head+B+1; n <= Limit then always passes.
	return durationNs((s.head+r.ring)*r.interval - now)
}

// untilIdle is called with the shard's lock held, which excludes retire;
// decide may run concurrently, hence the state's own lock.
func (s *slidingState) untilIdle(r *rule, now int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.untilIdleLocked(r, now)
}

func (s *slidingState) untilIdleLocked(r *rule, now int64) int64 {
	if s.head == 0 {
		return 0
	}
	return (s.head+r.ring)*r.interval - now
}

func (s *slidingState) retire(r *rule, now int64, mode retireMode, into *slidingState) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if mode != retireAlways && s.untilIdleLocked(r, now) > 0 {
		if mode == retireIdle {
			return false
		}
		s.advance(r, floorDiv(now, r.interval))
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
	s.absorbLocked(r, now, src)
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
func (s *slidingState) convert(from, to *rule, now int64, src *slidingState) {
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.head == 0 {
		return
	}
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
		s.head, s.at = k, uint16(k%to.ring)
	}
}

// admitsAt returns the earliest instant, not before now, at which the
// state, decided under from and left alone, converted to `to` then (see
// convert) admits a cost of n. Each bucket b of the state counts in to's
// trailing Buckets until t1(b), then in the bucket before them until
// t2(b): until it has left from's ring, or to's bucket holding its last
// instant has left them. Both instants grow with b, so one pass over the
// buckets in order meets them in order, and the sums only fall: the first
// instant at which they leave room for n is the one (once every bucket
// has left, any n up to Limit fits). The bucket before the trailing ones
// counts at most 2^32-1 (a counter of to's), as in convert; a trailing
// bucket above that denies either way.
func (s *slidingState) admitsAt(from, to *rule, now, n int64) int64 {
	if n == fullQuota {
		n = to.capacity
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.head == 0 {
		return now
	}
	at := max(now, s.head*from.interval)
	s.advance(from, floorDiv(at, from.interval))
	// leaves is when bucket b leaves from's ring, or to's bucket holding
	// its last instant leaves to's trailing k buckets.
	leaves := func(b, k int64) int64 {
		return min((b+from.ring)*from.interval, (floorDiv((b+1)*from.interval-1, to.interval)+k)*to.interval)
	}
	count := func(b int64) int64 { return int64(s.counts[b%from.ring]) }
	held := func(b int64) int64 { // the first bucket from b on that holds requests
		for b <= s.head && count(b) == 0 {
			b++
		}
		return b
	}
	// Buckets i1 on are in the trailing sum, i2 on (to i1) in older.
	i1 := held(max(s.head-from.buckets, 1))
	i2 := i1
	var trailing, older int64
	for b := i1; b <= s.head; b++ {
		trailing += count(b)
	}
	for t := at; ; {
		e1, e2 := int64(math.MaxInt64), int64(math.MaxInt64)
		if i1 <= s.head {
			e1 = leaves(i1, to.buckets)
		}
		if i2 < i1 {
			e2 = leaves(i2, to.ring)
		}
		if e := min(e1, e2); e > t { // every bucket to leave by t has
			if trailing+n <= to.limit && trailing+min(older, math.MaxUint32)+n <= to.cap2 {
				if t == at {
					return now
				}
				return t
			}
			t = e
		}
		if e1 <= e2 {
			trailing, older, i1 = trailing-count(i1), older+count(i1), held(i1+1)
		} else {
			older, i2 = older-count(i2), held(i2+1)
		}
	}
}

// usage is what the trailing window counts.
func (s *slidingState) usage(r *rule, now int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.head == 0 {
		return 0
	}
	s.advance(r, floorDiv(now, r.interval))
	trailing, _ := s.sums(r)
	return trailing
}

func (s *slidingState) set(r *rule, now, used int64) {
	if used > 0 {
		s.head = floorDiv(now, r.interval)
		s.at = uint16(s.head % r.ring)
		s.counts[s.at] = uint32(used)
		s.total = used
	}
}
