//go:build !race

package promhook_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/promhook"
)

// TestObserveAllocatesNothingOnceSeen: after the first request of a
// policy, outcome and source, Observe allocates nothing (the race detector
// allocates, hence the build tag).
func TestObserveAllocatesNothingOnceSeen(t *testing.T) {
	m := promhook.New()
	events := []nethttp.Event{
		event(perIP, nethttp.OutcomeAllowed, core.SourceStore, time.Millisecond),
		event(perIP, nethttp.OutcomeDenied, core.SourceDenyCache, time.Microsecond),
		event(core.TokenBucket(100, time.Minute), nethttp.OutcomeFailedOpen, core.SourceStore, 50*time.Millisecond),
		event(perKey, nethttp.OutcomeKeyError, core.SourceStore, 0),
	}
	for _, e := range events {
		m.Observe(e)
	}
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		for _, e := range events {
			m.Observe(e)
		}
	}))
}
