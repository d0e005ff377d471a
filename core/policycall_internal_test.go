package core

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestPolicyCallKeepsAtMostMaxRules: the compiled rules of policies given
// with calls are kept up to maxRules, and a policy beyond the bound is
// still decided under its own numbers.
func TestPolicyCallKeepsAtMostMaxRules(t *testing.T) {
	kept := func(l *MemoryLimiter) int {
		n := 0
		l.rules.Range(func(any, any) bool { n++; return true })
		return n
	}
	policy := func(i int) Policy { return FixedWindow(int64(100+i), time.Minute) }
	t.Run("one caller", func(t *testing.T) {
		l, err := New(FixedWindow(10, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for i := range maxRules + 10 {
			for range 2 { // the second call finds the rule the first kept, if any
				d, err := l.AllowPolicy(context.Background(), policy(i), "k"+strconv.Itoa(i), 1)
				if err != nil || d.Limit != policy(i).Limit {
					t.Fatalf("policy %d: got %+v, %v, want a decision with Limit %d", i, d, err, policy(i).Limit)
				}
			}
		}
		if got := kept(l); got != maxRules {
			t.Errorf("rules kept: got %d, want %d", got, maxRules)
		}
	})
	t.Run("concurrent callers, each policy from several", func(t *testing.T) {
		l, err := New(FixedWindow(10, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range maxRules + 100 {
					j := (i + g*7) % (maxRules + 100)
					if _, err := l.AllowPolicy(context.Background(), policy(j), "k", 1); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if got := kept(l); got > maxRules || got < maxRules-8 {
			t.Errorf("rules kept: got %d, want at most %d and at least %d", got, maxRules, maxRules-8)
		}
	})
}
