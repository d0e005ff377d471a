package coretest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// RunComposites checks policies made with core.AllOf, and settlements
// (core.Settler) when the limiter is one, against a model written from
// their docs: each part is the reference model of its policy (refModel's
// keys), fed the requests the whole admitted, each with its settled cost;
// the whole admits when every part admits, and then charges each. Every
// Decision is compared with the model's, whole and part by part, so a
// denial that charged a part, a part's bound broken, or a settlement beyond
// its rules shows as the first answer that differs. It runs seeded random
// cases for half of RATELIMIT_MODEL_DURATION (RATELIMIT_MODEL_SEED replays
// one).
func (s Suite) RunComposites(t *testing.T) {
	deadline := time.Now().Add(modelDuration(t) / 2)
	if seed, ok := replaySeed(t); ok {
		s.compositeCase(t, seed)
		return
	}
	base := rand.Uint64()
	for i := uint64(0); i == 0 || time.Now().Before(deadline); i++ {
		if !s.compositeCase(t, base+i) {
			return
		}
	}
}

// allModel is the model of one key under a policy made of parts.
type allModel struct {
	parts []core.Policy
	keys  []keyModel
}

func newAllModel(parts []core.Policy) *allModel {
	m := &allModel{parts: parts}
	for _, p := range parts {
		m.keys = append(m.keys, newKeyModel(p))
	}
	return m
}

// decide asks every part, then charges each if every part admits and
// consume is set, and returns the parts' verdicts.
func (m *allModel) decide(now, n int64, consume bool) (bool, []verdict) {
	vs := make([]verdict, len(m.keys))
	admitted := true
	for i, k := range m.keys {
		vs[i] = k.decide(now, n, false)
		admitted = admitted && vs[i].allowed
	}
	if admitted && consume {
		for i, k := range m.keys {
			vs[i] = k.decide(now, n, true)
		}
	}
	return admitted, vs
}

// decision is what the store must answer for the parts' verdicts, as
// core.Decision.Parts documents it: admitted when every part is; the
// longest RetryAfter of the parts that deny, or the longest Delay; the
// Limit, Remaining and ResetAfter of the part that binds (the fewest
// remaining, then the longest wait, then the longest reset).
func (m *allModel) decision(p core.Policy, admitted bool, vs []verdict) (core.Decision, []core.Decision) {
	wait := func(v verdict) int64 {
		if v.allowed {
			return v.delay
		}
		return v.retry
	}
	b := 0
	var retry, delay int64
	parts := make([]core.Decision, len(vs))
	for i, v := range vs {
		parts[i] = decisionOf(m.parts[i], v)
		delay = max(delay, v.delay)
		if !v.allowed {
			retry = max(retry, v.retry)
		}
		w := vs[b]
		if v.remaining < w.remaining || v.remaining == w.remaining && (wait(v) > wait(w) || wait(v) == wait(w) && v.reset > w.reset) {
			b = i
		}
	}
	d := parts[b]
	d.Allowed, d.Policy, d.RetryAfter, d.Delay = admitted, p, 0, 0
	if admitted {
		d.Delay = time.Duration(delay)
	} else {
		d.RetryAfter = time.Duration(retry)
	}
	return d, parts
}

// settle applies a settlement of delta units to every part of a request
// admitted by d, each part's charge all back at d.At plus its ResetAfter.
func (m *allModel) settle(now int64, d core.Decision, delta int64) {
	at := d.At.UnixNano()
	for i, k := range m.keys {
		k.(settlingModel).settle(now, at, at+int64(d.Parts()[i].ResetAfter), delta)
	}
}

// pending is an admission not settled yet.
type pending struct {
	key     string
	d       core.Decision
	charged int64
}

