package nethttp

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// WithFinalCost settles the cost of each admitted request once its response
// is written, for a cost known only then (the tokens an LLM completion
// used, a failed login, a 5xx not charged): the request is charged an
// estimate before its handler runs ([WithCostFunc]'s, or 1), and after it
// the difference between its final cost and that charge, with
// [core.Settler].Settle: more is a debt, charged and never refused (even
// past the limit's capacity: the key then waits until it is paid off);
// less is a refund, never beyond the charge nor past the window it was
// charged in; 0 gives the whole charge back.
//
// The final cost is the handler's, if it called [SetFinalCost], and
// otherwise f's, given the status sent (200 when the handler wrote
// nothing, as net/http sends), the response's header and what was
// charged: f returns charged to keep the charge. f runs on the request's
// goroutine once the handler has returned; the limiter's call runs on a
// goroutine of its own, bounded by 10 seconds whatever the limiter's own
// timeout, so that it never delays the response. It is not retried: a
// settlement the limiter cannot take (its error or timeout, or a final
// cost < 0) is one more Event for the hooks, [OutcomeSettleFailed], and
// the charge stays as it was.
//
// Only requests admitted by the limiter ([OutcomeAllowed]) are settled,
// also under [WithDryRun], so that the counts stay those that enforcing
// would see. A request skipped, denied (under dry run too), served after a
// failure ([OutcomeFailedOpen]) or canceled while the limiter decided is
// not, as nothing was charged; nor is one whose handler panicked (the
// charge stays). A request charged and then canceled during its
// leaky-bucket delay ([OutcomeCanceled], answered 503) was never served:
// it is settled at 0, its whole charge given back as far as the limiter
// gives back (a delaying leaky bucket: while no request was queued after
// it), and f is not asked. It panics at construction if the limiter is not
// a core.Settler.
func WithFinalCost(f func(status int, h http.Header, charged int64) int64) Option {
	mustFunc("WithFinalCost", f)
	return func(c *config) { c.finalCost = f }
}

// SetFinalCost sets the final cost of r, a request served behind a
// middleware with [WithFinalCost], from its handler: the tokens a
// completion used, once known. It takes precedence over the WithFinalCost
// function; the last call before the handler returns counts. Behind
// several such middlewares, each gets it. It returns an error, setting
// nothing, when cost < 0 or when no such middleware serves r.
func SetFinalCost(r *http.Request, cost int64) error {
	if cost < 0 {
		return fmt.Errorf("nethttp: SetFinalCost: a final cost is >= 0, got %d", cost)
	}
	st, _ := r.Context().Value(settleKey{}).(*settlement)
	if st == nil {
		return errNotSettled
	}
	for ; st != nil; st, _ = st.Context.Value(settleKey{}).(*settlement) {
		st.final.Store(cost)
	}
	return nil
}

var errNotSettled = errors.New("nethttp: SetFinalCost: the request is not served behind a middleware with WithFinalCost")

type settleKey struct{}

// settlement is the context of a request whose cost is settled after its
// response: its admission, and the final cost its handler set (-1: none).
type settlement struct {
	context.Context
	e     *Engine
	ev    Event
	final atomic.Int64
}

func (s *settlement) Value(key any) any {
	if _, ok := key.(settleKey); ok {
		return s
	}
	return s.Context.Value(key)
}

// maxSettleWait bounds a settlement's goroutine, whatever the limiter's own
// timeout: a Settler that never returns must not keep it. A variable for
// the tests only.
var maxSettleWait = 10 * time.Second

// Admit is Check for an adapter that serves the request: it also returns
// the request to serve, r itself unless the engine settles costs
// ([WithFinalCost]), and then a shallow copy whose context carries what
// [SetFinalCost] and Settle need. After the response, the adapter calls
// Settle with that request.
func (e *Engine) Admit(w http.ResponseWriter, r *http.Request, view func() *http.Request) (*http.Request, *Rejection) {
	var ev Event
	if rej := e.check(w, r, view, &ev); rej != nil {
		if e.settler != nil && rej.Outcome == OutcomeCanceled && ev.Decision.Allowed {
			// Charged, then let go during its delay: never served.
			go e.settle(&settlement{Context: r.Context(), e: e, ev: ev}, 0)
		}
		return nil, rej
	}
	if e.settler == nil || !ev.LimiterCalled || ev.Outcome != OutcomeAllowed {
		return r, nil
	}
	st := &settlement{Context: r.Context(), e: e, ev: ev}
	st.final.Store(-1)
	return r.WithContext(st), nil
}

// Settle settles the cost of r, a request Admit returned, whose response
// was written with status and header h: it returns at once, the limiter's
// call running on a goroutine of its own (see WithFinalCost). It does
// nothing for a request that is not settled.
func (e *Engine) Settle(r *http.Request, status int, h http.Header) {
	st, ok := r.Context().(*settlement)
	if !ok || st.e != e {
		return
	}
	cost := st.final.Load()
	if cost < 0 {
		cost = e.cfg.finalCost(status, h, st.ev.Cost)
	}
	if cost != st.ev.Cost {
		go e.settle(st, cost)
	}
}

// settle charges st's key the difference between cost and the charge, and
// reports a failure to the hooks.
func (e *Engine) settle(st *settlement, cost int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(st.Context), e.settleWait)
	defer cancel()
	start := time.Now()
	ev := st.ev
	if err := e.settler.Settle(ctx, ev.Key, ev.Decision, ev.Cost, cost); err != nil {
		ev.Outcome, ev.Latency = OutcomeSettleFailed, time.Since(start)
		ev.Err = fmt.Errorf("settle: final cost %d, charged %d: %w", cost, ev.Cost, err)
		e.emit(&ev)
	}
}

// Handler returns next behind the engine, as Middleware's: for an adapter
// of a router whose middleware has net/http's shape (chimw). view, when
// not nil, is Check's, given the request. A nil next serves admitted
// requests with http.NotFoundHandler.
func (e *Engine) Handler(next http.Handler, view func(*http.Request) *http.Request) http.Handler {
	if next == nil {
		next = http.NotFoundHandler()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var lazy func() *http.Request
		if view != nil {
			lazy = func() *http.Request { return view(r) }
		}
		sr, rej := e.Admit(w, r, lazy)
		switch {
		case rej != nil:
			e.Respond(w, rej)
		case sr == r:
			next.ServeHTTP(w, r)
		default:
			sw := &statusWriter{ResponseWriter: w}
			next.ServeHTTP(sw, sr)
			e.Settle(sr, cmp.Or(sw.status, http.StatusOK), w.Header()) // 200 if none was written, as net/http sends
		}
	})
}

// statusWriter records the status of a response for Settle. Unwrap lets
// http.ResponseController reach what w can do (deadlines, full duplex);
// Flush and Hijack go through it too, for handlers that assert
// http.Flusher or http.Hijacker.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= http.StatusOK {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.status = cmp.Or(w.status, http.StatusOK)
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() {
	w.status = cmp.Or(w.status, http.StatusOK)
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.status = cmp.Or(w.status, http.StatusSwitchingProtocols)
	return http.NewResponseController(w.ResponseWriter).Hijack()
}
