package redisstore

import (
	"context"
	"fmt"

	"github.com/go-ratelimit/ratelimit/core"
)

var _ core.Settler = (*Limiter)(nil)

// Settle charges key the difference between cost, the request's final
// cost, and charged, what d, this limiter's admission of the request,
// charged it, with the rules of core.Settler: a debt is charged at once
// and never refused; a refund is given back never beyond the charge nor
// past the window of d.At (Redis's clock). A policy made with core.AllOf
// settles each part. It is one script call, bounded by the limiter's
// timeout and the circuit breaker like any call, and never retried; its
// errors are Set's, and those of core.CheckSettle. A decision of the local
// fallback (Source core.SourceFallback) is settled there.
//
// A settlement makes this process's cached denials of key stale (a refund
// admits sooner, a debt later): it forgets them, as Reset does. Another
// process's deny cache keeps its denial of key until its cached
// RetryAfter.
func (l *Limiter) Settle(ctx context.Context, key string, d core.Decision, charged, cost int64) error {
	if l.closed.Load() {
		return fmt.Errorf("redisstore: Settle: %w", core.ErrClosed)
	}
	if err := core.CheckSettle(d, charged, cost); err != nil {
		return fmt.Errorf("redisstore: Settle: %w", err)
	}
	ps, err := l.spec("Settle", d.Policy)
	if err != nil || cost == charged {
		return err
	}
	rs := resets(d)
	if len(rs) != len(ps.parts) { // d.Policy was set to another policy of parts
		return fmt.Errorf("redisstore: Settle: the decision's Policy (%v) is not the one that decided it", d.Policy)
	}
	defer l.deny.forget(key) // as in Reset: after the script, whatever its outcome
	if d.Source == core.SourceFallback && l.fb != nil {
		if err := l.fb.Settle(ctx, key, d, charged, cost); err != nil {
			return fmt.Errorf("redisstore: Settle in fallback: %w", err)
		}
		return nil
	}
	return l.admin(ctx, "Settle", func() error {
		c := l.call(ps, key)
		c.N, c.SettleAt, c.SettleResets = cost-charged, d.At.UnixNano(), rs
		if err := l.wait(ctx, "Settle", c); err != nil {
			return err
		}
		c.Release()
		return nil
	})
}

// resets is the ResetAfter d gave each part of d.Policy, in order, in ns:
// where the part's charge ended (core's gcraState.settle). A delaying leaky
// bucket that is a part of core.AllOf gets 0, which no refund finds: it
// gives nothing back there (core.Settler).
func resets(d core.Decision) []int64 {
	parts := d.Parts()
	if parts == nil {
		return []int64{int64(d.ResetAfter)}
	}
	out := make([]int64, len(parts))
	for i, p := range parts {
		if q := p.Policy; q.Algorithm != core.AlgLeakyBucket || q.Meter {
			out[i] = int64(p.ResetAfter)
		}
	}
	return out
}
