package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
)

// TestComposite runs the server on loopback with a frozen clock: the
// per-second part binds first, then the daily one, and a denial charges
// neither part.
func TestComposite(t *testing.T) {
	clock := coretest.NewClock(coretest.Epoch)
	h, lim := newHandler(core.WithClock(clock.Now))
	defer lim.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func() *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/api/items", nil)
		require.NoError(t, err)
		req.Header.Set("X-API-Key", "demo")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		return res
	}

	res := get()
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, `"per-second";q=10;w=1, "per-day";q=1000;w=86400`, res.Header.Get("RateLimit-Policy"))
	assert.Equal(t, `"per-second";r=9;t=1, "per-day";r=999;t=86400`, res.Header.Get("RateLimit")) // the clock is at midnight UTC
	assert.Equal(t, "10", res.Header.Get("X-RateLimit-Limit"))
	assert.Equal(t, "9", res.Header.Get("X-RateLimit-Remaining"))
	for range 9 {
		require.Equal(t, http.StatusOK, get().StatusCode)
	}
	res = get() // the 11th within the second: the per-second part denies
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	assert.Equal(t, "1", res.Header.Get("Retry-After"))
	assert.Equal(t, `"per-second";r=0;t=1, "per-day";r=990;t=86400`, res.Header.Get("RateLimit"))

	// 990 more, 10 a second: the day's 1,000 are spent, the denial above
	// charged neither part.
	for i := range 99 {
		clock.Advance(time.Second)
		for range 10 {
			require.Equal(t, http.StatusOK, get().StatusCode, "second %d", i+1)
		}
	}
	clock.Advance(time.Second)
	res = get() // the per-second part would admit (and is not charged); the day's does not
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	assert.Equal(t, "1000", res.Header.Get("X-RateLimit-Limit"))
	assert.Equal(t, "0", res.Header.Get("X-RateLimit-Remaining"))
	assert.Equal(t, "86300", res.Header.Get("Retry-After")) // midnight
	assert.Equal(t, `"per-second";r=10;t=0, "per-day";r=0;t=86300`, res.Header.Get("RateLimit"))
}
