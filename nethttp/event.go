package nethttp

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// Event is what the middleware did with one request, as hooks added with
// [WithHook] receive it: one Event per request that was not skipped, after
// the decision (and after a leaky-bucket delay) and before the next handler
// runs or the rejection is written.
type Event struct {
	// Request is the request decided.
	Request *http.Request
	// Key is the key the request was counted under; "" when there is none
	// (OutcomeKeyError). It is personal data (a client IP, an API key):
	// the ready-made hooks never log it or use it as a label.
	Key string
	// Cost is the request's cost (1 without WithCostFunc); 0 when it could
	// not be computed (OutcomeKeyError, OutcomeCostError).
	Cost int64
	// Outcome is what happened to the request.
	Outcome Outcome
	// Decision is the limiter's answer: Policy is the policy applied (the
	// per-request one with WithPolicyFunc), Source where the decision was
	// made. On a limiter failure (OutcomeFailedOpen, OutcomeFailedClosed,
	// or OutcomeCanceled while the limiter was deciding) it holds what is
	// known: Limit and Policy (from the limiter's answer, or else the
	// policy it was asked to apply) and Source. For OutcomeKeyError and
	// OutcomeCostError it holds the Limit and Policy of the limiter (of the
	// request, for a cost refused under WithPolicyFunc). It is zero when no
	// policy is known: the WithPolicyFunc function failed, or a key or cost
	// error came before it was called.
	Decision core.Decision
	// Err is the failure, for OutcomeFailedOpen, OutcomeFailedClosed,
	// OutcomeKeyError, OutcomeCostError and OutcomeCanceled: the limiter's
	// error, the key function's, or the cost or policy function's prefixed
	// "cost function: " or "policy func: ". It is nil for OutcomeAllowed,
	// and for OutcomeDenied and OutcomeDryRun except a cost above capacity,
	// a denial whose Err wraps core.ErrCostExceedsCapacity.
	Err error
	// Latency is how long the limiter call (the store's round trip) took;
	// 0 when the limiter was not called.
	Latency time.Duration
}

// Outcome is what the middleware did with a request.
type Outcome uint8

// The outcomes of a request.
const (
	// OutcomeAllowed: admitted, served by the next handler.
	OutcomeAllowed Outcome = iota
	// OutcomeDenied: answered 429.
	OutcomeDenied
	// OutcomeDryRun: denied by the limiter but served, under WithDryRun.
	OutcomeDryRun
	// OutcomeFailedOpen: the limiter or the policy lookup failed and the
	// request was served without a limit (the default failure policy, and
	// every failure under WithDryRun).
	OutcomeFailedOpen
	// OutcomeFailedClosed: the limiter or the policy lookup failed and the
	// request was answered 503 (WithFailClosed).
	OutcomeFailedClosed
	// OutcomeKeyError: the request had no key and was answered 400
	// (served under WithDryRun).
	OutcomeKeyError
	// OutcomeCostError: the cost function failed or returned a cost <= 0,
	// and the request was answered 500 (served under WithDryRun).
	OutcomeCostError
	// OutcomeCanceled: the request's own context ended (the client hung
	// up, a server timeout) while the limiter or the policy function was
	// deciding, or during a leaky-bucket delay. Not a limiter failure,
	// whatever WithFailClosed says: the next handler is not run and the
	// answer is 503, without rate-limit headers after a failed decision,
	// with them after a delay (served under WithDryRun).
	OutcomeCanceled
)

// String returns the outcome as metrics label it: "allowed", "denied",
// "dry-run", "failed-open", "failed-closed", "key-error", "cost-error" or
// "canceled".
func (o Outcome) String() string {
	switch o {
	case OutcomeAllowed:
		return "allowed"
	case OutcomeDenied:
		return "denied"
	case OutcomeDryRun:
		return "dry-run"
	case OutcomeFailedOpen:
		return "failed-open"
	case OutcomeFailedClosed:
		return "failed-closed"
	case OutcomeKeyError:
		return "key-error"
	case OutcomeCostError:
		return "cost-error"
	case OutcomeCanceled:
		return "canceled"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// WithHook adds f, called with the [Event] of every request that is not
// skipped, on the request's goroutine: keep it fast and never block. Hooks
// run in the order they were added; each WithHook adds one (metrics and a
// log at once). A middleware without hooks does not read the clock for
// Latency. nethttp/sloghook, promhook and otelhook are ready-made.
func WithHook(f func(Event)) Option {
	if f == nil {
		panic(nilFunc("WithHook"))
	}
	return func(c *config) { c.hooks = append(c.hooks, f) }
}

// WithPolicyFunc chooses the policy of each request: f gets the request and
// its key and returns the policy to decide it under (a plan looked up from
// an API key, a route's own limit), which the limiter applies with
// [core.PolicyLimiter].AllowPolicy; the middleware panics at construction if
// the limiter is not a core.PolicyLimiter. The headers describe the policy
// applied, by its name. An error from f (f gets the request, and so its
// context) is handled as a limiter failure ([WithFailClosed]), its text
// prefixed "policy func: ", with no rate-limit header, as no policy is
// known. So is a policy whose name is not printable ASCII, or that the
// limiter rejects ([core.Policy.Validate]). f runs after the key and the
// cost are known; WithHook's Latency does not include it.
func WithPolicyFunc(f func(r *http.Request, key string) (core.Policy, error)) Option {
	if f == nil {
		panic(nilFunc("WithPolicyFunc"))
	}
	return func(c *config) { c.policy = f }
}
