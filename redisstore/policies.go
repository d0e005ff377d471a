package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/script"
)

// pspec is a policy given with a call (AllowPolicy, Get, Set) that differs
// from the limiter's own in a number its state depends on, as the script
// receives it, or the limiter's own (Limiter.own), whose numbers the
// script has written in.
type pspec struct {
	// id is the deny cache's name for it: 0 the limiter's own, >= 1 a
	// policy the spec cache holds, uncached one that no entry has.
	id uint64
	// Its parts (the policy alone when it has none), and whether it has
	// parts.
	parts []part
	all   bool
}

// part is a part of a policy: its keys' tail (keyLayout) and its numbers
// for the scripts. Under a limiter of a policy of one part, the one part
// has the limiter's keys.
type part struct {
	tail string
	args *script.Policy
}

// maxSpecs bounds the policies a limiter keeps converted for the scripts:
// plans are few, and policies beyond the bound still work (converted on
// every call, their denials not cached).
const maxSpecs = 1024

// uncached is the id of a policy beyond maxSpecs: its denials are not
// cached.
const uncached = ^uint64(0)

// specCache holds the specs of the policies given with calls, by policy:
// without its Name, but under a limiter of policies made with AllOf, where
// a policy of one part is keyed by its label (see Limiter.spec).
type specCache struct {
	m    sync.Map // core.Policy -> *pspec
	n    atomic.Int64
	next atomic.Uint64
}

// spec checks a policy given with a call and returns its spec: l.own when
// it is the limiter's own (its Name aside). The error names the invalid
// field, or wraps core.ErrAlgorithmMismatch.
func (l *Limiter) spec(op string, p core.Policy) (*pspec, error) {
	switch {
	case l.closed.Load(): // before p is looked at: after Close every call returns ErrClosed
		return nil, fmt.Errorf("redisstore: %s: %w", op, core.ErrClosed)
	case p == l.policy:
		return l.own, nil
	}
	if strings.ContainsFunc(p.Name, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
		return nil, fmt.Errorf("redisstore: %s: %w", op, p.Validate()) // Validate names it
	}
	unnamed := p
	unnamed.Name = ""
	if unnamed == l.unnamed {
		return l.own, nil
	}
	if !l.own.all {
		p = unnamed // a Name changes no key; under AllOf it is a part's label (newSpec)
	}
	if v, ok := l.specs.m.Load(p); ok {
		return v.(*pspec), nil
	}
	switch err := p.Validate(); {
	case err != nil:
		return nil, fmt.Errorf("redisstore: %s: %w", op, err)
	case p.Algorithm != l.policy.Algorithm:
		return nil, fmt.Errorf("redisstore: %s: %w: %v, the limiter's is %v", op, core.ErrAlgorithmMismatch, p.Algorithm, l.policy.Algorithm)
	case !l.own.all && p.Parts() != nil:
		return nil, fmt.Errorf("redisstore: %s: %w: a policy made with AllOf given to a limiter of a policy of one part (build it with core.AllOf)", op, core.ErrAlgorithmMismatch)
	}
	ps := l.newSpec(p, l.own.all)
	if l.specs.n.Add(1) > maxSpecs {
		l.specs.n.Add(-1)
		ps.id = uncached
		return ps, nil
	}
	ps.id = l.specs.next.Add(1)
	if v, loaded := l.specs.m.LoadOrStore(p, ps); loaded {
		l.specs.n.Add(-1)
		return v.(*pspec), nil
	}
	return ps, nil
}

// newSpec returns the spec of p, valid and of the limiter's algorithm,
// for a limiter of policies made with core.AllOf when ofParts is set.
// The limiter's own (l.own) has the parts of its script (OwnPart).
func (l *Limiter) newSpec(p core.Policy, ofParts bool) *pspec {
	parts := p.Parts()
	ps := &pspec{all: parts != nil}
	if !ps.all {
		parts = []core.Policy{p}
	}
	for j, q := range parts {
		args := script.NewPolicy(q, l.ttlPlus)
		switch {
		case p == l.unnamed && j > 0:
			args = script.OwnPart(j)
		case p == l.unnamed:
			args = nil
		}
		tail := l.keys.tail // the key of the user key (keyLayout)
		if ofParts {
			tail += ":" + q.Label()
		}
		ps.parts = append(ps.parts, part{tail: tail, args: args})
	}
	return ps
}

