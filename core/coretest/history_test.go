package coretest

import (
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// TestHistoryByHand holds the history check to cases worked out by hand
// from "Policies per call" in the package docs of core: each step is a
// call at Epoch+at, and want is the start of the violation the last
// admission reports ("" for none).
func TestHistoryByHand(t *testing.T) {
	type step struct {
		at    time.Duration
		op    string // "allow" (admitted), "deny" (denied: nothing changes), "set", "reset"
		pol   core.Policy
		n     int64 // cost, or the usage of a set
		delay time.Duration
	}
	fa, fb := core.FixedWindow(10, 3*time.Second), core.FixedWindow(10, 2*time.Second)
	sa := core.SlidingWindow(10, 10*time.Second)
	sb := sa.WithBuckets(5)
	ss := core.SlidingWindow(10, time.Second) // a shorter Window
	ta, tb := core.TokenBucket(10, time.Second), core.TokenBucket(1, time.Second).WithBurst(5)
	la, lb := core.LeakyBucket(1, time.Second).WithBurst(5), core.LeakyBucket(10, time.Second)
	for _, tc := range []struct {
		name  string
		steps []step
		want  string
	}{
		{"fixed: another policy's requests count within their own Window", []step{
			{2990 * ms, "allow", fa, 10, 0}, {3 * time.Second, "allow", fb, 1, 0}}, "fixed window: the window [+2s, +4s)"},
		{"fixed: not beyond it", []step{
			{2990 * ms, "allow", fa, 10, 0}, {5999 * ms, "allow", fb, 10, 0}}, ""},
		{"fixed: nor outside the window that holds t", []step{
			{2990 * ms, "allow", fa, 10, 0}, {4 * time.Second, "allow", fb, 10, 0}}, ""},
		{"fixed: one policy, the next window", []step{
			{2 * time.Second, "allow", fa, 10, 0}, {3 * time.Second, "allow", fa, 10, 0}}, ""},
		{"fixed: one policy, one window", []step{
			{0, "allow", fa, 10, 0}, {2999 * ms, "allow", fa, 1, 0}}, "fixed window"},
		{"sliding: Buckets+1 buckets of the new geometry", []step{
			{500 * ms, "allow", sa, 10, 0}, {10 * time.Second, "allow", sb, 3, 0}}, "sliding window: the 6 buckets [+0s, +12s)"},
		{"sliding: within them, up to MaxInWindow", []step{
			{500 * ms, "allow", sa, 10, 0}, {10 * time.Second, "allow", sb, 2, 0}}, ""},
		{"sliding: a denial under another policy changes nothing", []step{
			{0, "allow", sa, 10, 0}, {500 * ms, "deny", ss, 1, 0}, {600 * ms, "allow", sa, 1, 0}}, "sliding window: the 10 buckets"},
		{"fixed: the requests of the policy changed from count", []step{
			{2990 * ms, "allow", fa, 5, 0}, {3 * time.Second, "allow", fb, 5, 0}, {3100 * ms, "allow", fb, 1, 0}}, "fixed window"},
		{"fixed: those from before the change before it no longer do", []step{
			{2990 * ms, "allow", fa, 5, 0}, {3 * time.Second, "allow", fb, 5, 0}, {3100 * ms, "allow", fa, 5, 0}, {3200 * ms, "allow", fb, 1, 0}}, ""},
		{"sliding: after a round trip through a shorter Window, only what lies within it counts", []step{
			{0, "allow", sa, 10, 0}, {5 * time.Second, "allow", ss, 10, 0}, {5500 * ms, "allow", sa, 1, 0}}, "sliding window: the 10 buckets"},
		{"sliding: and requests older than it are let go", []step{
			{0, "allow", sa, 10, 0}, {5 * time.Second, "allow", ss, 5, 0}, {6500 * ms, "allow", sa, 5, 0}}, ""},
		{"sliding: one policy, the trailing buckets", []step{
			{500 * ms, "allow", sa, 10, 0}, {9999 * ms, "allow", sa, 1, 0}}, "sliding window: the 10 buckets"},
		{"sliding: one policy, one more in bucket B", []step{
			{500 * ms, "allow", sa, 10, 0}, {10 * time.Second, "allow", sa, 1, 0}}, ""},
		{"token: the debt drains at the rate of the policy in force", []step{
			{0, "allow", ta, 4, 0}, {0, "allow", tb, 1, 0}, {500 * ms, "allow", tb, 1, 0}}, "token bucket"},
		{"token: and is back under Burst by then", []step{
			{0, "allow", ta, 4, 0}, {0, "allow", tb, 1, 0}, {time.Second, "allow", tb, 1, 0}}, ""},
		{"token: a denial changes nothing: the debt drains at the old rate", []step{
			{0, "allow", tb, 5, 0}, {0, "deny", ta, 10, 0}, {600 * ms, "allow", ta, 10, 0}}, "token bucket"},
		{"token: until an admission under the new one", []step{
			{0, "allow", tb, 5, 0}, {0, "deny", ta, 10, 0}, {600 * ms, "allow", ta, 5, 0}}, ""},
		{"token: Set replaces the history", []step{
			{0, "allow", ta, 10, 0}, {0, "set", tb, 5, 0}, {0, "deny", ta, 1, 0}, {0, "allow", ta, 5, 0}}, ""},
		{"token: Reset empties it", []step{
			{0, "allow", ta, 10, 0}, {0, "reset", ta, 0, 0}, {0, "allow", ta, 10, 0}}, ""},
		{"token: a step back is checked at the latest admission", []step{
			{time.Second, "allow", ta, 10, 0}, {500 * ms, "allow", ta, 1, 0}}, "token bucket"},
		{"meter: the token level", []step{
			{0, "allow", lb.AsMeter(), 10, 0}, {50 * ms, "allow", lb.AsMeter(), 1, 0}}, "token bucket"},
		{"leaky: queued requests keep their instants", []step{
			{0, "allow", la, 1, 0}, {0, "allow", la, 1, time.Second}, {100 * ms, "allow", lb, 1, 1800 * ms}}, "leaky bucket: a request of cost 1 admitted at +0s"},
		{"leaky: new ones are served after them", []step{
			{0, "allow", la, 1, 0}, {0, "allow", la, 1, time.Second}, {100 * ms, "allow", lb, 1, 1900 * ms}, {100 * ms, "allow", lb, 1, 2 * time.Second}}, ""},
		{"leaky: nor crowded by one served before them", []step{
			{0, "allow", lb, 1, 300 * ms}, {100 * ms, "allow", lb, 1, 150 * ms}}, "leaky bucket: a request of cost 1 admitted at +100ms"},
		{"leaky: one served well before them is fine", []step{
			{0, "allow", lb, 1, 300 * ms}, {100 * ms, "allow", lb, 1, 0}}, ""},
		{"leaky: at most Burst not yet served", []step{
			{0, "allow", la, 5, 0}, {0, "allow", lb, 1, 5 * time.Second}}, ""},
		{"leaky: a request served at t still counts at t", []step{
			{0, "allow", lb, 10, time.Second}, {time.Second, "allow", lb, 1, time.Second}}, "leaky bucket: at +1s the requests not yet served cost 11"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistory()
			show := func(ns int64) string { return "+" + time.Duration(ns-Epoch.UnixNano()).String() }
			var got string
			for _, st := range tc.steps {
				now := Epoch.Add(st.at).UnixNano()
				switch st.op {
				case "allow":
					h.take(st.pol, now)
					got = h.admit(st.pol, now, int64(st.delay), st.n, show)
				case "deny":
				case "set":
					h.set(st.pol, now, st.n)
				case "reset":
					h.reset()
				}
			}
			if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
