package core

import (
	"errors"
	"strconv"
	"time"
)

// Decision is the answer to one request: whether it may pass and what the
// client should be told. Every algorithm and every store fills it in the same
// way.
type Decision struct {
	// Allowed reports whether the request was admitted (and its cost
	// consumed).
	Allowed bool
	// Limit is the policy quota, Policy.Limit (X-RateLimit-Limit, IETF q).
	Limit int64
	// Remaining is how many unit-cost requests would be admitted right now,
	// after this one. Never negative.
	Remaining int64
	// ResetAfter is the time until the key is back to its full quota
	// (X-RateLimit-Reset). 0 when it already is.
	ResetAfter time.Duration
	// RetryAfter is, for a denied request, the time until a request of the
	// same cost would be admitted, absent other traffic: waiting exactly
	// RetryAfter and retrying succeeds. 0 when allowed, and 0 when the cost
	// can never be admitted (AllowN then also returns ErrCostExceedsCapacity).
	RetryAfter time.Duration
	// Delay is, for an admitted leaky-bucket request, how long it must wait
	// before being served so that the output is smooth. 0 otherwise.
	Delay time.Duration
	// Policy is the policy that decided, for the IETF RateLimit-Policy
	// header (name, quota, window).
	Policy Policy
	// Source says where the decision was made: the store itself (the zero
	// value, and always for the in-memory limiter), a store's local cache of
	// denials, or a local fallback limiter standing in for a store that is
	// unavailable.
	Source Source
	// StateUnknown reports that the key's state could not be read: a
	// denial of a cost above capacity (ErrCostExceedsCapacity) by a store
	// that failed. Remaining and ResetAfter are then 0 and mean nothing:
	// never show them to a client. False for every other Decision.
	StateUnknown bool
}

// Source says where a Decision was made, so that adapters, hooks and
// metrics can tell a store's own answers from stand-ins.
type Source uint8

// The sources of a Decision.
const (
	// SourceStore: the limiter's store decided (in memory, or the Redis
	// script).
	SourceStore Source = iota
	// SourceDenyCache: a remote store's local cache repeated a denial it
	// had received, without asking the store.
	SourceDenyCache
	// SourceFallback: a local fallback limiter decided while the store was
	// unavailable (redisstore's default while Redis is).
	SourceFallback
)

// String returns "store", "deny-cache" or "fallback", as metrics label it.
func (s Source) String() string {
	switch s {
	case SourceStore:
		return "store"
	case SourceDenyCache:
		return "deny-cache"
	case SourceFallback:
		return "fallback"
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// Errors returned by limiters. Test for them with errors.Is: the returned
// errors wrap them with the values involved.
var (
	// ErrInvalidCost: a cost <= 0. Such a call consumes nothing and never
	// adds capacity.
	ErrInvalidCost = errors.New("core: cost must be > 0")
	// ErrCostExceedsCapacity: the cost is more than the policy can ever
	// admit at once (above Burst, or above Limit per window). The returned
	// Decision is a denial with RetryAfter 0, because waiting cannot help,
	// marked StateUnknown when a failing store could not tell the key's
	// state. Adapters must deny such a request, never treat it as a store
	// failure.
	ErrCostExceedsCapacity = errors.New("core: cost exceeds what the policy can ever admit")
	// ErrAlgorithmMismatch: a policy given with a call (PolicyLimiter) uses
	// another algorithm than the limiter's own policy. One limiter holds
	// one kind of per-key state; use one limiter per algorithm.
	ErrAlgorithmMismatch = errors.New("core: policy's algorithm differs from the limiter's")
	// ErrInvalidUsage: PolicyLimiter.Set was given a usage below 0 or
	// above the policy's capacity.
	ErrInvalidUsage = errors.New("core: usage must be between 0 and the policy's capacity")
	// ErrClosed: the limiter was closed.
	ErrClosed = errors.New("core: limiter closed")
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
