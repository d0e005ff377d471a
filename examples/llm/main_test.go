package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
)

// TestTokens runs the server on loopback with a frozen clock and checks
// what the curl commands of the package doc show: the estimate charged,
// the tokens used settled after the response, a failure refunded.
func TestTokens(t *testing.T) {
	clock := coretest.NewClock(coretest.Epoch)
	h, lim := newHandler(core.WithClock(clock.Now))
	defer lim.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func(maxTokens, prompt string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/completions?max_tokens="+maxTokens, strings.NewReader(prompt))
		require.NoError(t, err)
		req.Header.Set("X-API-Key", "demo")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		_ = res.Body.Close()
		return res, string(b)
	}
	// The settlement runs after the response: wait until the key shows it.
	settled := func(remaining int64) {
		t.Helper()
		assert.Eventually(t, func() bool {
			d, err := lim.Peek(context.Background(), "demo")
			return err == nil && d.Remaining == remaining
		}, 10*time.Second, time.Millisecond, "remaining %d", remaining)
	}

	res, body := post("500", "tell me a story")
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "tell me a story\n", body)
	assert.Equal(t, "500", res.Header.Get("X-RateLimit-Remaining")) // the estimate, charged
	assert.Equal(t, "4", res.Header.Get("X-Tokens-Used"))
	settled(996)

	res, _ = post("500", "fail")
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.Equal(t, "496", res.Header.Get("X-RateLimit-Remaining"))
	settled(996) // a failure costs nothing

	res, _ = post("990", "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "6", res.Header.Get("X-RateLimit-Remaining"))
	settled(996) // no words, no tokens

	res, _ = post("997", "")
	assert.Equal(t, http.StatusTooManyRequests, res.StatusCode) // more than is left
	assert.Equal(t, "60", res.Header.Get("Retry-After"))
}
