package core_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// TestNewcomersUnderAKeyFlood checks what WithMaxKeys documents for a flood
// of one-request keys: below MaxKeys × Limit / Window new keys per second a
// newcomer starts with at most a few units spent; above it, what it inherits
// grows by about one unit per MaxKeys new keys (here 2,048 keys, 100 per
// minute: about 3,400 keys/s).
func TestNewcomersUnderAKeyFlood(t *testing.T) {
	const maxKeys, limit, flood = 2048, 100, 50_000
	for _, tc := range []struct {
		perSecond int
		mostSpent int64 // by a newcomer, at most
	}{
		{1_000, 3},
		{1_000_000, 2 + flood*5/4/maxKeys}, // about 24 generations of MaxKeys keys
	} {
		t.Run(strconv.Itoa(tc.perSecond)+"/s", func(t *testing.T) {
			ctx := context.Background()
			now := time.Unix(1_700_000_000, 0)
			lim := core.MustNew(core.TokenBucket(limit, time.Minute), core.WithMaxKeys(maxKeys),
				core.WithClock(func() time.Time { return now }))
			defer lim.Close()
			for i := range flood {
				now = now.Add(time.Second / time.Duration(tc.perSecond))
				if _, err := lim.Allow(ctx, "flood"+strconv.Itoa(i)); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 100 {
				d, err := lim.Allow(ctx, "newcomer"+strconv.Itoa(i))
				if err != nil || !d.Allowed || limit-1-d.Remaining > tc.mostSpent {
					t.Fatalf("newcomer %d: got allowed %v, Remaining %d, %v; want allowed with at most %d units spent before it",
						i, d.Allowed, d.Remaining, err, tc.mostSpent)
				}
			}
		})
	}
}

// TestNewcomerAfterEvictionsRetryAfterAdmits is issue 24's defect 1 for a
// key that is new to a full limiter: it starts from what the keys evicted
// to make room had used, kept under their policy (a token bucket of 6 a
// minute, burst 10; each used 9, back in 90s; WithMaxKeys(8) is one shard
// of 8), and asks under another (60
// a second, burst 5). Those inherited states go on refilling at their own
// rate, so the newcomer admits a unit once 4 of their tokens are owed, at
// 50s: it was told about 83ms, again and again.
func TestNewcomerAfterEvictionsRetryAfterAdmits(t *testing.T) {
	ctx := context.Background()
	slow := core.TokenBucket(6, time.Minute).WithBurst(10)
	fast := core.TokenBucket(60, time.Second).WithBurst(5).WithName("fast")
	now := time.Unix(1_700_000_000, 0)
	lim := core.MustNew(slow, core.WithMaxKeys(8), core.WithClock(func() time.Time { return now }))
	defer lim.Close()
	for i := range 8 { // the newcomer evicts one of them
		if d, err := lim.AllowN(ctx, "k"+strconv.Itoa(i), 9); err != nil || !d.Allowed {
			t.Fatalf("AllowN(k%d, 9) = %+v, %v; want admitted", i, d, err)
		}
	}
	d, err := lim.AllowPolicy(ctx, fast, "newcomer", 1)
	if want := (core.Decision{Limit: 60, ResetAfter: 90 * time.Second, RetryAfter: 50 * time.Second, Policy: fast, At: now.UTC()}); err != nil || d != want {
		t.Errorf("AllowPolicy(fast, newcomer, 1) = %+v, %v; want %+v", d, err, want)
	}
	now = now.Add(50*time.Second - 1)
	if d, err := lim.AllowPolicy(ctx, fast, "newcomer", 1); err != nil || d.Allowed {
		t.Errorf("1ns before RetryAfter: %+v, %v; want denied", d, err)
	}
	now = now.Add(1)
	if d, err := lim.AllowPolicy(ctx, fast, "newcomer", 1); err != nil || !d.Allowed {
		t.Errorf("at RetryAfter: %+v, %v; want admitted", d, err)
	}
}
