package nethttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/internal/cow"
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
// printable ASCII, or [WithPolicyFunc] with a limiter that is not a
// [core.PolicyLimiter]. A nil next serves admitted requests with
// http.NotFoundHandler.
func Middleware(lim core.Limiter, opts ...Option) func(http.Handler) http.Handler {
	return newEngine("Middleware", lim, opts).wrap
}

// Engine is [Middleware] without its net/http shape, for adapters of routers
// whose middleware has another shape (ginmw and echomw are): [Engine.Check]
// decides a request and sets its headers, [Engine.Respond] writes the answer
// to a [Rejection], as Middleware does. It is safe for concurrent use.
type Engine struct {
	lim      core.Limiter
	plim     core.PolicyLimiter // lim, with WithPolicyFunc
	cfg      config
	render   renderer                        // for lim.Policy()
	renders  cow.Map[core.Policy, *renderer] // for other policies: see rendererFor
	deny     func(http.ResponseWriter, *http.Request, core.Decision)
	keyError func(http.ResponseWriter, *http.Request, error)
	passes   bool // see PassesRequest
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
	e := &Engine{lim: lim, deny: denyText, keyError: keyErrorText, renders: cow.Map[core.Policy, *renderer]{Max: maxRenderers}}
	for _, o := range opts {
		if o == nil {
			panic(fmt.Errorf("nethttp: %s: nil Option", fn))
		}
		o(&e.cfg)
	}
	c := &e.cfg
	e.passes = c.key != nil || c.fallback != nil || c.cost != nil || len(c.skip) > 0 || c.policy != nil || len(c.hooks) > 0
	if e.cfg.key == nil {
		e.cfg.key = keyfunc.IP()
	}
	if e.cfg.deny != nil {
		e.deny = e.cfg.deny
	}
	if e.cfg.keyError != nil {
		e.keyError = e.cfg.keyError
	}
	p := lim.Policy()
	if err := checkPolicyName(p.Name); err != nil {
		panic(fmt.Errorf("nethttp: %s: %w", fn, err))
	}
	if e.cfg.policy != nil {
		pl, ok := lim.(core.PolicyLimiter)
		if !ok {
			panic(fmt.Errorf("nethttp: %s: WithPolicyFunc needs a core.PolicyLimiter, and %T is not one", fn, lim))
		}
		e.plim = pl
	}
	e.render = newRenderer(p, e.cfg.style, e.cfg.resetUnix)
	return e
}

