package hookevent

import (
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/nethttp"
)

func TestLimiterCalled(t *testing.T) {
	for _, tc := range []struct {
		ev   nethttp.Event
		want bool
	}{
		{nethttp.Event{Outcome: nethttp.OutcomeAllowed}, true},
		{nethttp.Event{Outcome: nethttp.OutcomeDenied}, true},
		{nethttp.Event{Outcome: nethttp.OutcomeDryRun}, true},
		{nethttp.Event{Outcome: nethttp.OutcomeFailedOpen, Latency: 50 * time.Millisecond}, true},
		{nethttp.Event{Outcome: nethttp.OutcomeFailedClosed, Latency: time.Microsecond}, true},
		{nethttp.Event{Outcome: nethttp.OutcomeCanceled, Latency: time.Millisecond}, true},
		{nethttp.Event{Outcome: nethttp.OutcomeFailedOpen}, false}, // a failed WithPolicyFunc lookup
		{nethttp.Event{Outcome: nethttp.OutcomeKeyError}, false},
		{nethttp.Event{Outcome: nethttp.OutcomeCostError}, false},
	} {
		if got := LimiterCalled(tc.ev); got != tc.want {
			t.Errorf("%v, latency %v: got %v, want %v", tc.ev.Outcome, tc.ev.Latency, got, tc.want)
		}
	}
}
