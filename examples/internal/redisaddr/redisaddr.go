// Package redisaddr finds a Redis for the examples' tests.
package redisaddr

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Addr returns REDIS_ADDR, or the address of a throwaway redis-server
// on a free loopback port, killed when t ends. Without redis-server, t is
// skipped, or fails when RATELIMIT_REQUIRE_REDIS=1 (as in CI). (redisstore's
// own test helper is internal to redisstore.)
func Addr(t *testing.T) string {
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
