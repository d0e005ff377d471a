package redisstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// ErrBreakerOpen is wrapped, with ErrUnavailable and the error of the
// failure that opened the breaker, by the errors of the calls that the
// circuit breaker kept from Redis and that no local fallback answered:
// every such call with WithoutFallback, and a Reset, Get or Set.
var ErrBreakerOpen = errors.New("redisstore: circuit breaker open, Redis not called")

// BreakerState is the state of the circuit breaker in front of Redis.
type BreakerState uint8

// The states of the breaker.
const (
	// BreakerClosed: calls go to Redis.
	BreakerClosed BreakerState = iota
	// BreakerOpen: Redis is not called.
	BreakerOpen
	// BreakerHalfOpen: one call, the probe, is on its way to Redis; the
	// others are not sent.
	BreakerHalfOpen
)

// String returns "closed", "open" or "half-open".
func (s BreakerState) String() string {
	if int(s) < len(breakerStates) {
		return breakerStates[s]
	}
	return fmt.Sprintf("BreakerState(%d)", uint8(s))
}

var breakerStates = [...]string{BreakerClosed: "closed", BreakerOpen: "open", BreakerHalfOpen: "half-open"}

// BreakerChange is one change of the breaker's state, as WithBreakerHook
// reports it.
type BreakerChange struct {
	From, To BreakerState
	// Err is the reason for opening: the Redis error of the call that
	// made the failures consecutive enough (closed to open) or of the
	// failed probe (half-open to open). It is nil when the probe interval
	// has passed (open to half-open) and when the probe succeeded
	// (half-open to closed).
	Err error
	// Policy is the limiter's own policy, so that a hook shared by
	// several limiters knows which one changed: Policy.Label() names it.
	Policy core.Policy
}

// openError is the error of a call the open breaker kept from Redis:
// ErrBreakerOpen and the failure that opened it.
type openError struct {
	cause error
	retry time.Duration // until the breaker lets a probe through; 0: unknown
}

// RetryAfter is how long until the breaker lets a call through to Redis
// again, for a fail-closed answer's Retry-After (see nethttp.WithFailClosed).
func (e openError) RetryAfter() time.Duration { return e.retry }

func (e openError) Error() string {
	return "circuit breaker open, Redis not called (last failure: " + e.cause.Error() + ")"
}
func (e openError) Unwrap() []error { return []error{ErrBreakerOpen, e.cause} }
