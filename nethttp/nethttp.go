package nethttp

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/keyfunc"
)

// Middleware returns net/http middleware that limits requests with lim, in
// the shape every net/http router takes. Wrap a whole mux for a global
// limit, or one handler for a per-route limit:
//
//	http.ListenAndServe(addr, nethttp.Middleware(lim)(mux))
//	mux.Handle("POST /login", nethttp.Middleware(loginLim)(login))
//
// It panics for a nil limiter, a nil Option, or a policy name that is not
// printable ASCII, which cannot be sent in a header; the options panic on
// invalid arguments. A nil next serves admitted requests with
// http.NotFoundHandler.
func Middleware(lim core.Limiter, opts ...Option) func(http.Handler) http.Handler {
	return newEngine("Middleware", lim, opts).wrap
}

// Engine is [Middleware] without its net/http shape, for adapters of routers
// whose middleware has another shape: [Engine.Check] decides a request and
// sets its headers, [Engine.Respond] writes the answer to a [Rejection]. It
// holds every HTTP rule of the package, so an adapter built on it behaves as
// Middleware does; ginmw and echomw are. It is safe for simultaneous use by
// multiple goroutines.
type Engine struct {
	lim      core.Limiter
	cfg      config
	render   renderer
	deny     func(http.ResponseWriter, *http.Request, core.Decision)
	keyError func(http.ResponseWriter, *http.Request, error)
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
	e := &Engine{lim: lim, deny: denyText, keyError: keyErrorText}
	for _, o := range opts {
		if o == nil {
			panic(fmt.Errorf("nethttp: %s: nil Option", fn))
		}
		o(&e.cfg)
	}
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
	e.render = newRenderer(p, e.cfg.style, e.cfg.resetUnix).withNumbers()
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

// Check decides r: it computes the key and cost, asks the limiter, calls the
// hooks, sets the rate-limit headers on w.Header() and waits out a
// leaky-bucket delay. It writes no status and no body. It returns nil when
// the request goes on to the next handler, and otherwise the [Rejection] to
// answer, with Respond or the router's own error rendering.
//
// An adapter passes the request its key functions are to see: for
// [keyfunc.Route], a shallow copy with the router's route pattern in
// Request.Pattern (see the Engine example), never the caller's request
// modified.
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
		return e.fail(r, &Rejection{Status: http.StatusBadRequest, Err: err, kind: kindKey})
	}
	n := int64(1)
	if e.cfg.cost != nil {
		if n, err = e.cfg.cost(r); err != nil {
			err = fmt.Errorf("cost function: %w", err)
		} else if n <= 0 {
			err = fmt.Errorf("cost function returned %d: %w", n, core.ErrInvalidCost)
		}
		if err != nil {
			return e.fail(r, &Rejection{Status: http.StatusInternalServerError, Err: err, kind: kindCost})
		}
	}

	d, err := e.lim.AllowN(r.Context(), key, n)
	if err != nil {
		switch {
		case errors.Is(err, core.ErrCostExceedsCapacity):
			// A decision, not a failure: deny, and the zero RetryAfter
			// keeps Retry-After out, as waiting cannot help.
			d.Allowed, d.RetryAfter = false, 0
		case errors.Is(err, core.ErrInvalidCost):
			return e.fail(r, &Rejection{Status: http.StatusInternalServerError, Err: err, kind: kindCost})
		default:
			return e.fail(r, &Rejection{Status: http.StatusServiceUnavailable, Err: err, kind: kindStore})
		}
	}
	if e.cfg.onDecision != nil {
		e.cfg.onDecision(r, d)
	}
	e.render.write(w.Header(), d, !d.Allowed && !e.cfg.dryRun)
	if e.cfg.dryRun {
		return nil
	}
	if !d.Allowed {
		return &Rejection{Status: http.StatusTooManyRequests, Decision: d, Err: err, kind: kindDenied}
	}
	if d.Delay > 0 {
		return e.delay(r, d)
	}
	return nil
}

// fail reports a key, cost or store error to the error hook and applies the
// policy for it: a rejection, or nil (serve) in dry-run mode and for a store
// failure that fails open.
func (e *Engine) fail(r *http.Request, rej *Rejection) *Rejection {
	if e.cfg.onError != nil {
		e.cfg.onError(r, rej)
	}
	if e.cfg.dryRun || rej.kind == kindStore && !e.cfg.failClosed {
		return nil
	}
	return rej
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

// Respond writes the answer to a rejection from Check, as Middleware does:
// the [WithDenyHandler] handler (by default a plain-text 429) for a denial,
// the [WithKeyErrorHandler] handler (by default a plain-text 400) for a
// request without a key, and a plain-text status otherwise. Nothing from the
// request or from rej.Err is written.
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
// status it is answered with. It is the error the [WithErrorHook] hook
// receives, and the one an adapter for a router with its own error rendering
// (echomw) returns, so that a custom error handler can get the decision
// with errors.As.
type Rejection struct {
	// Status is the HTTP status of the answer, and tells the kind of
	// rejection:
	//   - 429 Too Many Requests: denied (Err is nil, or wraps
	//     core.ErrCostExceedsCapacity for a cost that can never pass);
	//   - 400 Bad Request: no key (Err is the key function's error);
	//   - 500 Internal Server Error: the cost function failed or returned a
	//     cost <= 0 (Err wraps core.ErrInvalidCost for the latter);
	//   - 503 Service Unavailable: the limiter failed and WithFailClosed is
	//     set (Err is its error), or the request's context ended during a
	//     leaky-bucket delay (Err is the context's error).
	Status int
	// Decision is the limiter's decision, for 429 and for a delayed request
	// whose context ended; zero otherwise.
	Decision core.Decision
	// Err is the cause, for logs. Never send it to the client.
	Err error

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
		what = "request ended during its rate-limit delay"
	}
	if r.Err != nil {
		return "nethttp: " + what + ": " + r.Err.Error()
	}
	return "nethttp: " + what
}

// Unwrap returns the cause.
func (r *Rejection) Unwrap() error { return r.Err }
