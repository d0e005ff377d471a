package grpcmw

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-ratelimit/ratelimit/nethttp"
)

// SetFinalCost sets the final cost of the call of ctx, served behind an
// interceptor with [WithFinalCost], from its handler: the tokens a
// completion used, once known. It takes precedence over the WithFinalCost
// function; the last call before the handler returns counts. Behind
// several such interceptors, each gets it. It returns an error, setting
// nothing, when cost < 0 or when no such interceptor serves the call.
func SetFinalCost(ctx context.Context, cost int64) error {
	if cost < 0 {
		return fmt.Errorf("grpcmw: SetFinalCost: a final cost is >= 0, got %d", cost)
	}
	fc, _ := ctx.Value(finalKey{}).(*finalCall)
	if fc == nil {
		return errNotSettled
	}
	for ; fc != nil; fc, _ = fc.Context.Value(finalKey{}).(*finalCall) {
		fc.cost.Store(cost)
	}
	return nil
}

var errNotSettled = errors.New("grpcmw: SetFinalCost: the call is not served behind an interceptor with WithFinalCost")

type finalKey struct{}

// finalCall is the context of a call whose cost is settled after its
// handler: its admission, and the final cost its handler set (-1: none).
type finalCall struct {
	context.Context
	ev   nethttp.Event
	cost atomic.Int64
}

func (fc *finalCall) Value(key any) any {
	if _, ok := key.(finalKey); ok {
		return fc
	}
	return fc.Context.Value(key)
}

// settleWait bounds a settlement's goroutine, whatever the limiter's own
// timeout: a Settler that never returns must not keep it.
const settleWait = 10 * time.Second

// finalCost returns the context to serve a call decided with ev under, for
// its settlement, or nil when it is not settled: no WithFinalCost, or not
// an admission by the limiter.
func (l *limiter) finalCost(ctx context.Context, ev *nethttp.Event) *finalCall {
	if l.settler == nil || !ev.LimiterCalled || ev.Outcome != nethttp.OutcomeAllowed {
		return nil
	}
	fc := &finalCall{Context: ctx, ev: *ev}
	fc.cost.Store(-1)
	return fc
}

// settle settles fc's call, whose handler returned resp and err, at its
// final cost, on a goroutine of its own when that differs from the charge.
func (l *limiter) settle(fc *finalCall, method string, resp any, err error) {
	cost := fc.cost.Load()
	if cost < 0 {
		cost = l.cfg.final(fc.Context, method, resp, err, fc.ev.Cost)
	}
	if cost != fc.ev.Cost {
		go l.settleNow(fc.Context, fc.ev, cost)
	}
}

// settleNow charges ev's key the difference between cost and the charge,
// and reports a failure to the hooks.
func (l *limiter) settleNow(ctx context.Context, ev nethttp.Event, cost int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleWait)
	defer cancel()
	start := time.Now()
	if err := l.settler.Settle(ctx, ev.Key, ev.Decision, ev.Cost, cost); err != nil {
		ev.Outcome, ev.Latency = nethttp.OutcomeSettleFailed, time.Since(start)
		ev.Err = fmt.Errorf("settle: final cost %d, charged %d: %w", cost, ev.Cost, err)
		l.emit(ev)
	}
}
