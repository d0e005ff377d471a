package core

import (
	"context"
	"errors"
)

var errNotYet = errors.New("core: per-call policies: not implemented yet")

// AllowPolicy is AllowN under p: see PolicyLimiter.
func (l *MemoryLimiter) AllowPolicy(ctx context.Context, p Policy, key string, n int64) (Decision, error) {
	return Decision{}, errNotYet
}

// Get reads key's usage under p: see PolicyLimiter.
func (l *MemoryLimiter) Get(ctx context.Context, p Policy, key string) (Usage, error) {
	return Usage{}, errNotYet
}

// Set writes key's usage under p: see PolicyLimiter.
func (l *MemoryLimiter) Set(ctx context.Context, p Policy, key string, used int64) error {
	return errNotYet
}

var _ PolicyLimiter = (*MemoryLimiter)(nil)
