package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
)

// TestPlans runs the example's two servers on loopback TCP, with a frozen
// clock, and checks what the curl commands of the package doc show: each
// key's plan in its headers, a plan change that keeps a key's usage, a
// plan's limit changed at runtime, the admin view, the metrics and the log.
func TestPlans(t *testing.T) {
	clock := coretest.NewClock(coretest.Epoch)
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	a, err := newApp(reg, slog.New(slog.NewTextHandler(&logs, nil)), core.WithClock(clock.Now))
	require.NoError(t, err)
	api := httptest.NewServer(a.API())
	defer api.Close()
	admin := httptest.NewServer(a.Admin(reg))
	defer admin.Close()

	get := func(key string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, api.URL+"/api/items", nil)
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("X-API-Key", key)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		return res
	}
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, admin.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b)
	}

	// alice is on free: 5 pass, the 6th is denied.
	for i := range 5 {
		res := get("alice")
		require.Equal(t, http.StatusOK, res.StatusCode, "request %d", i+1)
		assert.Equal(t, "5", res.Header.Get("X-RateLimit-Limit"))
		assert.Equal(t, `"free";q=5;w=60`, res.Header.Get("RateLimit-Policy"))
	}
	res := get("alice")
	assert.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	assert.Equal(t, "12", res.Header.Get("Retry-After")) // one token per 12 s

	// bob is on pro.
	res = get("bob")
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "50", res.Header.Get("X-RateLimit-Limit"))
	assert.Equal(t, "49", res.Header.Get("X-RateLimit-Remaining"))
	assert.Equal(t, `"pro";q=50;w=60`, res.Header.Get("RateLimit-Policy"))

	// A key on no plan, like a request without a key, is answered 401,
	// naming the header to send.
	for _, key := range []string{"mallory", ""} {
		res := get(key)
		assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "key %q", key)
		assert.Equal(t, `ApiKey header="X-API-Key"`, res.Header.Get("WWW-Authenticate"), "key %q", key)
		assert.Empty(t, res.Header.Get("X-RateLimit-Limit"), "no limiter was asked for key %q", key)
	}

	// alice moves to pro and keeps the 5 she used: 44 left after one more.
	code, _ := call(http.MethodPut, "/admin/keys/alice/plan", "pro")
	require.Equal(t, http.StatusNoContent, code)
	res = get("alice")
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "50", res.Header.Get("X-RateLimit-Limit"))
	assert.Equal(t, "44", res.Header.Get("X-RateLimit-Remaining"))

	// pro goes to 100 per minute for every key on it.
	code, _ = call(http.MethodPut, "/admin/plans/pro/limit", "100")
	require.Equal(t, http.StatusNoContent, code)
	res = get("bob")
	assert.Equal(t, "100", res.Header.Get("X-RateLimit-Limit"))
	assert.Equal(t, "98", res.Header.Get("X-RateLimit-Remaining"))
	code, body := call(http.MethodGet, "/admin/keys/alice", "")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "plan=pro limit=100 used=6 remaining=94\n", body)

	// Bad admin input is refused and changes nothing.
	code, _ = call(http.MethodPut, "/admin/keys/alice/plan", "gold")
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = call(http.MethodPut, "/admin/plans/pro/limit", "-1")
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = call(http.MethodPut, "/admin/plans/pro/limit", "many")
	assert.Equal(t, http.StatusBadRequest, code)

	// The metrics count the requests above by plan and outcome.
	code, body = call(http.MethodGet, "/metrics", "")
	require.Equal(t, http.StatusOK, code)
	for _, line := range []string{
		`ratelimit_requests_total{outcome="allowed",policy="free",source="store"} 5`,
		`ratelimit_requests_total{outcome="denied",policy="free",source="store"} 1`,
		`ratelimit_requests_total{outcome="allowed",policy="pro",source="store"} 3`,
		`ratelimit_keys{limiter="plans"} 2`,
	} {
		assert.Contains(t, body, line+"\n")
	}
	assert.Regexp(t, `\nratelimit_requests_total\{outcome="key-error",policy="",source="[a-z]*"\} 2\n`, body)
	assert.NotContains(t, body, `outcome="failed-closed"`)

	// The log has alice's denial and mallory's unknown key, never a key.
	require.NoError(t, a.Close())
	out := logs.String()
	assert.Contains(t, out, "free")
	assert.Contains(t, out, "unknown API key")
	assert.NotContains(t, out, "alice")
	assert.NotContains(t, out, "mallory")
}
