package core_test

import (
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
)

// modelSuite is the model-based suite for the in-memory limiter built with
// opts: its clock is monotonic and its janitor can be run on demand.
func modelSuite(opts ...core.Option) coretest.Suite {
	return coretest.Suite{
		New: func(t *testing.T, p core.Policy, now func() time.Time) core.Limiter {
			lim, err := core.New(p, append([]core.Option{core.WithClock(now)}, opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = lim.Close() })
			return lim
		},
		MonotonicClock: true,
		Sweep:          func(l core.Limiter) { core.SweepForTest(l.(*core.MemoryLimiter)) },
	}
}

// TestModelMemory compares every decision of the in-memory limiter with the
// reference model, and checks the admission properties, on random policies
// and traffic (see coretest.Suite.RunModel; RATELIMIT_MODEL_DURATION runs
// it longer, RATELIMIT_MODEL_SEED replays a failure). MemoryLimiter is a
// core.PolicyLimiter, so the traffic mixes plans given per call, Get and
// Set.
func TestModelMemory(t *testing.T) {
	t.Parallel()
	s := modelSuite()
	t.Run("model", s.RunModel)
	t.Run("properties", s.RunProperties)
	t.Run("plan scenarios", s.RunPlanScenarios)
	t.Run("composites and settlements", s.RunComposites)
}

// TestModelMemoryMaxKeys is TestModelMemory with room for only 8 keys, so
// that floods of keys force eviction and the shared overflow state: the
// limiter may then limit a key early, never late.
func TestModelMemoryMaxKeys(t *testing.T) {
	t.Parallel()
	s := modelSuite(core.WithMaxKeys(8))
	s.Inexact = true
	t.Run("model", s.RunModel)
	t.Run("properties", s.RunProperties)
	t.Run("plan scenarios", s.RunPlanScenarios)
}
