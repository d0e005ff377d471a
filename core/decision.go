package core

import (
	"errors"
	"strconv"
	"time"
	"unsafe"
)

// Decision is the answer to one request: whether it may pass and what the
// client should be told, filled in the same way by every algorithm and
// every store.
type Decision struct {
	Allowed    bool          // admitted, and its cost consumed
	Limit      int64         // Policy.Limit (X-RateLimit-Limit, IETF q)
	Remaining  int64         // unit-cost requests that would pass now, after this one (>= 0)
	ResetAfter time.Duration // until the full quota is back; 0 if it is
	// RetryAfter is, for a denial, the time until a request of the same
	// cost would be admitted, absent other traffic: waiting exactly
	// RetryAfter and retrying succeeds. 0 when allowed, and when the cost can
	// never be admitted (ErrCostExceedsCapacity).
	RetryAfter time.Duration
	Delay      time.Duration // an admitted leaky-bucket request's wait before being served
	Policy     Policy        // the policy that decided (IETF RateLimit-Policy)
	Source     Source        // where the decision was made
	nparts     uint8         // the length of parts: Policy is exported, and may be changed
	// At is the instant of the decision on the store's clock (the Redis
	// server's for redisstore): Settler.Settle finds by it the window a
	// cost was charged in.
	At    time.Time
	parts *verdict // a policy made with AllOf: its partVerdicts' first (see Parts)
}

// Parts returns, for a decision under a policy made with AllOf, the
// decision of each part, in the order of Policy.Parts(): what each part
// alone would say of the request (a part that admits has no RetryAfter,
// even when the request is denied by another). The decision itself is
// admitted when every part admits; its Limit, Remaining and ResetAfter
// are those of the part that binds, the one with the fewest remaining
// (then the longest wait, then the longest reset); its RetryAfter (or
// Delay) is the longest of the parts'. A cost above the policy's capacity
// (ErrCostExceedsCapacity) is not decided: its parts report the key's
// state as Peek would, except that each part whose capacity the cost
// exceeds denies it, with no RetryAfter. Parts returns nil for a policy
// of one part, and a new slice at each call.
func (d Decision) Parts() []Decision {
	if d.parts == nil {
		return nil
	}
	r, err := combineRules.get(d.Policy, compile)
	if err != nil {
		return nil // d.Policy was set to an invalid policy
	}
	pv := d.partVerdicts(r)
	if pv == nil {
		return nil // d.Policy is no longer the policy of d's parts
	}
	out := make([]Decision, len(r.parts))
	for i := range out {
		r.parts[i].fill(&out[i], pv[i], nil, 0)
		out[i].Source, out[i].At = d.Source, d.At
	}
	return out
}

// Source says where a Decision was made, so that adapters, hooks and
// metrics can tell a store's own answers from stand-ins.
type Source uint8

// The sources of a Decision.
const (
	SourceStore     Source = iota // the store itself (always, in memory)
	SourceDenyCache               // a remote store's local cache of the denials it returned
	SourceFallback                // a local limiter standing in for an unavailable store
)

// String returns "store", "deny-cache" or "fallback", as metrics label it.
func (s Source) String() string {
	if s <= SourceFallback {
		return [...]string{"store", "deny-cache", "fallback"}[s]
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// Errors returned by limiters. Test for them with errors.Is: the returned
// errors wrap them with the values involved.
var (
	// ErrInvalidCost: a cost <= 0, which consumes nothing and never adds
	// capacity.
	ErrInvalidCost = errors.New("core: cost must be > 0")
	// ErrCostExceedsCapacity: a cost above Policy.Capacity, which waiting
	// cannot help. It comes with a denial whose RetryAfter is 0: adapters
	// deny such a request, never treat it as a store failure, and show
	// only its Limit and Policy (a remote store that failed could not read
	// the key: its error then also wraps the store's).
	ErrCostExceedsCapacity = errors.New("core: cost exceeds what the policy can ever admit")
	// ErrAlgorithmMismatch: a policy given with a call uses another
	// algorithm than the limiter's own; use one limiter per algorithm.
	ErrAlgorithmMismatch = errors.New("core: policy's algorithm differs from the limiter's")
	// ErrInvalidUsage: PolicyLimiter.Set got a usage outside [0, Capacity].
	ErrInvalidUsage = errors.New("core: usage must be between 0 and the policy's capacity")
	ErrClosed       = errors.New("core: limiter closed")
)

// verdict is what an algorithm decides: a Decision without the fields
// every decision of a limiter shares (Limit, Policy). wait is RetryAfter
// when denied and Delay when admitted, so that the four fields travel in
// registers.
type verdict struct {
	allowed   bool
	remaining int64
	reset     time.Duration
	wait      time.Duration
}

// durationNs converts a nanosecond span to a Duration, clamping negative
// spans (a clock that stepped back) to 0.
func durationNs(ns int64) time.Duration { return time.Duration(max(ns, 0)) }

// partVerdicts returns d's parts' verdicts, r being the rule of d.Policy,
// and nil when d has none, or when d.Policy was set to a policy of another
// number of parts than decided d: never a verdict beyond d's own.
func (d *Decision) partVerdicts(r *rule) partVerdicts {
	if d.parts == nil || int(d.nparts) != len(r.parts) {
		return nil
	}
	return unsafe.Slice(d.parts, d.nparts)
}
