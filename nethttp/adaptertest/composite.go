package adaptertest

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// composite: a limit of 2 per second and 5 per minute. The X-RateLimit-*
// fields describe the part with the fewest remaining, the IETF fields
// each part, Retry-After the part that denies, which ProblemJSON names; a
// failure writes the parts' policies and the first part's limit.
func (s suite) composite(t *testing.T) {
	p := core.AllOf(core.FixedWindow(2, time.Second).WithName("per-second"),
		core.FixedWindow(5, time.Minute).WithName("per-minute"))
	lim, clk := s.limiter(t, p)
	h := s.Mount(t, lim, nethttp.WithHeaderStyle(nethttp.HeadersBoth), nethttp.WithDenyHandler(nethttp.ProblemJSON))
	policy := `"per-second";q=2;w=1, "per-minute";q=5;w=60`
	for i, c := range []struct {
		at       time.Duration
		code     int
		want     map[string]string
		violated string // the policy ProblemJSON names, for a 429
	}{
		{0, 200, x("2", "1", "1", "RateLimit-Policy", policy, "RateLimit", `"per-second";r=1;t=1, "per-minute";r=4;t=60`), ""},
		{0, 200, x("2", "0", "1", "RateLimit-Policy", policy, "RateLimit", `"per-second";r=0;t=1, "per-minute";r=3;t=60`), ""},
		{0, 429, x("2", "0", "1", "Retry-After", "1",
			"RateLimit-Policy", policy, "RateLimit", `"per-second";r=0;t=1, "per-minute";r=3;t=60`), "per-second"},
		{time.Second, 200, x("2", "1", "1", "RateLimit-Policy", policy, "RateLimit", `"per-second";r=1;t=1, "per-minute";r=2;t=59`), ""},
		{time.Second, 200, x("2", "0", "1", "RateLimit-Policy", policy, "RateLimit", `"per-second";r=0;t=1, "per-minute";r=1;t=59`), ""},
		{2 * time.Second, 200, x("5", "0", "58", "RateLimit-Policy", policy, "RateLimit", `"per-second";r=1;t=1, "per-minute";r=0;t=58`), ""},
		{3 * time.Second, 429, x("5", "0", "57", "Retry-After", "57",
			"RateLimit-Policy", policy, "RateLimit", `"per-second";r=2;t=0, "per-minute";r=0;t=57`), "per-minute"},
	} {
		clk.Set(t0.Add(c.at))
		w := get(h, "/items/1")
		if w.Code != c.code {
			t.Fatalf("request %d: status %d, want %d", i+1, w.Code, c.code)
		}
		if got := rateHeaders(w); !reflect.DeepEqual(got, c.want) {
			t.Errorf("request %d: got %v, want %v", i+1, got, c.want)
		}
		if want := `"violated-policies":["` + c.violated + `"]`; c.code == 429 && !strings.Contains(w.Body.String(), want) {
			t.Errorf("request %d: body %q, want %s", i+1, w.Body.String(), want)
		}
	}
	broken := coretest.Failing{Err: errors.New("store: down"), P: p}
	w := get(s.Mount(t, broken, nethttp.WithHeaderStyle(nethttp.HeadersBoth)), "/items/1")
	wantStatus(t, w, http.StatusOK)
	wantHeaders(t, w, headers(nethttp.HeaderLimit, "2", nethttp.HeaderRateLimitPolicy, policy))
}
