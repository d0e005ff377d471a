package nethttp

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/keyfunc"
)

// Middleware returns net/http middleware that limits requests with lim, in
// the shape every net/http router takes. Wrap a whole mux for a global
// limit, or one handler for a per-route limit (http.Request.Pattern, and so
// [keyfunc.Route], is set only in the handlers registered on a ServeMux):
//
//	http.ListenAndServe(addr, nethttp.Middleware(lim)(mux))
//	mux.Handle("POST /login", nethttp.Middleware(loginLim)(login))
//
// It panics for a nil limiter, a nil Option, a policy name that is not
// printable ASCII, [WithPolicyFunc] with a limiter that is not a
// [core.PolicyLimiter], or [WithFinalCost] with one that is not a
// [core.Settler]. A nil next serves admitted requests with
// http.NotFoundHandler.
func Middleware(lim core.Limiter, opts ...Option) func(http.Handler) http.Handler {
	e := newEngine("Middleware", lim, opts)
	return func(next http.Handler) http.Handler { return e.Handler(next, nil) }
}

// Engine is [Middleware] without its net/http shape, for adapters of routers
// whose middleware has another shape (ginmw and echomw are): [Engine.Admit]
// decides a request and sets its headers, [Engine.Respond] writes the answer
// to a [Rejection], and [Engine.Settle] settles the cost of a request served,
// as Middleware does. It is safe for concurrent use.
type Engine struct {
	lim        core.Limiter
	plim       core.PolicyLimiter // lim, with WithPolicyFunc
	settler    core.Settler       // lim, with WithFinalCost
	settleWait time.Duration      // maxSettleWait
	cfg        config
	render     renderer     // for lim.Policy()
	renders    sync.Map     // core.Policy to *renderer, for other policies: see rendererFor
	nrenders   atomic.Int64 // in renders, at most maxRenderers
	passes     bool         // a function of the options gets the request: see Check
}

// NewEngine returns the engine of Middleware(lim, opts...). It panics as
// Middleware does.
func NewEngine(lim core.Limiter, opts ...Option) *Engine {
	return newEngine("NewEngine", lim, opts)
}

func newEngine(fn string, lim core.Limiter, opts []Option) *Engine {
	if lim == nil {
		panic(fmt.Errorf("nethttp: %s: nil limiter", fn))
	}
	if v := reflect.ValueOf(lim); v.Kind() == reflect.Pointer && v.IsNil() {
		// Typically the limiter of a constructor whose error was ignored.
		panic(fmt.Errorf("nethttp: %s: nil limiter (a nil %T)", fn, lim))
	}
	e := &Engine{lim: lim, cfg: config{deny: denyText, keyError: keyErrorText}}
	c := &e.cfg
	for _, o := range opts {
		if o == nil {
			panic(fmt.Errorf("nethttp: %s: nil Option", fn))
		}
		o(c)
	}
	e.passes = c.key != nil || c.fallback != nil || c.cost != nil || len(c.skip) > 0 || c.policy != nil || len(c.hooks) > 0
	if c.key == nil {
		c.key = keyfunc.IP()
	}
	p := lim.Policy()
	if err := checkPolicyName(p); err != nil {
		panic(fmt.Errorf("nethttp: %s: %w", fn, err))
	}
	if c.policy != nil {
		pl, ok := lim.(core.PolicyLimiter)
		if !ok {
			panic(fmt.Errorf("nethttp: %s: WithPolicyFunc needs a core.PolicyLimiter, and %T is not one", fn, lim))
		}
		e.plim = pl
	}
	if c.finalCost != nil {
		s, ok := lim.(core.Settler)
		if !ok {
			panic(fmt.Errorf("nethttp: %s: WithFinalCost needs a core.Settler, and %T is not one", fn, lim))
		}
		e.settler, e.settleWait = s, maxSettleWait
	}
	e.render = newRenderer(p, c.style, c.resetUnix)
	return e
}

