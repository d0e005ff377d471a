package core

import "sync/atomic"

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

// decide applies a request of cost n at now, consuming it when consume is
// set and the request is admitted. A clock that steps backwards cannot mint
// capacity: the state is measured from max(tat, now).
func (s *gcraState) decide(r *rule, now, n int64, consume bool) Decision {
	d := r.decision()
	for {
		tat := s.tat.Load()
		base := max(tat, now)
		next := base + n*r.interval
		if next-now > r.tau {
			d.Remaining = max(0, (r.tau-(base-now))/r.interval)
			d.ResetAfter = durationNs(base - now)
			d.RetryAfter = durationNs(next - r.tau - now)
			return d
		}
		d.Allowed = true
		if !consume {
			d.Remaining = (r.tau - (base - now)) / r.interval
			d.ResetAfter = durationNs(base - now)
			return d
		}
		if s.tat.CompareAndSwap(tat, next) {
			d.Remaining = (r.tau - (next - now)) / r.interval
			d.ResetAfter = durationNs(next - now)
			if r.delay {
				// Leaky bucket: the request leaves when the ones
				// queued before it have left.
				d.Delay = durationNs(base - now)
			}
			return d
		}
	}
}

// idle reports whether the state is the same as a new key's at now.
func (s *gcraState) idle(_ *rule, now int64) bool { return s.tat.Load() <= now }