// AllowPolicy is AllowN under p instead of the limiter's own policy, with
// the semantics of "Policies per call" in package core: a key has one
// state whatever policy it is decided under, converted atomically in the
// script when the policy changes, and keeps what it has used. p must be
// valid (else the error names the field) and use the limiter's algorithm
// (else the error wraps core.ErrAlgorithmMismatch). The Decision's Limit
// and Policy are p's. Its other errors are AllowN's; the local fallback
// decides under p too. The limiter keeps the numbers of up to 1024
// distinct policies; beyond them policies still work, converted on every
// call, without the deny cache.
func (l *Limiter) AllowPolicy(ctx context.Context, p core.Policy, key string, n int64) (core.Decision, error) {
	ps, err := l.spec("AllowPolicy", p)
	if err != nil {
		return core.Decision{Limit: p.Limit, Policy: p}, err
	}
	return l.allow(ctx, "AllowPolicy", ps, &p, key, n)
}

// Get reads key's usage under p without consuming anything or changing the
// key's state in Redis: a key written under another policy is converted
// for the answer only. Used, Remaining and ResetAfter are as Peek under p
// would tell them. Its errors are AllowPolicy's without a fallback: the
// fallback does not answer Get, and while the circuit breaker keeps calls
// from Redis it returns an error wrapping ErrUnavailable and
// ErrBreakerOpen.
func (l *Limiter) Get(ctx context.Context, p core.Policy, key string) (core.Usage, error) {
	ps, err := l.spec("Get", p)
	if err != nil {
		return core.Usage{Policy: p}, err
	}
	u := core.Usage{Policy: p}
	err = l.admin(ctx, "Get", func() error {
		d, used, err := l.decide(ctx, "Get", ps, &p, key, 0)
		if err == nil {
			u.Used, u.Remaining, u.ResetAfter = used, d.Remaining, d.ResetAfter
		}
		return err
	})
	return u, err
}

// Set makes key's usage under p exactly used units now, 0 <= used <=
// p.Capacity() (else an error wrapping core.ErrInvalidUsage), whatever the
// key's state and the policy it was written under: the token and leaky
// bucket as if used units had just been taken, the fixed window as a count
// of used in the current window, the sliding window as used in the current
// bucket. Set(ctx, p, key, 0) deletes the key as Reset does (its parts
// under policies made with core.AllOf, as Reset says), and it is then full
// under every policy. As Reset does, it forgets this process's cached denials of
// the key once Redis has answered. Its errors are Get's; the fallback's
// state is not changed.
func (l *Limiter) Set(ctx context.Context, p core.Policy, key string, used int64) error {
	ps, err := l.spec("Set", p)
	if err != nil {
		return err
	}
	if used < 0 || used > p.Capacity() {
		return fmt.Errorf("redisstore: Set: %w: got %d, %s", core.ErrInvalidUsage, used, capacityText(p))
	}
	return l.admin(ctx, "Set", func() error {
		if used == 0 {
			return l.del(ctx, "Set", key, ps) // every part this process knows, as Reset, and p's
		}
		defer l.deny.forget(key) // as in Reset: after the script, whatever its outcome
		_, _, err := l.decide(ctx, "Set", ps, &p, key, -1-used)
		return err
	})
}

// admin runs an admin call to Redis (Reset, Get, Set, Settle) through the
// circuit breaker, which it informs.
func (l *Limiter) admin(ctx context.Context, op string, f func() error) error {
	switch {
	case l.closed.Load():
		return fmt.Errorf("redisstore: %s: %w", op, core.ErrClosed)
	case ctx.Err() != nil:
		return fmt.Errorf("redisstore: %s: %w", op, ctx.Err())
	}
	t, ok := l.br.Admit()
	if !ok {
		return l.refused(op)
	}
	err := f()
	l.done(t, err)
	return err
}
