package nethttp

import (
	"net/http"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// WriteHeaders renders d into h as the engine of a middleware with style and
// resetUnix does, treating a denial as the answer to the request: the
// renderer alone, for the tests of package nethttp_test.
func WriteHeaders(h http.Header, d core.Decision, style HeaderStyle, resetUnix bool) {
	rd := newRenderer(d.Policy, style, resetUnix)
	rd.write(h, &d, !d.Allowed)
}

// CachedRenderers is how many renderers e keeps for policies other than its
// limiter's own.
func CachedRenderers(e *Engine) int {
	n := 0
	e.renders.Range(func(any, any) bool { n++; return true })
	return n
}

// MaxRenderers is the bound on CachedRenderers.
const MaxRenderers = maxRenderers

// SetMaxSettleWait sets the bound on a settlement's call for the rest of
// the test.
func SetMaxSettleWait(t interface{ Cleanup(func()) }, d time.Duration) {
	old := maxSettleWait
	maxSettleWait = d
	t.Cleanup(func() { maxSettleWait = old })
}
