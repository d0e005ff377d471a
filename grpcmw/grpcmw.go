package grpcmw

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// UnaryServerInterceptor returns a unary server interceptor that limits
// calls with lim, keyed by the caller's address unless [WithKey] says
// otherwise:
//
//	grpc.NewServer(grpc.ChainUnaryInterceptor(grpcmw.UnaryServerInterceptor(lim)))
//
// One interceptor per server is the intended use ([WithMethodPolicy] gives
// methods limits of their own): gRPC joins header metadata, so a second
// one adds its values to the same fields. It panics for a nil limiter, a
// nil Option, or a WithMethodPolicy the limiter cannot apply.
func UnaryServerInterceptor(lim core.Limiter, opts ...Option) grpc.UnaryServerInterceptor {
	l := newLimiter("UnaryServerInterceptor", lim, opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		var ev nethttp.Event
		if _, _, err := l.call(ctx, info.FullMethod, req, &ev); err != nil {
			return nil, err
		}
		fc := l.finalCost(ctx, &ev)
		if fc == nil {
			return handler(ctx, req)
		}
		resp, err := handler(fc, req)
		l.settle(fc, info.FullMethod, resp, err)
		return resp, err
	}
}

// limiter is what every interceptor of this package runs: the decision of
// one call, or of one message of a stream.
type limiter struct {
	cfg     config
	lim     core.Limiter
	plim    core.PolicyLimiter // lim, with method policies
	settler core.Settler       // lim, with WithFinalCost
	own     *rule              // the limiter's policy
	methods map[string]*rule   // WithMethodPolicy
}

// rule is a policy with the renderer of its fields.
type rule struct {
	policy core.Policy
	render *nethttp.Renderer
	method bool // a method's own policy: keys are joined to the method
}

func newLimiter(fn string, lim core.Limiter, opts []Option) *limiter {
	if lim == nil {
		panic(fmt.Errorf("grpcmw: %s: nil limiter", fn))
	}
	if v := reflect.ValueOf(lim); v.Kind() == reflect.Pointer && v.IsNil() {
		// Typically the limiter of a constructor whose error was ignored.
		panic(fmt.Errorf("grpcmw: %s: nil limiter (a nil %T)", fn, lim))
	}
	l := &limiter{lim: lim}
	for _, o := range opts {
		if o == nil {
			panic(fmt.Errorf("grpcmw: %s: nil Option", fn))
		}
		o(&l.cfg)
	}
	if l.cfg.key == nil {
		l.cfg.key = Peer()
	}
	l.own = &rule{policy: lim.Policy(), render: nethttp.NewRenderer(lim.Policy(), l.cfg.style)}
	if len(l.cfg.methods) > 0 {
		if err := l.methodRules(); err != nil {
			panic(fmt.Errorf("grpcmw: %s: WithMethodPolicy: %w", fn, err))
		}
	}
	if l.cfg.final != nil {
		var ok bool
		switch l.settler, ok = lim.(core.Settler); {
		case fn == "NewLimiter":
			panic(errors.New("grpcmw: NewLimiter: WithFinalCost: go-grpc-middleware's Limit sees no response to settle"))
		case !ok:
			panic(fmt.Errorf("grpcmw: %s: WithFinalCost needs a core.Settler, and %T is not one", fn, lim))
		}
	}
	return l
}

// methodRules checks the WithMethodPolicy policies and builds their rules.
func (l *limiter) methodRules() error {
	pl, ok := l.lim.(core.PolicyLimiter)
	if !ok {
		return fmt.Errorf("needs a core.PolicyLimiter, and %T is not one", l.lim)
	}
	l.plim, l.methods = pl, make(map[string]*rule, len(l.cfg.methods))
	for m, p := range l.cfg.methods {
		switch err := p.Validate(); {
		case !strings.HasPrefix(m, "/"):
			return fmt.Errorf("method %q is not a full method (/package.Service/Method)", m)
		case err != nil:
			return fmt.Errorf("%s: %w", m, err)
		case p.Algorithm != l.own.policy.Algorithm:
			return fmt.Errorf("%s: %v policy for a %v limiter: %w", m, p.Algorithm, l.own.policy.Algorithm, core.ErrAlgorithmMismatch)
		case p.Parts() != nil && l.own.policy.Parts() == nil:
			// Every store refuses it: each call would fail, and fail open.
			return fmt.Errorf("%s: a policy made with core.AllOf for a limiter of a policy of one part: %w", m, core.ErrAlgorithmMismatch)
		}
		l.methods[m] = &rule{policy: p, render: nethttp.NewRenderer(p, l.cfg.style), method: true}
	}
	return nil
}

// call decides a unary call or the opening of a stream under its method's
// rule, writes its header metadata, waits out a leaky-bucket delay, and
// returns the status error to answer with, or nil to serve the call; and
// the key and rule a stream's messages are decided under, r nil for a call
// skipped or, under WithDryRun, without a key. ev receives the decision's
// Event (see finalCost).
func (l *limiter) call(ctx context.Context, method string, msg any, ev *nethttp.Event) (key string, r *rule, err error) {
	if slices.ContainsFunc(l.cfg.skip, func(skip func(context.Context, string) bool) bool { return skip(ctx, method) }) {
		return "", nil, nil
	}
	if r = l.methods[method]; r == nil {
		r = l.own
	}
	if key, err = l.cfg.key(ctx, method); err != nil {
		l.emit(nethttp.Event{Outcome: nethttp.OutcomeKeyError, Decision: known(r, core.Decision{}), Err: err})
		if l.cfg.dryRun {
			return "", nil, nil
		}
		return "", nil, statusNoKey
	}
	if r.method {
		key = keyfunc.JoinKeys(method, key)
	}
	return key, r, l.decide(ctx, r, key, method, msg, true, ev)
}