// Check decides r: it sets the rate-limit headers on w.Header(), waits out a
// leaky-bucket delay and calls the hooks, but writes no status and no body.
// It returns nil when the request goes on to the next handler, and otherwise
// the [Rejection] to answer, with Respond or the router's own error
// rendering. Check settles no cost ([WithFinalCost]): an adapter that serves
// the request calls [Engine.Admit] and [Engine.Settle] instead.
//
// r is the request as it came. view, when not nil, returns the request that
// the functions of the options (key, skip, cost and policy functions,
// hooks) and Respond's handlers see instead: for an adapter, a shallow copy
// of r carrying the router's route pattern in Request.Pattern (for
// [keyfunc.Route]) and the router's own context, never r modified (see the
// Engine example). Check calls view at most once, and only when such a
// function is to see the request, so that a request no function reads
// costs no copy.
func (e *Engine) Check(w http.ResponseWriter, r *http.Request, view func() *http.Request) *Rejection {
	return e.check(w, r, view, new(Event))
}

// check is Check, filling in ev: its Request stays nil for a request
// skipped.
func (e *Engine) check(w http.ResponseWriter, r *http.Request, view func() *http.Request, ev *Event) *Rejection {
	if view != nil && e.passes {
		r, view = view(), nil
	}
	if e.skipped(r) {
		return nil
	}
	ev.Request = r
	e.decide(ev)
	e.setHeaders(w.Header(), ev)
	e.delay(ev)
	e.emit(ev)
	if ev.Outcome.status() == 0 || e.cfg.dryRun {
		return nil // served
	}
	return rejection(ev, view)
}

// skipped reports whether a WithSkip function exempts r.
func (e *Engine) skipped(r *http.Request) bool {
	return slices.ContainsFunc(e.cfg.skip, func(skip func(*http.Request) bool) bool { return skip(r) })
}

// decide fills in ev up to the limiter's classified answer: the request's
// key, its cost and its policy, then the limiter's call. A step that fails
// records its outcome and error, and the steps after it do not run.
func (e *Engine) decide(ev *Event) {
	if !e.keyOf(ev) || !e.costOf(ev) {
		if e.cfg.policy == nil { // else the policy, chosen later, is not known
			ev.Decision = core.Decision{Limit: e.render.policy.Limit, Policy: e.render.policy}
		}
		return
	}
	p := &e.render.policy // the limiter's own, unless WithPolicyFunc chooses
	var chosen core.Policy
	if e.cfg.policy != nil {
		if !e.policyOf(ev, &chosen) {
			return
		}
		p = &chosen
	}
	// The limiter's call; the clock is read for the hooks' Latency only.
	ctx := ev.Request.Context()
	var start time.Time
	if len(e.cfg.hooks) > 0 {
		start = time.Now()
	}
	var err error
	if e.plim == nil {
		ev.Decision, err = e.lim.AllowN(ctx, ev.Key, ev.Cost)
	} else {
		ev.Decision, err = e.plim.AllowPolicy(ctx, *p, ev.Key, ev.Cost)
	}
	if !start.IsZero() {
		ev.Latency = time.Since(start)
	}
	ev.LimiterCalled = true
	// Its classification.
	ev.Outcome, ev.Err = outcomeOf(ctx, ev.Decision.Allowed, err, e.cfg.failClosed, e.cfg.dryRun), err
	if ev.Outcome != OutcomeAllowed {
		e.keepKnown(ev, p)
	}
}

// keyOf sets ev.Key, from the key function or else its fallback.
func (e *Engine) keyOf(ev *Event) bool {
	key, err := e.cfg.key(ev.Request)
	if err != nil && e.cfg.fallback != nil {
		key, err = e.cfg.fallback(ev.Request)
	}
	if err != nil {
		ev.Outcome, ev.Err = OutcomeKeyError, err
		return false
	}
	ev.Key = key
	return true
}

