package otelhook

import (
	"fmt"
	"math"
	"slices"
)

// Option configures [New]. An option given an invalid value panics, naming
// itself: a mistake in the program, reported where it is made.
type Option func(*config)

type config struct {
	bounds []float64
}

// WithDurationBoundaries sets the bucket boundaries, in seconds, of the
// ratelimit.store.duration histogram. It panics unless at least one is
// given and they are finite and increasing. A view of the SDK still
// overrides them. The default is [DefaultDurationBoundaries].
func WithDurationBoundaries(bounds ...float64) Option {
	if !increasing(bounds) {
		panic(fmt.Errorf("otelhook: WithDurationBoundaries(%v): the boundaries must be finite and increasing, at least one", bounds))
	}
	bounds = slices.Clone(bounds)
	return func(c *config) { c.bounds = bounds }
}

func increasing(bounds []float64) bool {
	for i, b := range bounds {
		if math.IsNaN(b) || math.IsInf(b, 0) || i > 0 && b <= bounds[i-1] {
			return false
		}
	}
	return len(bounds) > 0
}
