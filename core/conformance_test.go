package core_test

import (
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/internal/testkit/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
)

func TestConformance(t *testing.T) {
	coretest.Run(t, func(t *testing.T, p core.Policy, now func() time.Time) core.Limiter {
		lim, err := core.New(p, core.WithClock(now))
		require.NoError(t, err)
		t.Cleanup(func() { _ = lim.Close() })
		return lim
	})
}
