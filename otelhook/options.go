package otelhook

import (
	"fmt"
	"math"
	"slices"
)

// Option configures [New].
type Option interface{ apply(*config) }

type config struct {
	bounds []float64
}

func (c *config) validate() error {
	for i, b := range c.bounds {
		if math.IsNaN(b) || math.IsInf(b, 0) || i > 0 && b <= c.bounds[i-1] {
			return fmt.Errorf("otelhook: WithDurationBoundaries: boundaries must be finite and increasing, got %v", c.bounds)
		}
	}
	return nil
}

type boundariesOption []float64

func (b boundariesOption) apply(c *config) { c.bounds = b }

// WithDurationBoundaries sets the bucket boundaries, in seconds, of the
// ratelimit.store.duration histogram: finite and increasing, or New returns
// an error. A view of the SDK still overrides them. The default is
// [DefaultDurationBoundaries].
func WithDurationBoundaries(bounds ...float64) Option {
	return boundariesOption(slices.Clone(bounds))
}