// wrap is the middleware: it serves r with next unless Check rejects it, in
// which case Respond answers.
func (e *Engine) wrap(next http.Handler) http.Handler {
	if next == nil {
		next = http.NotFoundHandler()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rej := e.Check(w, r); rej != nil {
			e.Respond(w, r, rej)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Check decides r: it sets the rate-limit headers on w.Header(), waits out a
// leaky-bucket delay and calls the hooks, but writes no status and no body.
// It returns nil when the request goes on to the next handler, and otherwise
// the [Rejection] to answer, with Respond or the router's own error
// rendering. r is the request the key functions see: for [keyfunc.Route], a
// shallow copy with the router's route pattern in Request.Pattern (see the
// Engine example), never the caller's request modified.
func (e *Engine) Check(w http.ResponseWriter, r *http.Request) *Rejection {
	for _, skip := range e.cfg.skip {
		if skip(r) {
			return nil
		}
	}
	key, err := e.cfg.key(r)
	if err != nil && e.cfg.fallback != nil {
		key, err = e.cfg.fallback(r)
	}
	if err != nil {
		return e.reject(Event{Request: r, Outcome: OutcomeKeyError, Decision: e.knownBeforeCall(), Err: err},
			&Rejection{Status: http.StatusBadRequest, Err: err, kind: kindKey})
	}
	n := int64(1)
	if e.cfg.cost != nil {
		if n, err = e.cfg.cost(r); err != nil {
			err = fmt.Errorf("cost function: %w", err)
		} else if n <= 0 {
			err = fmt.Errorf("cost function returned %d: %w", n, core.ErrInvalidCost)
		}
		if err != nil {
			return e.reject(Event{Request: r, Key: key, Outcome: OutcomeCostError, Decision: e.knownBeforeCall(), Err: err},
				&Rejection{Status: http.StatusInternalServerError, Err: err, kind: kindCost})
		}
	}

	var p core.Policy // the request's own policy, with WithPolicyFunc
	if e.cfg.policy != nil {
		var perr error
		p, perr = e.cfg.policy(r, key)
		if perr == nil {
			perr = checkPolicyName(p.Name)
		}
		if perr != nil {
			// No policy, so nothing known to write: a zero Decision.
			return e.failure(w, Event{Request: r, Key: key, Cost: n, Err: fmt.Errorf("policy func: %w", perr)})
		}
	}
	// The clock is read for the hooks' Latency only.
	hooked := len(e.cfg.hooks) > 0
	var (
		d       core.Decision
		start   time.Time
		latency time.Duration
	)
	if hooked {
		start = time.Now()
	}
	if e.plim == nil {
		d, err = e.lim.AllowN(r.Context(), key, n)
	} else {
		d, err = e.plim.AllowPolicy(r.Context(), p, key, n)
	}
	if hooked {
		latency = time.Since(start)
	}
	if err != nil {
		switch {
		case errors.Is(err, core.ErrCostExceedsCapacity):
			// A decision, not a failure: deny, and the zero RetryAfter
			// keeps Retry-After out, as waiting cannot help. err stays,
			// for the hooks and the Rejection.
			d.Allowed, d.RetryAfter = false, 0
		case errors.Is(err, core.ErrInvalidCost):
			applied := e.render.policy
			if e.plim != nil {
				applied = p
			}
			known := core.Decision{Limit: applied.Limit, Policy: applied}
			return e.reject(Event{Request: r, Key: key, Outcome: OutcomeCostError, Decision: known, Err: err, Latency: latency},
				&Rejection{Status: http.StatusInternalServerError, Err: err, kind: kindCost})
		default:
			if e.plim != nil {
				if verr := p.Validate(); verr != nil {
					// An invalid policy from the policy func: no limit is
					// known, so nothing is advertised (checked here, off
					// the path of every request, as the limiter rejects it).
					return e.failure(w, Event{Request: r, Key: key, Cost: n, Err: fmt.Errorf("policy func: %w", verr), Latency: latency})
				}
			}
			// What is known of the limit: the store's Limit and Policy,
			// or else those of the policy the call was to apply.
			known := core.Decision{Limit: d.Limit, Policy: d.Policy, Source: d.Source}
			if known.Policy == (core.Policy{}) {
				known.Policy = e.render.policy
				if e.plim != nil {
					known.Policy = p
				}
			}
			if known.Limit == 0 {
				known.Limit = known.Policy.Limit
			}
			return e.failure(w, Event{Request: r, Key: key, Cost: n, Decision: known, Err: err, Latency: latency, LimiterCalled: true})
		}
	}
	// Without header fields a denial needs only Retry-After, which any
	// renderer writes.
	rd := &e.render
	if rd.style != HeadersNone {
		rd = e.rendererFor(d.Policy)
	}
	rd.write(w.Header(), d, !d.Allowed && !e.cfg.dryRun)
	var rej *Rejection
	outcome := OutcomeAllowed
	switch {
	case e.cfg.dryRun:
		if !d.Allowed {
			outcome = OutcomeDryRun
		}
	case !d.Allowed:
		outcome = OutcomeDenied
		rej = &Rejection{Status: http.StatusTooManyRequests, Decision: d, Err: err, kind: kindDenied}
	case d.Delay > 0:
		if rej = e.delay(r, d); rej != nil {
			outcome, err = OutcomeCanceled, rej.Err
		}
	}
	if hooked {
		e.emit(Event{Request: r, Key: key, Cost: n, Outcome: outcome, Decision: d, Err: err, Latency: latency, LimiterCalled: true})
	}
	return rej
}

// PassesRequest reports whether Check hands its request to a function of
// the options (a key, skip, cost or policy function, or a hook). When it
// does not, Check reads only the request's RemoteAddr and context, so an
// adapter may pass the request as it came and build its copy only for
// Respond.
func (e *Engine) PassesRequest() bool { return e.passes }

// knownBeforeCall is what an Event can say of the limit before the policy
// is looked up: the limiter's own Limit and Policy, or nothing with
// WithPolicyFunc, whose policy depends on the key.
func (e *Engine) knownBeforeCall() core.Decision {
	if e.cfg.policy != nil {
		return core.Decision{}
	}
	return core.Decision{Limit: e.render.policy.Limit, Policy: e.render.policy}
}

// emit calls the hooks with ev.
func (e *Engine) emit(ev Event) {
	for _, h := range e.cfg.hooks {
		h(ev)
	}
}

// reject reports a key or cost error to the hooks and applies the policy for
// it: rej, or nil (serve) in dry-run mode.
func (e *Engine) reject(ev Event, rej *Rejection) *Rejection {
	e.emit(ev)
	if e.cfg.dryRun {
		return nil
	}
	return rej
}

// failure handles a limiter or policy-function failure, ev.Err: a request
// whose own context has ended is canceled (503, no headers: the client is
// gone); otherwise the request is served (fail open, or dry run) or answered
// 503 (WithFailClosed), either way with the limit and policy known from
// ev.Decision, never Remaining or Reset, which are not.
func (e *Engine) failure(w http.ResponseWriter, ev Event) *Rejection {
	if canceled(ev.Request.Context(), ev.Err) {
		ev.Outcome = OutcomeCanceled
		return e.reject(ev, &Rejection{Status: http.StatusServiceUnavailable, Decision: ev.Decision, Err: ev.Err, kind: kindCanceled})
	}
	if ev.Decision.Policy != (core.Policy{}) {
		e.rendererFor(ev.Decision.Policy).writeKnown(w.Header(), ev.Decision.Limit)
	}
	// A limiter used after its Close is a mistake of the program, not an
	// outage: answered 503 whatever the failure policy, never unlimited.
	if e.cfg.dryRun || !e.cfg.failClosed && !errors.Is(ev.Err, core.ErrClosed) {
		ev.Outcome = OutcomeFailedOpen
		e.emit(ev)
		return nil
	}
	ev.Outcome = OutcomeFailedClosed
	e.emit(ev)
	var known interface{ RetryAfter() time.Duration }
	if errors.As(ev.Err, &known) && known.RetryAfter() > 0 {
		w.Header().Set(HeaderRetryAfter, strconv.FormatInt(max(ceilSeconds(known.RetryAfter()), 1), 10))
	}
	return &Rejection{Status: http.StatusServiceUnavailable, Decision: ev.Decision, Err: ev.Err, kind: kindStore}
}

// canceled reports whether err comes from ctx having ended: the caller's
// own cancellation or deadline, not a failure of the limiter. A store's own
// timeout, on a context that has not ended, is a failure.
func canceled(ctx context.Context, err error) bool {
	if ctx.Err() == nil {
		return false
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Cause(ctx))
}

// delay holds an admitted leaky-bucket request for d.Delay. A timer, not
// time.Sleep, so that a request whose context ends (client gone, server
// timeout) is let go at once, with a 503 rather than the empty 200 the
// server would send if the handler returned without writing.
func (e *Engine) delay(r *http.Request, d core.Decision) *Rejection {
	t := time.NewTimer(d.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-r.Context().Done():
		return &Rejection{Status: http.StatusServiceUnavailable, Decision: d, Err: r.Context().Err(), kind: kindCanceled}
	}
}

// Respond writes the answer to a rejection from Check, as Middleware does
// ([WithDenyHandler], [WithKeyErrorHandler], or a plain-text status). Nothing
// from the request or from rej.Err is written.
func (e *Engine) Respond(w http.ResponseWriter, r *http.Request, rej *Rejection) {
	switch rej.kind {
	case kindDenied:
		e.deny(w, r, rej.Decision)
	case kindKey:
		e.keyError(w, r, rej.Err)
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
	// Status is the answer's status, by Outcome: 429 OutcomeDenied, 400
	// OutcomeKeyError, 500 OutcomeCostError (Err wraps core.ErrInvalidCost
	// for a cost <= 0), 503 OutcomeFailedClosed and OutcomeCanceled (Err is,
	// or wraps, the context's error).
	Status int
	// Decision is as in the request's Event: the limiter's decision for 429
	// and for a delayed request whose context ended, what is known of the
	// limit for a failure, zero otherwise.
	Decision core.Decision
	Err      error // the cause, as in Event.Err, for logs: never send it to the client

	kind rejectionKind
}

type rejectionKind uint8

const (
	kindDenied rejectionKind = iota
	kindKey
	kindCost
	kindStore
	kindCanceled
)

func (r *Rejection) Error() string {
	var what string
	switch r.kind {
	case kindDenied:
		what = "rate limit exceeded"
	case kindKey:
		what = "no rate-limit key"
	case kindCost:
		what = "invalid request cost"
	case kindStore:
		what = "limiter failed"
	case kindCanceled:
		what = "request ended before it was served"
	}
	if r.Err != nil {
		return "nethttp: " + what + ": " + r.Err.Error()
	}
	return "nethttp: " + what
}

// Unwrap returns the cause.
func (r *Rejection) Unwrap() error { return r.Err }
