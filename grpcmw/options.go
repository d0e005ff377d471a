package grpcmw

import (
	"context"
	"fmt"
	"reflect"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Option configures [UnaryServerInterceptor], [StreamServerInterceptor]
// and [NewLimiter]. An option given a nil function or an invalid value
// panics, naming itself. Each option replaces an earlier one of the same
// name, except WithMethodPolicy, WithSkip and WithHook, which add up.
type Option func(*config)

type config struct {
	key        KeyFunc
	methods    map[string]core.Policy
	cost       func(ctx context.Context, fullMethod string, msg any) (int64, error)
	perMessage bool
	skip       []func(ctx context.Context, fullMethod string) bool
	failClosed bool
	dryRun     bool
	style      nethttp.HeaderStyle
	hooks      []func(nethttp.Event)
	final      func(ctx context.Context, fullMethod string, resp any, err error, charged int64) int64
}

// mustFunc panics when option is given a nil function f (any of the
// options' function types, so reflect tells a nil one).
func mustFunc(option string, f any) {
	if reflect.ValueOf(f).IsNil() {
		panic(fmt.Errorf("grpcmw: %s: nil function", option))
	}
}

// WithKey sets how a call is turned into the key it is limited under
// (default [Peer]). A call without a key is answered codes.Unauthenticated:
// the caller did not say who it is (a missing API key, most often); it is
// never let through unlimited.
func WithKey(f KeyFunc) Option {
	mustFunc("WithKey", f)
	return func(c *config) { c.key = f }
}

// WithMethodPolicy limits calls of fullMethod ("/package.Service/Method")
// under p instead of the limiter's own policy: one line per method that
// has a limit of its own. Its calls are counted apart from every other
// method's (their key is joined to the method, as [Join](Method(), key)
// would), and the other methods share the limiter's policy. The limiter
// must be a [core.PolicyLimiter] (the in-memory limiter and the Redis store
// are) and p valid, of the limiter's algorithm, and made with core.AllOf
// only if the limiter's own policy is: the interceptor panics at
// construction otherwise.
//
//	grpcmw.WithMethodPolicy("/auth.Auth/Login", core.TokenBucket(5, time.Minute).WithName("login"))
func WithMethodPolicy(fullMethod string, p core.Policy) Option {
	return func(c *config) {
		if c.methods == nil {
			c.methods = map[string]core.Policy{}
		}
		c.methods[fullMethod] = p
	}
}

// WithCostFunc sets the cost of a call: msg is the request of a unary call,
// nil when a stream opens, and each message a stream receives under
// [WithPerMessage]. The default cost is 1. An error from f, or a cost <= 0,
// is a server bug: the call is answered codes.Internal (served under
// WithDryRun).
func WithCostFunc(f func(ctx context.Context, fullMethod string, msg any) (int64, error)) Option {
	mustFunc("WithCostFunc", f)
	return func(c *config) { c.cost = f }
}

// WithFinalCost settles the cost of each admitted call once its handler
// has returned, for a cost known only then (the tokens a completion used,
// a failed login, a call the server failed not charged): the call is
// charged an estimate before its handler runs ([WithCostFunc]'s, or 1),
// and after it the difference between its final cost and that charge,
// with [core.Settler].Settle, under nethttp.WithFinalCost's rules: more is
// a debt, charged and never refused; less is a refund, never beyond the
// charge nor past the window it was charged in; 0 gives the whole charge
// back.
//
// The final cost is the handler's, if it called [SetFinalCost] with the
// call's context, and otherwise f's, given the handler's response (nil for
// a stream) and error (status.Code(err) is its code) and what was charged:
// f returns charged to keep the charge. f runs on the call's goroutine once
// the handler has returned; the limiter's call runs on a goroutine of its
// own, bounded by 10 seconds whatever the limiter's own timeout, so that
// it never delays the answer. It is not retried: a settlement the limiter
// cannot take (its error or timeout, or a final cost < 0) is one more
// Event for the hooks, [nethttp.OutcomeSettleFailed], and the charge stays
// as it was.
//
// Only the calls and stream openings the limiter admitted
// ([nethttp.OutcomeAllowed], also under WithDryRun) are settled, not the
// messages of [WithPerMessage], nor a call whose handler panicked (the
// charge stays); a call or message charged and then
// canceled during its leaky-bucket delay was never served, and is settled
// at 0 without asking f. The limiter must be a core.Settler (the in-memory
// limiter and the Redis store are), and [NewLimiter] takes no
// WithFinalCost (go-grpc-middleware's Limit sees no response): either
// panics at construction.
func WithFinalCost(f func(ctx context.Context, fullMethod string, resp any, err error, charged int64) int64) Option {
	mustFunc("WithFinalCost", f)
	return func(c *config) { c.final = f }
}

// WithPerMessage also limits each message a stream receives, with the cost
// of [WithCostFunc] (1 by default), under the key and policy of the stream.
// The stream's opening is still decided first, so opening streams is never
// free. A denied message makes the handler's RecvMsg return the
// ResourceExhausted error (with RetryInfo): a handler that returns the
// error ends the stream with it. Per-message decisions write no header
// metadata (the stream's headers have usually gone); a leaky bucket's delay
// paces the messages.
func WithPerMessage() Option {
	return func(c *config) { c.perMessage = true }
}

// WithSkip exempts the calls for which f returns true (health checks,
// internal callers): they pass untouched, with no metadata and no hooks
// called. A call is skipped when any WithSkip function returns true.
func WithSkip(f func(ctx context.Context, fullMethod string) bool) Option {
	mustFunc("WithSkip", f)
	return func(c *config) { c.skip = append(c.skip, f) }
}

// WithFailClosed answers codes.Unavailable when the limiter fails (a store
// error other than a denial), with RetryInfo when the error has a method
// RetryAfter() time.Duration returning more than 0 (the Redis store's
// errors while its circuit breaker is open). The default is to fail open:
// the call is served. A limiter used after its Close ([core.ErrClosed]) is
// answered Unavailable whatever the failure policy. This is
// [nethttp.OutcomeOf]'s rule, the one every adapter follows.
func WithFailClosed() Option {
	return func(c *config) { c.failClosed = true }
}

// WithDryRun decides every call, writes the metadata and calls the hooks,
// but never blocks: denied calls are served (as [nethttp.OutcomeDryRun],
// without retry-after), leaky-bucket delays are not waited, and calls with
// key, cost or limiter errors are served too.
func WithDryRun() Option {
	return func(c *config) { c.dryRun = true }
}

// WithHeaderStyle chooses the rate-limit fields of the header metadata
// (default [nethttp.HeadersXRateLimit]), as for HTTP: the same fields, named
// in lower case. It panics for a value not declared.
func WithHeaderStyle(s nethttp.HeaderStyle) Option {
	if s > nethttp.HeadersNone {
		panic(fmt.Errorf("grpcmw: WithHeaderStyle: unknown header style %v", s))
	}
	return func(c *config) { c.style = s }
}

// WithHook adds f, called with the [nethttp.Event] of every call (and, under
// WithPerMessage, every message of a stream opened with a key) that is not
// skipped, on the call's
// goroutine: keep it fast. Event.Request is nil; the rest is as for HTTP, so
// nethttp/sloghook, promhook and otelhook work unchanged.
func WithHook(f func(nethttp.Event)) Option {
	mustFunc("WithHook", f)
	return func(c *config) { c.hooks = append(c.hooks, f) }
}
