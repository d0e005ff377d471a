package nethttp_test

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// TestPolicyFuncPolicyTheLimiterRejectsAdvertisesNothing: WithPolicyFunc
// says "An error from f, a policy whose name is not printable ASCII, or one
// the limiter rejects is handled as a limiter failure ([WithFailClosed]),
// prefixed "policy func: ", with no rate-limit header." A policy made with
// core.AllOf given to a limiter of a policy of one part is one the limiter
// rejects (core.ErrAlgorithmMismatch) on every request: each is served
// unlimited (fail open), yet the response advertises the policy's limit
// (X-RateLimit-Limit: 10, RateLimit-Policy: "per-second";q=10;w=1, ...),
// a limit nothing enforces, and the hooks' error has no "policy func: ".
func TestPolicyFuncPolicyTheLimiterRejectsAdvertisesNothing(t *testing.T) {
	plan := core.AllOf(core.FixedWindow(10, time.Second).WithName("per-second"),
		core.FixedWindow(1000, 24*time.Hour).WithName("per-day"))
	var events []nethttp.Event
	h := wrap(t, newLimiter(t, core.FixedWindow(10, time.Second), newClock(t0)), recorder(&events),
		nethttp.WithHeaderStyle(nethttp.HeadersBoth),
		nethttp.WithPolicyFunc(func(*http.Request, string) (core.Policy, error) { return plan, nil }))
	w := get(h, "")
	wantStatus(t, w, http.StatusOK)
	if got := rateHeaders(t, w); len(got) != 0 {
		t.Errorf("a policy the limiter rejects is not applied: got %v, want no rate-limit header", got)
	}
	if got, want := outcomes(events), ([]nethttp.Outcome{nethttp.OutcomeFailedOpen}); !reflect.DeepEqual(got, want) {
		t.Fatalf("outcomes(events): got %v, want %v", got, want)
	}
	if err := events[0].Err; !errors.Is(err, core.ErrAlgorithmMismatch) || !strings.HasPrefix(err.Error(), "policy func: ") {
		t.Errorf("events[0].Err: got %v, want an error prefixed %q wrapping %v", err, "policy func: ", core.ErrAlgorithmMismatch)
	}
}
