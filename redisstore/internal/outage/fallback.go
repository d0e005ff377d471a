package outage

import (
	"context"
	"fmt"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// Fallback is the local fallback: an in-memory limiter of the limiter's
// policy, deciding the calls Redis did not, under the call's policy.
type Fallback struct{ *core.MemoryLimiter }

// NewFallback returns the fallback of the valid policy p (so that
// core.MustNew cannot panic), on the test clock now when there is one.
func NewFallback(p core.Policy, now func() time.Time) *Fallback {
	if now == nil {
		return &Fallback{core.MustNew(p)}
	}
	return &Fallback{core.MustNew(p, core.WithClock(now))}
}

// Decide decides call op locally under p (given with the call, or the
// limiter's own): AllowN of cost n, or Peek when n is 0. Its errors are
// the in-memory limiter's: a cost above p's capacity (a denial) and
// ErrClosed (Close ran meanwhile).
func (f *Fallback) Decide(ctx context.Context, op string, p *core.Policy, given bool, key string, n int64) (core.Decision, error) {
	var d core.Decision
	var err error
	switch { // core's limiter never fails on an ended context
	case n == 0:
		d, err = f.Peek(ctx, key)
	case given:
		d, err = f.AllowPolicy(ctx, *p, key, n)
	default:
		d, err = f.AllowN(ctx, key, n)
	}
	if d.Policy == (core.Policy{}) { // an error's empty Decision; else, under AllOf, Limit is the binding part's
		d.Limit = p.Limit
	}
	d.Policy, d.Source = *p, core.SourceFallback
	if err != nil {
		err = fmt.Errorf("redisstore: %s in fallback: %w", op, err)
	}
	return d, err
}
