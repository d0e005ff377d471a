package echomw_test

import (
	"context"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// brokenLimiter fails every call, like a store that cannot be reached.
type brokenLimiter struct{ err error }

func (b brokenLimiter) AllowN(context.Context, string, int64) (core.Decision, error) {
	return core.Decision{}, b.err
}
func (b brokenLimiter) Peek(context.Context, string) (core.Decision, error) {
	return core.Decision{}, b.err
}
func (b brokenLimiter) Reset(context.Context, string) error { return b.err }
func (b brokenLimiter) Policy() core.Policy                 { return core.FixedWindow(1, time.Second) }
