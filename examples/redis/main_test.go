package main

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTwoServersShareOneLimit(t *testing.T) {
	addr := redisAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	servers, err := run(ctx, &out, addr, 10, 30, "127.0.0.1:0", "127.0.0.1:0")
	require.NoError(t, err, out.String())
	defer closeAll(servers)
	// Still serving, for curl: the shared limit is spent on both.
	for _, a := range servers {
		resp, err := http.Get(a.url)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, a.name)
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

// redisAddr returns REDIS_ADDR, or the address of a throwaway redis-server
// on a free loopback port, killed when t ends. Without redis-server, t is
// skipped, or fails when RATELIMIT_REQUIRE_REDIS=1 (as in CI). (redisstore's
// own test helper is internal to redisstore.)
func redisAddr(t *testing.T) string {
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		return addr
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("RATELIMIT_REQUIRE_REDIS") == "1" {
			t.Fatalf("redis-server not found on PATH (RATELIMIT_REQUIRE_REDIS=1)")
		}
		t.Skip("redis-server not found on PATH: install it (Debian: apt-get install redis-server) or set REDIS_ADDR=host:port")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	require.NoError(t, l.Close())
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", port)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_, _ = conn.Write([]byte("PING\r\n"))
			_ = conn.SetReadDeadline(time.Now().Add(time.Second))
			line, _ := bufio.NewReader(conn).ReadString('\n')
			_ = conn.Close()
			if strings.HasPrefix(line, "+PONG") {
				return addr
			}
		}
		require.True(t, time.Now().Before(deadline), "redis-server on %s did not answer PING", addr)
	}
}
