package nethttp

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// Event is what the middleware did with one request, as hooks added with
// [WithHook] receive it: one Event per request that was not skipped, after
// the decision (and after a leaky-bucket delay) and before the next handler
// runs or the rejection is written (and a second one, after the response,
// for a settlement that failed: [OutcomeSettleFailed]).
type Event struct {
	Request *http.Request
	// Key is the key the request was counted under ("" for
	// OutcomeKeyError): personal data, which the ready-made hooks never log
	// or use as a label.
	Key     string
	Cost    int64 // 1 without WithCostFunc; 0 for a key or cost error
	Outcome Outcome
	// Decision is the limiter's answer, with the policy applied. On a
	// limiter failure (or OutcomeCanceled while it decided) it holds only
	// Limit, Policy and Source; on a key or cost error, the Limit and Policy
	// of the limiter (of the request, for a cost refused under
	// WithPolicyFunc). It is zero when no policy is known: the
	// WithPolicyFunc function failed, or an error came before it was called.
	Decision core.Decision
	// Err is the failure: the limiter's, the key function's, the cost or
	// policy function's (prefixed "cost function: " or "policy func: "), or
	// the context's for OutcomeCanceled. For a denial of a cost above
	// capacity it wraps core.ErrCostExceedsCapacity; nil for every other
	// admission and denial.
	Err     error
	Latency time.Duration // of the limiter call; 0 when it was not called
	// LimiterCalled is true when the limiter decided the request or failed
	// to (a store error or timeout, or the request's context ending while
	// it decided): the events whose Latency and Decision.Source tell
	// something of the store. It is false for a key or cost error and for
	// a WithPolicyFunc failure, which come before the call.
	LimiterCalled bool
}

// Outcome is what the middleware did with a request.
type Outcome uint8

// OutcomeAllowed: admitted, served by the next handler.
const OutcomeAllowed Outcome = 0

// OutcomeDenied: answered 429.
const OutcomeDenied Outcome = 1

// OutcomeDryRun: denied, but served under WithDryRun.
const OutcomeDryRun Outcome = 2

// OutcomeFailedOpen: the limiter or the policy lookup failed; served (the
// default, and under WithDryRun).
const OutcomeFailedOpen Outcome = 3

// OutcomeFailedClosed: the limiter or the policy lookup failed; answered
// 503 (WithFailClosed).
const OutcomeFailedClosed Outcome = 4

// OutcomeKeyError: no key; answered 400 (served under WithDryRun).
const OutcomeKeyError Outcome = 5

// OutcomeCostError: the cost function failed or gave <= 0; answered 500
// (served under WithDryRun).
const OutcomeCostError Outcome = 6

// OutcomeCanceled: the request's own context ended (the client hung up, a
// server timeout) while the limiter or the policy function was deciding,
// or during a leaky-bucket delay. Not a limiter failure: the answer is 503
// (served under WithDryRun), without rate-limit headers after a failed
// decision, with them after a delay.
const OutcomeCanceled Outcome = 7

// OutcomeSettleFailed: an admitted request was served, and then the
// limiter could not settle its final cost ([WithFinalCost]): its Event
// comes after the response, from the settlement's goroutine, with the
// admission's Decision, Key and Cost (what was charged), Err (the
// limiter's, or the context's past its timeout, prefixed "settle: " with
// the final cost) and the Settle call's Latency. The charge stays as it was.
const OutcomeSettleFailed Outcome = 8

// outcomes is what follows from each Outcome: its name, the status of the
// answer to a request rejected with it (0: the request is served) and that
// Rejection's message.
var outcomes = [...]struct {
	name, rejection string
	status          int
}{
	OutcomeAllowed:      {"allowed", "", 0},
	OutcomeDenied:       {"denied", "rate limit exceeded", http.StatusTooManyRequests},
	OutcomeDryRun:       {"dry-run", "", 0},
	OutcomeFailedOpen:   {"failed-open", "", 0},
	OutcomeFailedClosed: {"failed-closed", "limiter failed", http.StatusServiceUnavailable},
	OutcomeKeyError:     {"key-error", "no rate-limit key", http.StatusBadRequest},
	OutcomeCostError:    {"cost-error", "invalid request cost", http.StatusInternalServerError},
	OutcomeCanceled:     {"canceled", "request ended before it was served", http.StatusServiceUnavailable},
	OutcomeSettleFailed: {"settle-failed", "", 0},
}

