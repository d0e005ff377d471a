package main

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/examples/internal/redisaddr"
)

func TestTwoServersShareOneLimit(t *testing.T) {
	addr := redisAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	servers, err := run(ctx, &out, addr, 10, 30, "127.0.0.1:0", "127.0.0.1:0")
	require.NoError(t, err, out.String())
	defer closeAll(servers)
	// Still serving, for curl: the demo's own requests are forgotten, so
	// a client on 127.0.0.1 starts with the whole quota, shared by both.
	for i, a := range servers {
		resp, err := http.Get(a.url)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, a.name)
		assert.Equal(t, strconv.Itoa(10-1-i), resp.Header.Get("X-RateLimit-Remaining"), a.name)
	}
	assert.Contains(t, out.String(), "admitted 10 of 30 (server A 5, server B 5) with a limit of 10: the limit held across both servers")
	assert.Equal(t, 10, strings.Count(out.String(), ": 200 "))
	assert.Equal(t, 20, strings.Count(out.String(), ": 429 "))
}

func TestNoRedis(t *testing.T) {
	_, err := run(context.Background(), &strings.Builder{}, "127.0.0.1:1", 10, 30, "127.0.0.1:0", "127.0.0.1:0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no Redis at 127.0.0.1:1")
}

// redisAddr returns REDIS_ADDR or a throwaway redis-server (see
// redisaddr.Addr).
func redisAddr(t *testing.T) string { return redisaddr.Addr(t) }
