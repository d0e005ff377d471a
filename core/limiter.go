package core

import (
	"context"
	"time"
)

// Limiter is the contract every store meets, so that every HTTP adapter
// works with every store. Implementations are safe for simultaneous use by
// multiple goroutines.
type Limiter interface {
	// AllowN decides whether a request of cost n for key may pass now, and
	// consumes n if so. n <= 0 returns ErrInvalidCost; n above the policy's
	// capacity, a denial with ErrCostExceedsCapacity. A remote store may
	// return other errors (network, timeout).
	AllowN(ctx context.Context, key string, n int64) (Decision, error)
	// Peek reports, without consuming anything, the Decision a unit-cost
	// request would get now (at one instant, what the next AllowN of cost 1
	// gets), with Remaining counting none consumed and Delay 0.
	Peek(ctx context.Context, key string) (Decision, error)
	// Reset forgets key: its next request is treated as the first.
	Reset(ctx context.Context, key string) error
	// Policy returns the policy the limiter enforces.
	Policy() Policy
}

// PolicyLimiter is a Limiter that also decides under a policy given with
// each call: see "Policies per call" in the package documentation.
type PolicyLimiter interface {
	Limiter
	// AllowPolicy is AllowN under p instead of the limiter's own policy.
	// p must be valid (else the error names the field) and use the
	// limiter's algorithm (else ErrAlgorithmMismatch). A key last decided
	// under another policy is decided on its state converted to p, and
	// moves to p only if admitted: denied, it goes on recovering under its
	// own policy, and the denial's RetryAfter is the time until the key,
	// converted then, admits n, its ResetAfter until it is back to p's
	// full quota, both to the nanosecond (so are a Peek's and a Get's).
	AllowPolicy(ctx context.Context, p Policy, key string, n int64) (Decision, error)
	// Get reads key's usage under p without consuming anything or
	// changing the key's state.
	Get(ctx context.Context, p Policy, key string) (Usage, error)
	// Set makes key's usage under p exactly used units now, 0 <= used <=
	// p.Capacity() (else ErrInvalidUsage): a grant of credits, or state
	// imported. Set(ctx, p, key, 0) gives the key its full quota back.
	Set(ctx context.Context, p Policy, key string, used int64) error
}

// Usage is a key's state under a policy, in units of cost, as Get reports
// it.
type Usage struct {
	// Used is the cost counted against the key now: what the window (or
	// trailing window) counts, the tokens taken and not yet refilled, or the
	// requests still in the leaky bucket, rounded up to whole units.
	Used int64
	// Remaining, ResetAfter and Policy are as in a Decision of Peek.
	Remaining  int64
	ResetAfter time.Duration
	Policy     Policy
}
