// Package hookevent holds what the metric hooks (promhook, otelhook) read
// from a [nethttp.Event] alike.
package hookevent

import "github.com/go-ratelimit/ratelimit/nethttp"

// LimiterCalled reports whether the limiter was asked about the request
// (and answered, or failed to): always for the outcomes only a decision
// gives (allowed, denied, dry-run), and for the others when the call took
// time (a store that failed, timed out or saw the client hang up). A key
// or cost error and a failed WithPolicyFunc lookup come before the call:
// Latency is 0. The hooks observe store latency only for these events.
func LimiterCalled(e nethttp.Event) bool {
	switch e.Outcome {
	case nethttp.OutcomeAllowed, nethttp.OutcomeDenied, nethttp.OutcomeDryRun:
		return true
	}
	return e.Latency > 0
}
