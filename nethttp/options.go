package nethttp

import (
	"fmt"
	"net/http"
	"reflect"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/keyfunc"
)

// Option configures [Middleware], [NewEngine] and the adapters. An option
// given a nil function or an invalid value panics, naming itself. Each
// option replaces an earlier one of the same name, except WithSkip and
// WithHook, which add up.
type Option func(*config)

type config struct {
	key        keyfunc.Func
	fallback   keyfunc.Func
	keyError   func(http.ResponseWriter, *http.Request, error)
	cost       func(*http.Request) (int64, error)
	skip       []func(*http.Request) bool
	failClosed bool
	dryRun     bool
	style      HeaderStyle
	resetUnix  bool
	deny       func(http.ResponseWriter, *http.Request, core.Decision)
	hooks      []func(Event)
	policy     func(*http.Request, string) (core.Policy, error)
	finalCost  func(status int, h http.Header, charged int64) int64
}

// mustFunc panics when option is given a nil function f: a mistake in the
// program, reported where it is made. (f is any of the options' function
// types, so reflect tells a nil one.)
func mustFunc(option string, f any) {
	if reflect.ValueOf(f).IsNil() {
		panic(fmt.Errorf("nethttp: %s: nil function", option))
	}
}

// WithKeyFunc sets how a request is turned into the key it is limited under
// (default [keyfunc.IP]). See WithKeyFallback for when it fails.
func WithKeyFunc(f keyfunc.Func) Option {
	mustFunc("WithKeyFunc", f)
	return func(c *config) { c.key = f }
}

// WithKeyFallback sets a key function used when the main one fails (for
// instance a per-API-key limit that falls back to the client's IP when the
// request carries no key). When both fail, or without a fallback, the
// request is rejected (served in dry-run mode): see WithKeyErrorHandler.
func WithKeyFallback(f keyfunc.Func) Option {
	mustFunc("WithKeyFallback", f)
	return func(c *config) { c.fallback = f }
}

// WithKeyErrorHandler replaces the response to a request whose key could not
// be determined. It receives the key function's error (typically wrapping
// [keyfunc.ErrNoKey]), which must not be echoed to the client. The default
// answers 400 Bad Request with a short plain-text body; an API that requires
// a key might answer 401 with a WWW-Authenticate challenge instead.
func WithKeyErrorHandler(f func(w http.ResponseWriter, r *http.Request, err error)) Option {
	mustFunc("WithKeyErrorHandler", f)
	return func(c *config) { c.keyError = f }
}

// WithCostFunc sets the cost of a request (weighted limiting, for instance by
// the size of a batch). The default cost is 1. An error from f, or a cost
// <= 0, is a server bug: the request is answered 500 Internal Server Error
// (served in dry-run mode) and the hooks get [OutcomeCostError].
func WithCostFunc(f func(*http.Request) (int64, error)) Option {
	mustFunc("WithCostFunc", f)
	return func(c *config) { c.cost = f }
}

// WithSkip exempts the requests for which f returns true (health checks,
// allowlists): they pass untouched, with no rate-limit headers and no hooks
// called. A request is skipped when any WithSkip function returns true.
func WithSkip(f func(*http.Request) bool) Option {
	mustFunc("WithSkip", f)
	return func(c *config) { c.skip = append(c.skip, f) }
}

// WithFailClosed answers 503 Service Unavailable when the limiter fails (a
// store error other than a denial) or the [WithPolicyFunc] function returns
// an error. The default is to fail open: the request is served. Either way
// the hooks get the error ([OutcomeFailedOpen] or [OutcomeFailedClosed]).
// The 503 carries Retry-After when the error has a method RetryAfter()
// time.Duration returning more than 0, as the Redis store's errors do while
// its circuit breaker is open. A limiter used after its Close
// ([core.ErrClosed]) is answered 503 whatever the failure policy (served
// under WithDryRun).
func WithFailClosed() Option {
	return func(c *config) { c.failClosed = true }
}

// WithDryRun makes the middleware compute every decision, call the hooks and
// write the rate-limit headers, but never block: denied requests are served
// (without Retry-After, as [OutcomeDryRun]), leaky-bucket delays are not
// applied, and requests with key, cost or limiter errors are served too.
// Watch the hooks ([WithHook]), then remove WithDryRun.
func WithDryRun() Option {
	return func(c *config) { c.dryRun = true }
}

// WithHeaderStyle chooses the rate-limit header fields (default
// [HeadersXRateLimit]). It panics for a value not declared.
func WithHeaderStyle(s HeaderStyle) Option {
	if !s.valid() {
		panic(fmt.Errorf("nethttp: WithHeaderStyle: unknown header style %v", s))
	}
	return func(c *config) { c.style = s }
}

// WithResetAsUnixTime writes X-RateLimit-Reset as the Unix time (in
// seconds, rounded up) at which the full quota is back, as GitHub's API
// does. The IETF RateLimit field's t stays in seconds from now.
func WithResetAsUnixTime() Option {
	return func(c *config) { c.resetUnix = true }
}

// WithDenyHandler replaces the answer to a denial. It is called with the
// rate-limit headers and Retry-After set, and must write the status
// (normally 429) and body. A d.RetryAfter of 0 means waiting cannot help
// ([core.ErrCostExceedsCapacity]). The default writes "Too Many Requests" as
// text/plain; [ProblemJSON] writes RFC 9457 problem details.
func WithDenyHandler(f func(w http.ResponseWriter, r *http.Request, d core.Decision)) Option {
	mustFunc("WithDenyHandler", f)
	return func(c *config) { c.deny = f }
}
