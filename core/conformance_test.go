package core_test

import (
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
)

func TestConformance(t *testing.T) {
	coretest.Run(t, func(t *testing.T, p core.Policy, now func() time.Time) core.Limiter {
		lim, err := core.New(p, core.WithClock(now))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = lim.Close() })
		return lim
	})
}