// costOf sets ev.Cost: 1, or the cost function's (costFromFunc).
func (e *Engine) costOf(ev *Event) bool {
	if e.cfg.cost == nil {
		ev.Cost = 1
		return true
	}
	return e.costFromFunc(ev)
}

// costFromFunc sets ev.Cost to the cost function's, which must be > 0.
func (e *Engine) costFromFunc(ev *Event) bool {
	switch n, err := e.cfg.cost(ev.Request); {
	case err != nil:
		ev.Err = fmt.Errorf("cost function: %w", err)
	case n <= 0:
		ev.Err = fmt.Errorf("cost function returned %d: %w", n, core.ErrInvalidCost)
	default:
		ev.Cost = n
		return true
	}
	ev.Outcome = OutcomeCostError
	return false
}

// policyOf sets *p to the policy the WithPolicyFunc function chooses for
// ev's request.
func (e *Engine) policyOf(ev *Event, p *core.Policy) bool {
	var err error
	if *p, err = e.cfg.policy(ev.Request, ev.Key); err == nil {
		err = checkPolicyName(*p)
	}
	if err != nil {
		e.policyFailed(ev, err)
		return false
	}
	return true
}

// policyFailed records a policy the WithPolicyFunc function could not give:
// a failure, with no policy known, so nothing to advertise.
func (e *Engine) policyFailed(ev *Event, err error) {
	ev.Err = fmt.Errorf("policy func: %w", err)
	ev.Outcome = failureOutcome(ev.Request.Context(), ev.Err, e.cfg.failClosed, e.cfg.dryRun)
	ev.Decision, ev.LimiterCalled = core.Decision{}, false
}

// keepKnown keeps of the limiter's answer to a call under p, not an
// admission, what its outcome (classified by OutcomeOf's rule) says is
// known.
func (e *Engine) keepKnown(ev *Event, p *core.Policy) {
	d := &ev.Decision
	switch ev.Outcome {
	case OutcomeDenied, OutcomeDryRun:
		if ev.Err != nil {
			// A cost above capacity: the zero RetryAfter keeps
			// Retry-After out, as waiting cannot help.
			d.Allowed, d.RetryAfter = false, 0
		}
	case OutcomeCostError: // the limiter refused the cost: not a call that decided
		*d, ev.LimiterCalled = core.Decision{Limit: p.Limit, Policy: *p}, false
	default: // a failure, or the request's context ended while the limiter decided
		if e.cfg.policy != nil {
			// A policy from the policy func that the limiter rejects
			// (invalid, or not one it can apply), checked here, off the
			// path of every request.
			if verr := p.Validate(); verr != nil {
				e.policyFailed(ev, verr)
				return
			}
			if errors.Is(ev.Err, core.ErrAlgorithmMismatch) {
				e.policyFailed(ev, ev.Err)
				return
			}
		}
		// What is known of the limit: the store's Limit and Policy, or
		// else those of the policy the call was to apply.
		policy := cmp.Or(d.Policy, *p)
		*d = core.Decision{Limit: cmp.Or(d.Limit, policy.Limit), Policy: policy, Source: d.Source}
	}
}

// setHeaders writes the rate-limit fields of ev's outcome: those of the
// decision; for a limiter failure, what is known of the limit, never
// Remaining or Reset, which are not, and on a 503 Retry-After when the
// error knows it (the Redis store's errors while its circuit breaker is
// open have a method RetryAfter); nothing for a key or cost error or a
// request whose context ended while the limiter decided.
func (e *Engine) setHeaders(h http.Header, ev *Event) {
	d := &ev.Decision
	switch ev.Outcome {
	case OutcomeAllowed, OutcomeDenied, OutcomeDryRun:
		e.rendererFor(&d.Policy).write(h, d, ev.Outcome == OutcomeDenied)
	case OutcomeFailedOpen, OutcomeFailedClosed:
		if d.Policy != (core.Policy{}) {
			e.rendererFor(&d.Policy).writeKnown(h, d.Limit)
		}
		var known interface{ RetryAfter() time.Duration }
		if ev.Outcome == OutcomeFailedClosed && errors.As(ev.Err, &known) {
			if after := known.RetryAfter(); after > 0 {
				h.Set(HeaderRetryAfter, strconv.FormatInt(ceilSeconds(after), 10)) // >= 1
			}
		}
	}
}