// String returns the outcome as metrics label it: "allowed", "denied",
// "dry-run", "failed-open", "failed-closed", "key-error", "cost-error",
// "canceled" or "settle-failed".
func (o Outcome) String() string {
	if int(o) < len(outcomes) {
		return outcomes[o].name
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// WithHook adds f, called with the [Event] of every request that is not
// skipped, on the request's goroutine (for [OutcomeSettleFailed], a second
// Event, on the settlement's): keep it fast and never block. Hooks run in
// the order they were added; each WithHook adds one.
// nethttp/sloghook, promhook and otelhook are ready-made.
func WithHook(f func(Event)) Option {
	mustFunc("WithHook", f)
	return func(c *config) { c.hooks = append(c.hooks, f) }
}

// WithPolicyFunc chooses the policy of each request: f gets the request and
// its key and returns the policy to decide it under (a plan looked up from
// an API key), which the limiter applies with
// [core.PolicyLimiter].AllowPolicy; the middleware panics at construction if
// the limiter is not a core.PolicyLimiter. The headers describe the policy
// applied. An error from f, a policy whose name is not printable ASCII, or
// one the limiter rejects is handled as a limiter failure ([WithFailClosed]),
// prefixed "policy func: ", with no rate-limit header. f runs after the key
// and the cost are known; Event.Latency does not include it.
func WithPolicyFunc(f func(r *http.Request, key string) (core.Policy, error)) Option {
	mustFunc("WithPolicyFunc", f)
	return func(c *config) { c.policy = f }
}

// OutcomeOf is what the middleware does with a limiter's answer (d, err)
// to a request whose context is ctx, under the failure policy of
// [WithFailClosed] and [WithDryRun]: the one rule every adapter follows,
// for HTTP and for other transports (grpcmw). A denial of a cost above
// capacity ([core.ErrCostExceedsCapacity]) is a denial, not a failure; a
// cost <= 0 is a cost error; an error of ctx ending is the request's own
// cancellation; any other error is a failure, served unless failClosed,
// and answered whatever the policy when the limiter was closed
// ([core.ErrClosed]); dryRun serves every request. It does not look at
// d.Delay, which the caller waits out before serving.
func OutcomeOf(ctx context.Context, d core.Decision, err error, failClosed, dryRun bool) Outcome {
	return outcomeOf(ctx, d.Allowed, err, failClosed, dryRun)
}

// outcomeOf is OutcomeOf for a decision that admitted the request or not:
// the engine's call, which copies no Decision.
func outcomeOf(ctx context.Context, allowed bool, err error, failClosed, dryRun bool) Outcome {
	if err == nil && allowed { // inlined: the path of every admitted request
		return OutcomeAllowed
	}
	return notAdmitted(ctx, err, failClosed, dryRun)
}

// notAdmitted is outcomeOf for a denial or an error.
func notAdmitted(ctx context.Context, err error, failClosed, dryRun bool) Outcome {
	switch {
	case err == nil || errors.Is(err, core.ErrCostExceedsCapacity):
		if dryRun {
			return OutcomeDryRun
		}
		return OutcomeDenied
	case errors.Is(err, core.ErrInvalidCost):
		return OutcomeCostError
	}
	return failureOutcome(ctx, err, failClosed, dryRun)
}

// failureOutcome is OutcomeOf for err, a failure to decide: of the limiter,
// or of the WithPolicyFunc function. An error that comes from ctx having
// ended is the caller's own cancellation or deadline, not a failure of the
// limiter; a store's own timeout, on a context that has not ended, is a
// failure.
func failureOutcome(ctx context.Context, err error, failClosed, dryRun bool) Outcome {
	switch {
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Cause(ctx))):
		return OutcomeCanceled
	case dryRun || !failClosed && !errors.Is(err, core.ErrClosed):
		return OutcomeFailedOpen
	}
	return OutcomeFailedClosed
}

// status is the status of the answer to a request rejected with outcome o,
// and 0 for the outcomes that serve the request.
func (o Outcome) status() int {
	if int(o) < len(outcomes) {
		return outcomes[o].status
	}
	return 0
}
