package core

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// maxRules bounds the policies a ruleCache keeps compiled, so that a
// program building a policy per client cannot grow it without end; beyond
// it each call compiles its policy (one allocation).
const maxRules = 1024

// ruleCache maps policies to their compiled *rule, at most maxRules of
// them (n counts them).
type ruleCache struct {
	sync.Map
	n atomic.Int64
}

// get returns the rule kept for p, compiling and keeping it the first time.
func (c *ruleCache) get(p Policy, compile func(Policy) (rule, error)) (*rule, error) {
	if r, ok := c.Load(p); ok {
		return r.(*rule), nil
	}
	r, err := compile(p)
	if err != nil {
		return nil, err
	}
	if c.n.Add(1) > maxRules {
		return &r, nil // full: the count stays above the bound, and nothing more is kept
	}
	kept, loaded := c.LoadOrStore(p, &r)
	if loaded {
		c.n.Add(-1)
	}
	return kept.(*rule), nil
}

// AllowPolicy is [PolicyLimiter.AllowPolicy]. A key decided again under the
// policy it was last decided under costs what AllowN costs.
func (l *MemoryLimiter) AllowPolicy(_ context.Context, p Policy, key string, n int64) (d Decision, err error) {
	if n <= 0 || n > p.Capacity() || l.closed.Load() {
		return l.refuse(nil, &p, key, n)
	}
	now := l.clock()
	v, pv, r, err := l.decide(nil, &p, key, now, n, true)
	if err != nil {
		return Decision{}, err
	}
	r.fill(&d, v, pv, now)
	return d, nil
}

// Get is [PolicyLimiter.Get]. It takes a lock: it is meant for
// administration, not for every request.
func (l *MemoryLimiter) Get(_ context.Context, p Policy, key string) (Usage, error) {
	if l.closed.Load() {
		return Usage{}, ErrClosed
	}
	r, err := l.resolve(p)
	if err != nil {
		return Usage{}, err
	}
	v, used := l.keys.get(r, key, l.clock())
	return Usage{Used: used, Remaining: v.remaining, ResetAfter: v.reset, Policy: r.policy}, nil
}

// Set is [PolicyLimiter.Set]. A decision in flight on the key counts either
// before it (and is overwritten) or after it, never half.
func (l *MemoryLimiter) Set(_ context.Context, p Policy, key string, used int64) error {
	if l.closed.Load() {
		return ErrClosed
	}
	r, err := l.resolve(p)
	if err != nil {
		return err
	}
	if used < 0 || used > r.capacity {
		return fmt.Errorf("%w: used=%d, %v", ErrInvalidUsage, used, capacityText(r.policy))
	}
	l.keys.set(r, key, l.clock(), used)
	return nil
}

// resolve returns the rule of p: the limiter's own for its own policy,
// else the compiled rule kept for p, compiling and keeping it the first
// time (up to maxRules).
func (l *MemoryLimiter) resolve(p Policy) (*rule, error) {
	if p == l.rule.policy {
		return &l.rule, nil
	}
	return l.rules.get(p, func(p Policy) (rule, error) {
		if p.Algorithm != l.rule.policy.Algorithm {
			return rule{}, fmt.Errorf("%w: %v given to a %v limiter", ErrAlgorithmMismatch, p.Algorithm, l.rule.policy.Algorithm)
		}
		c, err := compile(p)
		switch {
		case err != nil:
		case len(l.rule.parts) > 0 && len(c.parts) == 0:
			// A policy of one part, decided as one of one part.
			c = compileParts(p, []Policy{p})
		case len(l.rule.parts) == 0 && len(c.parts) > 0:
			err = fmt.Errorf("%w: a policy made with AllOf given to a limiter of a policy of one part (build it with core.AllOf)", ErrAlgorithmMismatch)
		}
		return c, err
	})
}

var _ PolicyLimiter = (*MemoryLimiter)(nil)
