package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
)

// TestRetryAfterOfAKeyThatFoundNoRoomIsHonest: doc.go promises that "a
// denied client that waits exactly RetryAfter and retries the same cost is
// admitted, absent other traffic", and WithMaxKeys that a key that finds
// its shard full of limited keys is limited "as one key" with the others
// that found no room "until room appears". With WithMaxKeys(2) (one shard
// of two keys) and TokenBucket(3, 1s) (interval I = 1s/3, burst 3):
//
//   - a and b take 3 each at t0: both limited, the shard full;
//   - c takes 2 at t0: no room, admitted on the shared inherited state;
//   - c asks 2 again at t0: denied, RetryAfter I (the inherited state's
//     debt of 2I leaves room for 2 after I);
//   - c retries 2 at t0+I, nothing else having happened: a, whose debt is
//     now 2I, admits a unit request, so it is evicted to make room, and c
//     starts from its usage: denied again (RetryAfter I more).
//
// The RetryAfter told c measures only the inherited state, not a key that
// will be evicted into it by the time c retries.
func TestRetryAfterOfAKeyThatFoundNoRoomIsHonest(t *testing.T) {
	ctx := context.Background()
	clk := coretest.NewClock(time.Unix(1_700_000_000, 0))
	lim, err := core.New(core.TokenBucket(3, time.Second), core.WithClock(clk.Now), core.WithMaxKeys(2), core.WithSweepInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	for _, k := range []string{"a", "b", "c"} {
		n := int64(3)
		if k == "c" {
			n = 2
		}
		if d, err := lim.AllowN(ctx, k, n); err != nil || !d.Allowed {
			t.Fatalf("%s: AllowN(%d) = %+v, %v; want admitted", k, n, d, err)
		}
	}
	d, err := lim.AllowN(ctx, "c", 2)
	if err != nil || d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("c: second AllowN(2) = %+v, %v; want a denial with a RetryAfter", d, err)
	}
	clk.Advance(d.RetryAfter)
	if again, err := lim.AllowN(ctx, "c", 2); err != nil || !again.Allowed {
		t.Errorf("c waited RetryAfter %v and retried the same cost, nothing else in between: got %+v, %v; want admitted", d.RetryAfter, again, err)
	}
}