// decide decides one call or message of cost from WithCostFunc under r and
// answers it: fields says whether to write the header metadata. ev
// receives the Event given to the hooks.
func (l *limiter) decide(ctx context.Context, r *rule, key, method string, msg any, fields bool, ev *nethttp.Event) error {
	n, err := l.costOf(ctx, method, msg)
	if err != nil {
		l.emit(nethttp.Event{Key: key, Outcome: nethttp.OutcomeCostError, Decision: known(r, core.Decision{}), Err: err})
		if l.cfg.dryRun {
			return nil
		}
		return statusBadCost
	}
	*ev = nethttp.Event{Key: key, Cost: n, LimiterCalled: true}
	var start time.Time
	if len(l.cfg.hooks) > 0 {
		start = time.Now() // read for the hooks' Latency only
	}
	if r.method {
		ev.Decision, ev.Err = l.plim.AllowPolicy(ctx, r.policy, key, n)
	} else {
		ev.Decision, ev.Err = l.lim.AllowN(ctx, key, n)
	}
	if !start.IsZero() {
		ev.Latency = time.Since(start)
	}
	ev.Outcome = nethttp.OutcomeOf(ctx, ev.Decision, ev.Err, l.cfg.failClosed, l.cfg.dryRun)
	ans := l.answer(ctx, r, ev, fields)
	if l.settler != nil && ev.Outcome == nethttp.OutcomeCanceled && ev.Decision.Allowed {
		go l.settleNow(ctx, *ev, 0) // charged, then let go during its delay: never served
	}
	l.emit(*ev)
	return ans
}

// costOf is the cost of a call or message: 1, or WithCostFunc's.
func (l *limiter) costOf(ctx context.Context, method string, msg any) (int64, error) {
	if l.cfg.cost == nil {
		return 1, nil
	}
	n, err := l.cfg.cost(ctx, method, msg)
	if err != nil {
		return 0, fmt.Errorf("cost function: %w", err)
	}
	if n <= 0 {
		return 0, fmt.Errorf("cost function returned %d: %w", n, core.ErrInvalidCost)
	}
	return n, nil
}

// answer carries out ev.Outcome: it writes the metadata fields (if fields),
// waits an admitted call's delay, and returns the status error to answer
// with, or nil to serve the call. It fills in what ev learns on the way.
func (l *limiter) answer(ctx context.Context, r *rule, ev *nethttp.Event, fields bool) error {
	d := ev.Decision
	switch ev.Outcome {
	case nethttp.OutcomeAllowed, nethttp.OutcomeDryRun:
		if fields && l.cfg.style != nethttp.HeadersNone { // HeadersNone writes only a denial's retry-after
			setHeader(ctx, r.render, d, false)
		}
		if d.Delay > 0 && !l.cfg.dryRun {
			if err := wait(ctx, d.Delay); err != nil {
				ev.Outcome, ev.Err = nethttp.OutcomeCanceled, err
				return status.FromContextError(err).Err() // Canceled or DeadlineExceeded
			}
		}
		return nil
	case nethttp.OutcomeDenied:
		if ev.Err != nil { // a cost above capacity: waiting cannot help
			d.Allowed, d.RetryAfter = false, 0
			if d.Policy == (core.Policy{}) { // from a store that failed too
				d = known(r, d)
			}
			ev.Decision = d
		}
		if fields {
			setHeader(ctx, r.render, d, true)
		}
		return denial(d)
	case nethttp.OutcomeCanceled:
		ev.Decision = known(r, d)
		return status.FromContextError(ctx.Err()).Err()
	case nethttp.OutcomeCostError: // a store's ErrInvalidCost: cannot come from costOf
		ev.Decision = known(r, d)
		return statusBadCost
	}
	// A failure: what is known of the limit, never Remaining or Reset.
	ev.Decision = known(r, d)
	if fields && l.cfg.style != nethttp.HeadersNone {
		setKnown(ctx, r.render, ev.Decision.Limit)
	}
	if ev.Outcome == nethttp.OutcomeFailedOpen {
		return nil
	}
	return unavailable(ev.Err)
}

// known is what is known of the limit of a call under r whose decision d
// failed or was never made: the store's Limit, Policy and Source, or else
// those of r's policy.
func known(r *rule, d core.Decision) core.Decision {
	policy := cmp.Or(d.Policy, r.policy)
	return core.Decision{Limit: cmp.Or(d.Limit, policy.Limit), Policy: policy, Source: d.Source}
}

func (l *limiter) emit(ev nethttp.Event) {
	for _, h := range l.cfg.hooks {
		h(ev)
	}
}

// wait holds an admitted leaky-bucket call for d, and lets it go at once,
// with the context's error, if the call's context ends first.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
