// Package rapid is a dependency-free stand-in for the part of
// pgregory.net/rapid that the root module's tests use (see package testkit
// for why): Check, T, Bool, IntRange and Int64Range.
//
// Unlike rapid it does not shrink a failing case. It runs -rapid.checks
// random cases (100 by default), each from its own seed, with values biased
// toward the ends of their ranges as rapid's are; a failure reports the seed
// and every value drawn, and -rapid.seed=N runs that one case again.
package rapid

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var (
	checks = flag.Int("rapid.checks", 100, "rapid: number of random cases per property")
	seed   = flag.Uint64("rapid.seed", 0, "rapid: run only the case of this seed (0: random seeds)")
)

// T is what a property gets: report failures with Errorf, Fatalf, FailNow
// (and testify-style helpers, which need Errorf and FailNow), and pass it to
// Draw.
type T struct {
	tb     testing.TB
	rnd    *rand.Rand
	draws  []string
	failed bool
	logs   []string
}

type failNow struct{}

// Helper marks the caller as a helper of the test.
func (t *T) Helper() { t.tb.Helper() }

// Logf records a message, shown if the case fails.
func (t *T) Logf(format string, args ...any) {
	t.logs = append(t.logs, fmt.Sprintf(format, args...))
}

// Errorf records a failure and goes on.
func (t *T) Errorf(format string, args ...any) {
	t.Logf(format, args...)
	t.failed = true
}

// Error records a failure and goes on.
func (t *T) Error(args ...any) { t.Errorf("%s", fmt.Sprint(args...)) }

// FailNow ends the case as failed.
func (t *T) FailNow() {
	t.failed = true
	panic(failNow{})
}

// Fatalf records a failure and ends the case.
func (t *T) Fatalf(format string, args ...any) {
	t.Logf(format, args...)
	t.FailNow()
}

// Fatal records a failure and ends the case.
func (t *T) Fatal(args ...any) { t.Fatalf("%s", fmt.Sprint(args...)) }

// Failed reports whether the case has failed.
func (t *T) Failed() bool { return t.failed }

// Check runs prop on random cases and fails tb, with the seed and the drawn
// values, on the first case that fails.
func Check(tb testing.TB, prop func(*T)) {
	tb.Helper()
	n := *checks
	seeds := make([]uint64, 0, n)
	if *seed != 0 {
		seeds = append(seeds, *seed)
	} else {
		base := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x5eed))
		for range n {
			seeds = append(seeds, base.Uint64()|1)
		}
	}
	for _, s := range seeds {
		t := &T{tb: tb, rnd: rand.New(rand.NewPCG(s, s>>1))}
		if panicked, value := run(t, prop); panicked {
			t.failed = true
			t.logs = append(t.logs, fmt.Sprintf("panic: %v", value))
		}
		if t.failed {
			tb.Fatalf("[rapid] failed with -rapid.seed=%d\ndraws:\n\t%s\n%s",
				s, strings.Join(t.draws, "\n\t"), strings.Join(t.logs, "\n"))
			return
		}
	}
}

// run runs prop, recovering the panic of FailNow; it reports any other
// panic.
func run(t *T, prop func(*T)) (panicked bool, value any) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(failNow); ok {
				return
			}
			panicked, value = true, r
		}
	}()
	prop(t)
	return false, nil
}

// Generator draws values of type V.
type Generator[V any] struct {
	draw func(*rand.Rand) V
}

// Draw draws a value and records it under label for the failure report.
func (g *Generator[V]) Draw(t *T, label string) V {
	v := g.draw(t.rnd)
	t.draws = append(t.draws, fmt.Sprintf("%s: %v", label, v))
	return v
}

// Bool draws true or false.
func Bool() *Generator[bool] {
	return &Generator[bool]{draw: func(r *rand.Rand) bool { return r.IntN(2) == 1 }}
}

// Int64Range draws from [lo, hi], picking lo or hi a tenth of the time each
// and small offsets from them more often than uniform draws would.
func Int64Range(lo, hi int64) *Generator[int64] {
	if lo > hi {
		panic(fmt.Sprintf("rapid: Int64Range(%d, %d): empty range", lo, hi))
	}
	return &Generator[int64]{draw: func(r *rand.Rand) int64 {
		span := uint64(hi - lo)
		switch k := r.IntN(10); {
		case k == 0:
			return lo
		case k == 1:
			return hi
		case k <= 3: // near an end
			d := min(span, uint64(r.IntN(8)))
			if r.IntN(2) == 0 {
				return lo + int64(d)
			}
			return hi - int64(d)
		}
		if span == ^uint64(0) {
			return int64(r.Uint64())
		}
		return lo + int64(r.Uint64N(span+1))
	}}
}

// IntRange draws from [lo, hi] as Int64Range does.
func IntRange(lo, hi int) *Generator[int] {
	g := Int64Range(int64(lo), int64(hi))
	return &Generator[int]{draw: func(r *rand.Rand) int { return int(g.draw(r)) }}
}
