package policyname

import (
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		p    core.Policy
		want string
	}{
		{core.FixedWindow(100, time.Minute).WithName("per-ip"), "per-ip"},
		{core.TokenBucket(100, time.Minute), "tokenbucket-100-per-60s"},
		{core.FixedWindow(5, 1500*time.Millisecond), "fixedwindow-5-per-1.5s"},
		{core.Policy{}, ""},
	} {
		if got := Of(tc.p); got != tc.want {
			t.Errorf("Of(%+v): got %q, want %q", tc.p, got, tc.want)
		}
	}
}