// delay holds an admitted leaky-bucket request for its Delay (not under
// WithDryRun). A timer, not time.Sleep, so that a request whose context
// ends (client gone, server timeout) is let go at once, with a 503 rather
// than the empty 200 the server would send if the handler returned without
// writing.
func (e *Engine) delay(ev *Event) {
	if ev.Outcome == OutcomeAllowed && ev.Decision.Delay > 0 && !e.cfg.dryRun {
		wait(ev)
	}
}

// wait holds ev's request for its Delay, or until its context ends.
func wait(ev *Event) {
	t := time.NewTimer(ev.Decision.Delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ev.Request.Context().Done():
		ev.Outcome, ev.Err = OutcomeCanceled, ev.Request.Context().Err()
	}
}

// emit calls the hooks with ev.
func (e *Engine) emit(ev *Event) {
	for _, h := range e.cfg.hooks {
		h(*ev)
	}
}

// rejection is the answer to ev, a request not served: a Rejection with the
// status of its outcome, and the request Respond's handlers get (view's, if
// Check has not called it yet).
func rejection(ev *Event, view func() *http.Request) *Rejection {
	r := ev.Request
	if view != nil && (ev.Outcome == OutcomeDenied || ev.Outcome == OutcomeKeyError) {
		r = view()
	}
	return &Rejection{Outcome: ev.Outcome, Status: ev.Outcome.status(), Decision: ev.Decision, Err: ev.Err, request: r}
}

// Respond writes the answer to a rejection from Check, as Middleware does:
// [WithDenyHandler]'s or [WithKeyErrorHandler]'s (they get the request the
// options' functions see: see Check), or a plain-text status. Nothing from
// the request or from rej.Err is written.
func (e *Engine) Respond(w http.ResponseWriter, rej *Rejection) {
	switch rej.Outcome {
	case OutcomeDenied:
		e.cfg.deny(w, rej.request, rej.Decision)
	case OutcomeKeyError:
		e.cfg.keyError(w, rej.request, rej.Err)
	default:
		http.Error(w, http.StatusText(rej.Status), rej.Status)
	}
}

// Rejection is a request the middleware did not let through, with the
// status it is answered with. It is the error an adapter for a router with
// its own error rendering (echomw) returns, so that a custom error handler
// can get the decision with errors.As. Hooks get the same facts, and more,
// in an [Event].
type Rejection struct {
	// Outcome is what the middleware did with the request: OutcomeDenied,
	// OutcomeKeyError, OutcomeCostError, OutcomeFailedClosed or
	// OutcomeCanceled, as in its Event.
	Outcome Outcome
	// Status is the answer's status, by Outcome: 429 OutcomeDenied, 400
	// OutcomeKeyError, 500 OutcomeCostError (Err wraps core.ErrInvalidCost
	// for a cost <= 0), 503 OutcomeFailedClosed and OutcomeCanceled (Err is,
	// or wraps, the context's error).
	Status int
	// Decision is as in the request's Event: the limiter's decision for 429
	// and for a delayed request whose context ended, what is known of the
	// limit otherwise.
	Decision core.Decision
	Err      error // the cause, as in Event.Err, for logs: never send it to the client

	request *http.Request // for Respond's handlers
}

func (r *Rejection) Error() string {
	what := r.Outcome.String()
	if int(r.Outcome) < len(outcomes) && outcomes[r.Outcome].rejection != "" {
		what = outcomes[r.Outcome].rejection
	}
	if r.Err != nil {
		return "nethttp: " + what + ": " + r.Err.Error()
	}
	return "nethttp: " + what
}

// Unwrap returns the cause.
func (r *Rejection) Unwrap() error { return r.Err }
