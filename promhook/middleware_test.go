package promhook_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// The tests below run the real middleware, with m.Observe as its hook, in
// an httptest server, and a real in-memory limiter on a clock that stands
// still.

var epoch = time.Unix(1_700_000_000, 0)

func stopped() time.Time { return epoch }

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }

// get sends a GET to url with the X-API-Key header set to key (none for
// "") and returns the response's status and header.
func get(t *testing.T, url, key string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode, resp.Header
}

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		http.DefaultClient.CloseIdleConnections()
	})
	return srv.URL
}

func TestMiddlewareCountsRequests(t *testing.T) {
	m, reg := registered(t)
	lim := memory(t, core.FixedWindow(3, time.Minute), core.WithClock(stopped))
	m.WatchKeys("per-key", lim)
	url := serve(t, nethttp.Middleware(lim,
		nethttp.WithKeyFunc(keyfunc.Header("X-API-Key")),
		nethttp.WithHeaderStyle(nethttp.HeadersBoth),
		nethttp.WithHook(m.Observe),
	)(http.HandlerFunc(ok)))

	statuses := map[int]int{}
	var header http.Header
	for range 5 {
		status, h := get(t, url, "alice")
		statuses[status]++
		header = h
	}
	status, _ := get(t, url, "bob")
	statuses[status]++
	status, _ = get(t, url, "") // no key: 400
	statuses[status]++
	require.Equal(t, map[int]int{http.StatusOK: 4, http.StatusTooManyRequests: 2, http.StatusBadRequest: 1}, statuses)

	// The unnamed policy is labelled with the name the middleware sent in
	// RateLimit-Policy.
	const policy = "fixedwindow-3-per-60s"
	require.True(t, strings.HasPrefix(header.Get("RateLimit-Policy"), `"`+policy+`";`), header.Get("RateLimit-Policy"))

	assert.Equal(t, map[string]float64{
		`outcome="allowed",policy="` + policy + `",source="store"`:  4,
		`outcome="denied",policy="` + policy + `",source="store"`:   2,
		`outcome="key-error",policy="` + policy + `",source="none"`: 1, // the limiter's own policy; no store asked
	}, counts(t, reg, "ratelimit_requests_total"))
	n, _ := samples(t, reg, "ratelimit_store_duration_seconds")
	assert.Equal(t, map[string]uint64{`policy="` + policy + `"`: 6}, n, "every decision, not the key error")
	assert.Equal(t, map[string]float64{`limiter="per-key"`: 2}, counts(t, reg, "ratelimit_keys"))
}

func TestMiddlewareStackedAndDryRun(t *testing.T) {
	m, reg := registered(t)
	perSecond := memory(t, core.TokenBucket(2, time.Second).WithName("burst"), core.WithClock(stopped))
	perDay := memory(t, core.FixedWindow(100, 24*time.Hour).WithName("daily"), core.WithClock(stopped))
	key := nethttp.WithKeyFunc(keyfunc.Header("X-API-Key"))
	h := nethttp.Middleware(perDay, key, nethttp.WithHook(m.Observe))(
		nethttp.Middleware(perSecond, key, nethttp.WithDryRun(), nethttp.WithHook(m.Observe))(
			http.HandlerFunc(ok)))
	url := serve(t, h)

	for range 5 {
		status, _ := get(t, url, "alice")
		require.Equal(t, http.StatusOK, status)
	}
	assert.Equal(t, map[string]float64{
		`outcome="allowed",policy="daily",source="store"`: 5,
		`outcome="allowed",policy="burst",source="store"`: 2,
		`outcome="dry-run",policy="burst",source="store"`: 3,
	}, counts(t, reg, "ratelimit_requests_total"))
	n, _ := samples(t, reg, "ratelimit_store_duration_seconds")
	assert.Equal(t, map[string]uint64{`policy="daily"`: 5, `policy="burst"`: 5}, n)
}

// remote stands in for a remote store: its denials come from a deny cache
// after the first, and it fails while down.
type remote struct {
	*core.MemoryLimiter
	down   atomic.Bool
	mu     sync.Mutex
	denied map[string]bool
}

var errDown = errors.New("store unavailable")

