package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// TestDecisionAllocations: a decision on a held key allocates nothing,
// under the limiter's policy (AllowN, Peek) or one given with the call
// (AllowPolicy), on every algorithm; a composite decision allocates its
// parts' verdicts once, and a plan not made with AllOf on a composite
// limiter nothing. An allocation added to these paths fails here, not in
// a benchmark nobody reran.
func TestDecisionAllocations(t *testing.T) {
	if core.RaceEnabled {
		t.Skip("the race detector allocates")
	}
	ctx := context.Background()
	perSecond := core.TokenBucket(1e9, time.Second).WithName("per-second")
	both := core.AllOf(perSecond, core.TokenBucket(1e9, time.Hour).WithName("per-hour"))
	for _, tc := range []struct {
		name   string
		lim    core.Policy
		call   func(*core.MemoryLimiter) (core.Decision, error)
		allocs float64
	}{
		{"fixed AllowN", core.FixedWindow(1e9, time.Hour), func(l *core.MemoryLimiter) (core.Decision, error) { return l.AllowN(ctx, "k", 1) }, 0},
		{"sliding AllowN", core.SlidingWindow(1e9, time.Hour), func(l *core.MemoryLimiter) (core.Decision, error) { return l.AllowN(ctx, "k", 1) }, 0},
		{"token Peek", perSecond, func(l *core.MemoryLimiter) (core.Decision, error) { return l.Peek(ctx, "k") }, 0},
		{"leaky AllowN", core.LeakyBucket(1e9, time.Second).WithBurst(1e9), func(l *core.MemoryLimiter) (core.Decision, error) { return l.AllowN(ctx, "k", 1) }, 0},
		{"token AllowPolicy", perSecond, func(l *core.MemoryLimiter) (core.Decision, error) {
			return l.AllowPolicy(ctx, perSecond.WithName("pro"), "k", 1)
		}, 0},
		{"composite AllowN", both, func(l *core.MemoryLimiter) (core.Decision, error) { return l.AllowN(ctx, "k", 1) }, 1},
		{"composite, a plan of one part", both, func(l *core.MemoryLimiter) (core.Decision, error) { return l.AllowPolicy(ctx, perSecond, "k", 1) }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim, _ := frozen(t, tc.lim)
			_, _ = lim.AllowN(ctx, "k", 1)                        // the key is held (a Peek stores none)
			if d, err := tc.call(lim); err != nil || !d.Allowed { // under the call's policy
				t.Fatalf("first call: %+v, %v; want admitted", d, err)
			}
			got := testing.AllocsPerRun(100, func() {
				if d, err := tc.call(lim); err != nil || !d.Allowed {
					panic("not admitted")
				}
			})
			if got != tc.allocs {
				t.Errorf("allocations per call: got %v, want %v", got, tc.allocs)
			}
		})
	}
}
