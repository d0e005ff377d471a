package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// TestPartsOfACostAboveCapacityDenyIt: Decision.Parts is "what each part
// alone would say of the request", and "the decision itself is admitted
// when every part admits". A request of cost 3 under AllOf(2 per minute, 10
// per hour) is refused (ErrCostExceedsCapacity), and the 2-per-minute part
// alone would refuse it; yet today every part of the refusal says Allowed
// (they are a unit-cost look), so a denied decision has no part that
// denied, and what reports the parts that denied (grpcmw's QuotaFailure)
// reports none.
func TestPartsOfACostAboveCapacityDenyIt(t *testing.T) {
	p := core.AllOf(core.FixedWindow(2, time.Minute).WithName("minute"), core.FixedWindow(10, time.Hour).WithName("hour"))
	lim, err := core.New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	for name, call := range map[string]func() (core.Decision, error){
		"AllowN":      func() (core.Decision, error) { return lim.AllowN(context.Background(), "k", 3) },
		"AllowPolicy": func() (core.Decision, error) { return lim.AllowPolicy(context.Background(), p, "k", 3) },
	} {
		d, err := call()
		if !errors.Is(err, core.ErrCostExceedsCapacity) || d.Allowed {
			t.Fatalf("%s: got %+v, %v; want a denial with ErrCostExceedsCapacity", name, d, err)
		}
		parts := d.Parts()
		if len(parts) != 2 {
			t.Fatalf("%s: got %d parts, want 2", name, len(parts))
		}
		if parts[0].Allowed || !parts[1].Allowed {
			t.Errorf("%s: parts allowed = %v, %v; want the minute's part (limit 2) to deny the cost 3 and the hour's (limit 10) to admit it", name, parts[0].Allowed, parts[1].Allowed)
		}
	}
}
