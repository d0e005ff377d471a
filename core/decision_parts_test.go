package core_test

// A test from an outside review (branch review4): a Decision whose Policy
// a caller changed.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// TestPartsOfADecisionWithAnotherPolicyReadNoOtherMemory: Decision.Policy
// is an exported field, so a caller (a hook, a test, a cache of decisions)
// may set it. A decision of AllOf("a", "b") whose Policy is then a policy of
// four parts was never decided under "c" and "d": Parts must not make them
// up from whatever memory lies after the decision's two verdicts, and
// Settle must not read it either (bad input: "a clear error, never a panic
// or silent misbehaviour"). Today Parts returns four parts, "c" and "d"
// filled from other decisions' verdicts; under -race (checkptr, as CI runs)
// the process dies with "checkptr: unsafe.Slice result straddles multiple
// allocations".
func TestPartsOfADecisionWithAnotherPolicyReadNoOtherMemory(t *testing.T) {
	a := core.FixedWindow(10, time.Second).WithName("a")
	b := core.FixedWindow(5, time.Minute).WithName("b")
	lim, err := core.New(core.AllOf(a, b))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	var ds []core.Decision // neighbours on the heap
	for range 4 {
		d, err := lim.AllowN(context.Background(), "k", 1)
		if err != nil || !d.Allowed {
			t.Fatalf("AllowN: %+v, %v", d, err)
		}
		ds = append(ds, d)
	}
	d := ds[0]
	d.Policy = core.AllOf(a, b, core.FixedWindow(7, time.Hour).WithName("c"), core.FixedWindow(9, time.Hour).WithName("d"))
	parts := d.Parts()
	for _, p := range parts {
		t.Logf("part %v: Allowed %v Remaining %d ResetAfter %v", p.Policy, p.Allowed, p.Remaining, p.ResetAfter)
	}
	if err := lim.Settle(context.Background(), "k", d, 1, 0); err == nil || !strings.Contains(err.Error(), "is not the one that decided it") {
		t.Errorf("Settle of that decision: got %v, want the error saying its Policy was changed", err)
	}
	if len(parts) > 2 {
		t.Errorf("Parts of a decision of two parts, its Policy replaced by one of four: %d parts, \"c\" and \"d\" read from memory beyond the decision's verdicts (Remaining %d and %d)", len(parts), parts[2].Remaining, parts[3].Remaining)
	}
}