// compositeCase runs one seeded case and reports whether it passed.
func (s Suite) compositeCase(t *testing.T, seed uint64) bool {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	parts := make([]core.Policy, 2+rng.IntN(core.MaxParts-1))
	for i := range parts {
		parts[i] = randomPolicy(rng, seed).WithName("p" + strconv.Itoa(i))
		if i > 0 && parts[i].Algorithm == core.AlgLeakyBucket {
			parts[i] = parts[i].AsMeter() // one part at most delays (AllOf)
		}
	}
	p := core.AllOf(parts...)
	if p.Validate() != nil {
		return true // parts the stores reject alike (covered by RunModel)
	}
	clock := NewClock(Epoch.Add(time.Duration(rng.Int64N(int64(time.Hour)))))
	lim := s.New(t, p, clock.Now)
	defer closeLimiter(lim)
	settler, _ := lim.(core.Settler)
	models := map[string]*allModel{}
	var open []pending
	fail := func(format string, args ...any) bool {
		t.Errorf("seed %d (RATELIMIT_MODEL_SEED=%d), %v at +%v: %s", seed, seed, p, clock.Now().Sub(Epoch), fmt.Sprintf(format, args...))
		return false
	}
	step := max(int64(p.Parts()[0].Window)/8, 1)
	capacity := min(p.Capacity(), 50)
	for range 300 {
		clock.Advance(time.Duration(rng.Int64N(step)))
		now := clock.Now().UnixNano()
		key := "k" + strconv.Itoa(rng.IntN(2))
		m := models[key]
		if m == nil {
			m = newAllModel(parts)
			models[key] = m
		}
		switch r := rng.IntN(10); {
		case r < 7:
			n := 1 + rng.Int64N(capacity)
			got, err := lim.AllowN(context.Background(), key, n)
			if err != nil {
				return fail("AllowN(%d): %v", n, err)
			}
			admitted, vs := m.decide(now, n, true)
			if !s.sameComposite(got, m, p, admitted, vs, fail, "AllowN") {
				return false
			}
			if admitted && settler != nil {
				open = append(open, pending{key, got, n})
			}
		case r < 8:
			got, err := lim.Peek(context.Background(), key)
			if err != nil {
				return fail("Peek: %v", err)
			}
			admitted, vs := m.decide(now, 1, false)
			if !s.sameComposite(got, m, p, admitted, vs, fail, "Peek") {
				return false
			}
		case len(open) > 0:
			i := rng.IntN(len(open))
			st := open[i]
			open = append(open[:i], open[i+1:]...)
			cost := rng.Int64N(2*st.charged + 1)
			if err := settler.Settle(context.Background(), st.key, st.d, st.charged, cost); err != nil {
				return fail("Settle(%d charged, %d): %v", st.charged, cost, err)
			}
			if cost != st.charged {
				models[st.key].settle(now, st.d, cost-st.charged)
			}
		}
	}
	return true
}

// sameComposite compares a store's decision with the model's, whole and
// part by part (At and Source are the store's).
func (s Suite) sameComposite(got core.Decision, m *allModel, p core.Policy, admitted bool, vs []verdict, fail func(string, ...any) bool, op string) bool {
	want, wantParts := m.decision(p, admitted, vs)
	gotParts := got.Parts()
	// A Decision with parts holds them behind a pointer: compare the rest.
	whole := func(d core.Decision) [7]any {
		return [7]any{d.Allowed, d.Limit, d.Remaining, d.ResetAfter, d.RetryAfter, d.Delay, d.Policy}
	}
	if whole(got) != whole(want) || len(gotParts) != len(wantParts) {
		return fail("%s:\n   got %+v\n  want %+v", op, whole(got), whole(want))
	}
	for i := range gotParts {
		wantParts[i].At, wantParts[i].Source = gotParts[i].At, gotParts[i].Source
		if gotParts[i] != wantParts[i] {
			return fail("%s, part %d:\n   got %+v\n  want %+v", op, i, gotParts[i], wantParts[i])
		}
	}
	return true
}

// settlingModel is a key model that applies settlements as core.Settler
// documents them.
type settlingModel interface {
	settle(now, at, end, delta int64)
}

// A fixed window takes a debt in now's window, and gives a refund back
// from at's window while it is now's, at most what it counts.
func (m *fixedModel) settle(now, at, _, delta int64) {
	w := floorDiv(now, m.window)
	switch {
	case delta > 0:
		m.admitted = append(m.admitted, admission{now, delta})
	case floorDiv(at, m.window) == w:
		m.admitted = append(m.admitted, admission{at, -min(-delta, m.usedIn(w))})
	}
}

// A sliding window takes a debt in now's bucket, and gives a refund back
// from at's bucket while it counts (one of the Buckets+1 that end with
// now's), at most what it holds.
func (m *slidingModel) settle(now, at, _, delta int64) {
	k, b := floorDiv(now, m.width), floorDiv(at, m.width)
	switch {
	case delta > 0:
		m.admitted = append(m.admitted, admission{now, delta})
	case b >= k-m.buckets && b <= k:
		m.admitted = append(m.admitted, admission{at, -min(-delta, m.sum(b, b))})
	}
}

// A token bucket takes a debt from its level, which may go below empty,
// and gives a refund back up to full, and at most what the charge still
// holds: it was all back at end (its decision's ResetAfter after it), so
// end - now of it is still taken, and what was charged after it lies
// beyond end.
func (m *tokenModel) settle(now, _, end, delta int64) {
	level := m.levelAt(now)
	if delta > 0 {
		level -= delta * m.q
	} else {
		level = min(level+min(-delta*m.q, max(end-now, 0)), m.full)
	}
	m.level, m.last = level, now
}

// A delaying leaky bucket serves a debt after what it has queued, and, as
// a part of AllOf, gives nothing back.
func (m *queueModel) settle(now, _, _, delta int64) {
	if delta > 0 {
		m.queued = append(m.queued, admission{max(now, m.free()), delta})
	}
}
