package core

import "context"

// Limiter is the contract every store meets: the in-memory limiter of this
// package and the Redis store alike, so that every HTTP adapter works with
// every store. Implementations are safe for simultaneous use by multiple
// goroutines.
type Limiter interface {
	// AllowN decides whether a request of cost n for key may pass now, and
	// consumes n if so. n <= 0 returns ErrInvalidCost; n above the policy's
	// capacity returns a denial with ErrCostExceedsCapacity. A remote store
	// may return other errors (network, timeout), which the caller handles
	// by its failure policy.
	AllowN(ctx context.Context, key string, n int64) (Decision, error)
	// Peek reports the key's state now without consuming anything:
	// Allowed is whether a unit-cost request would be admitted (at one
	// instant, what the next AllowN of cost 1 gets), Remaining how many
	// unit-cost requests would pass now, counting none as consumed,
	// ResetAfter and, when not allowed, RetryAfter as for that request;
	// Delay is always 0.
	Peek(ctx context.Context, key string) (Decision, error)
	// Reset forgets key: its next request is treated as the first.
	Reset(ctx context.Context, key string) error
	// Policy returns the policy the limiter enforces.
	Policy() Policy
}
