package core

import (
	"context"
	"fmt"
)

// maxRules bounds the policies a limiter keeps compiled for AllowPolicy, so
// that a program building a policy per client cannot grow it without end;
// beyond it each such call compiles its policy (one allocation).
const maxRules = 1024

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
	if r, ok := l.rules.Load(p); ok {
		return r.(*rule), nil
	}
	if p.Algorithm != l.rule.policy.Algorithm {
		return nil, fmt.Errorf("%w: %v given to a %v limiter", ErrAlgorithmMismatch, p.Algorithm, l.rule.policy.Algorithm)
	}
	c, err := compile(p)
	switch {
	case err != nil:
		return nil, err
	case l.all != nil && len(c.parts) == 0:
		// A policy of one part, decided as one of one part.
		c = compileParts(p, []Policy{p})
	case l.all == nil && len(c.parts) > 0:
		return nil, fmt.Errorf("%w: a policy made with AllOf given to a limiter of a policy of one part (build it with core.AllOf)", ErrAlgorithmMismatch)
	}
	if l.nrules.Add(1) > maxRules {
		return &c, nil // full: the count stays above the bound, and nothing more is kept
	}
	r, loaded := l.rules.LoadOrStore(p, &c)
	if loaded {
		l.nrules.Add(-1)
	}
	return r.(*rule), nil
}

var _ PolicyLimiter = (*MemoryLimiter)(nil)
