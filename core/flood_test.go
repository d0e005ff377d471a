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
