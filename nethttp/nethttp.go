package nethttp

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/keyfunc"
)

// Middleware returns net/http middleware that limits requests with lim. It
// returns an error for a nil limiter, an invalid option, or a policy name
// that cannot be sent in a header. Wrap a whole mux for a global limit, or
// one handler for a per-route limit:
//
//	perIP, err := nethttp.Middleware(lim)
//	mux.Handle("POST /login", perIP(loginHandler))
func Middleware(lim core.Limiter, opts ...Option) (func(http.Handler) http.Handler, error) {
	e, err := NewEngine(lim, opts...)
	if err != nil {
		return nil, err
	}
	return e.Wrap, nil
}

// Engine holds every HTTP semantic of rate limiting (keys, costs, headers,
// denial, delays, failure policy) once, for Middleware and for the adapters
// of other routers, which call Check and Respond from their own middleware
// shape. It is safe for simultaneous use by multiple goroutines.
type Engine struct {
	lim      core.Limiter
	cfg      config
	render   renderer
	deny     func(http.ResponseWriter, *http.Request, core.Decision)
	keyError func(http.ResponseWriter, *http.Request, error)
}

// NewEngine builds the engine behind Middleware, for adapters. See Middleware
// for the errors.
func NewEngine(lim core.Limiter, opts ...Option) (*Engine, error) {
	if lim == nil {
		return nil, errNilLimiter
	}
	e := &Engine{lim: lim, deny: denyText, keyError: keyErrorText}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("nethttp: nil Option")
		}
		if err := o(&e.cfg); err != nil {
			return nil, err
		}
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
		return nil, err
	}
	e.render = newRenderer(p, e.cfg.style, e.cfg.resetUnix).withNumbers()
	return e, nil
}

// Wrap is the middleware: it serves r with next unless Check rejects it, in
// which case Respond answers. A nil next serves admitted requests with
// http.NotFoundHandler.
func (e *Engine) Wrap(next http.Handler) http.Handler {
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
// the request should go on to the next handler, and otherwise the
// Rejection to answer with Respond (or, for a framework with its own error
// rendering, to return as an error). On the admitted path it allocates
// twice itself (one string holding every header value, one slice backing
// them), plus whatever the key function and the limiter allocate.
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
		return e.fail(r, &Rejection{Status: http.StatusBadRequest, Err: err, kind: kindKey, UserHandler: e.cfg.keyError != nil})
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
		return &Rejection{Status: http.StatusTooManyRequests, Decision: d, Err: err, kind: kindDenied, UserHandler: e.cfg.deny != nil}
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

// Respond writes the response for a rejection from Check: the denial handler
// for a 429, the key-error handler for a 400, and a plain-text status
// otherwise. Nothing from the request or from rej.Err is written.
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

// Rejection is a request Check did not let through, with the status it is to
// be answered with. It is an error, so that adapters for frameworks that
// render errors themselves (echo) can return it.
type Rejection struct {
	// Status is the HTTP status of the answer:
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
	// UserHandler reports that an option (WithDenyHandler,
	// WithKeyErrorHandler) supplies the response to this rejection: an
	// adapter that otherwise lets its framework render errors calls Respond
	// for it.
	UserHandler bool

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