func (r *remote) AllowN(ctx context.Context, key string, n int64) (core.Decision, error) {
	time.Sleep(time.Millisecond) // a round trip
	if r.down.Load() {
		return core.Decision{Limit: r.Policy().Limit, Policy: r.Policy()}, errDown
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.denied[key] {
		d, err := r.MemoryLimiter.Peek(ctx, key)
		d.Source = core.SourceDenyCache
		return d, err
	}
	d, err := r.MemoryLimiter.AllowN(ctx, key, n)
	if !d.Allowed {
		r.denied[key] = true
	}
	return d, err
}

func TestMiddlewareSourcesAndFailures(t *testing.T) {
	m, reg := registered(t)
	store := &remote{
		MemoryLimiter: memory(t, core.FixedWindow(1, time.Minute).WithName("shared"), core.WithClock(stopped)),
		denied:        map[string]bool{},
	}
	key := nethttp.WithKeyFunc(keyfunc.Header("X-API-Key"))
	open := serve(t, nethttp.Middleware(store, key, nethttp.WithHook(m.Observe))(http.HandlerFunc(ok)))
	closed := serve(t, nethttp.Middleware(store, key, nethttp.WithFailClosed(), nethttp.WithHook(m.Observe))(http.HandlerFunc(ok)))

	for _, want := range []int{http.StatusOK, http.StatusTooManyRequests, http.StatusTooManyRequests, http.StatusTooManyRequests} {
		status, _ := get(t, open, "alice")
		require.Equal(t, want, status)
	}
	store.down.Store(true)
	status, _ := get(t, open, "alice")
	require.Equal(t, http.StatusOK, status)
	status, _ = get(t, closed, "alice")
	require.Equal(t, http.StatusServiceUnavailable, status)

	assert.Equal(t, map[string]float64{
		`outcome="allowed",policy="shared",source="store"`:       1,
		`outcome="denied",policy="shared",source="store"`:        1,
		`outcome="denied",policy="shared",source="deny-cache"`:   2,
		`outcome="failed-open",policy="shared",source="store"`:   1,
		`outcome="failed-closed",policy="shared",source="store"`: 1,
	}, counts(t, reg, "ratelimit_requests_total"))
	n, sum := samples(t, reg, "ratelimit_store_duration_seconds")
	assert.Equal(t, map[string]uint64{`policy="shared"`: 6}, n, "the failures too")
	assert.GreaterOrEqual(t, sum[`policy="shared"`], 0.006)
}

// plans is a core.PolicyLimiter that decides each plan's policy with an
// in-memory limiter of its own.
type plans struct {
	*core.MemoryLimiter // the default policy, never used here
	by                  map[core.Policy]*core.MemoryLimiter
}

func (p *plans) AllowPolicy(ctx context.Context, pol core.Policy, key string, n int64) (core.Decision, error) {
	return p.by[pol].AllowN(ctx, key, n)
}

func TestMiddlewarePolicyPerRequest(t *testing.T) {
	m, reg := registered(t)
	free := core.TokenBucket(2, time.Minute).WithName("free")
	pro := core.TokenBucket(5, time.Minute).WithName("pro")
	lim := &plans{
		MemoryLimiter: memory(t, core.TokenBucket(1, time.Minute), core.WithClock(stopped)),
		by: map[core.Policy]*core.MemoryLimiter{
			free: memory(t, free, core.WithClock(stopped)),
			pro:  memory(t, pro, core.WithClock(stopped)),
		},
	}
	url := serve(t, nethttp.Middleware(lim,
		nethttp.WithKeyFunc(keyfunc.Header("X-API-Key")),
		nethttp.WithPolicyFunc(func(_ *http.Request, key string) (core.Policy, error) {
			switch {
			case strings.HasPrefix(key, "free-"):
				return free, nil
			case strings.HasPrefix(key, "pro-"):
				return pro, nil
			}
			return core.Policy{}, errors.New("no such plan")
		}),
		nethttp.WithHook(m.Observe),
	)(http.HandlerFunc(ok)))

	for _, k := range []string{"free-1", "free-1", "free-1", "pro-1", "pro-1", "unknown"} {
		get(t, url, k)
	}
	assert.Equal(t, map[string]float64{
		`outcome="allowed",policy="free",source="store"`: 2,
		`outcome="denied",policy="free",source="store"`:  1,
		`outcome="allowed",policy="pro",source="store"`:  2,
		`outcome="failed-open",policy="",source="none"`:  1, // the lookup failed: no policy, no store asked
	}, counts(t, reg, "ratelimit_requests_total"))
	n, _ := samples(t, reg, "ratelimit_store_duration_seconds")
	assert.Equal(t, map[string]uint64{`policy="free"`: 3, `policy="pro"`: 2}, n, "the limiter was not called for the failed lookup")
}
