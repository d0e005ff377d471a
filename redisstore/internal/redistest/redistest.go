// Package redistest gives tests a real Redis: the server named by the
// REDIS_ADDR environment variable, or a throwaway redis-server started on a
// free loopback port and stopped when the test ends, or a three-master
// Redis Cluster built the same way.
//
// When neither REDIS_ADDR nor the redis-server binary is available, the
// test is skipped with a message saying how to enable it, unless the
// environment variable RATELIMIT_REQUIRE_REDIS is 1 (as in CI): then it
// fails. Debian and Ubuntu ship the binaries in the packages redis-server
// and redis-tools.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Environment variables read by this package.
const (
	// EnvAddr names a Redis server ("host:port") to use instead of
	// starting one. Tests sharing it must use distinct keys.
	EnvAddr = "REDIS_ADDR"
	// EnvRequire, set to "1", turns a missing Redis into a test failure.
	EnvRequire = "RATELIMIT_REQUIRE_REDIS"
)

// startTimeout bounds every wait for a server or cluster to come up.
const startTimeout = 20 * time.Second

// Addr returns the address of a Redis server for t: REDIS_ADDR when set
// (it must answer PING), else a new throwaway server that is stopped when
// t ends.
func Addr(t testing.TB) string {
	t.Helper()
	if addr := os.Getenv(EnvAddr); addr != "" {
		if err := ping(addr, 2*time.Second); err != nil {
			t.Fatalf("redistest: %s=%s does not answer: %v", EnvAddr, addr, err)
		}
		return addr
	}
	return Start(t).Addr
}

// Server is a redis-server process owned by one test.
type Server struct {
	// Addr is the server's loopback address, "127.0.0.1:port".
	Addr string

	t      testing.TB
	args   []string
	dir    string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan error // receives cmd.Wait's result
}

// Start starts a throwaway redis-server on a free loopback port, with
// persistence off, and stops it when t ends. It skips t (or fails it, see
// RATELIMIT_REQUIRE_REDIS) when redis-server is not installed.
func Start(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	need(t, "redis-server")
	dir := t.TempDir()
	var lastErr error
	for range 5 { // a free port can be taken between choosing and binding it
		port, err := freePort(false)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s := &Server{
			Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			t:    t,
			dir:  dir,
			args: append([]string{
				"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
				"--save", "", "--appendonly", "no", "--dir", dir,
				"--logfile", filepath.Join(dir, fmt.Sprintf("redis-%d.log", port)),
			}, extraArgs...),
		}
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	t.Fatalf("redistest: cannot start redis-server: %v", lastErr)
	return nil
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := exec.Command("redis-server", s.args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("redis-server %s exited: %v; log: %s", s.Addr, err, s.log())
		default:
		}
		if ping(s.Addr, 200*time.Millisecond) == nil {
			s.cmd, s.exited = cmd, exited
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("redis-server %s did not answer within %v; log: %s", s.Addr, startTimeout, s.log())
}

func (s *Server) log() string {
	matches, _ := filepath.Glob(filepath.Join(s.dir, "*.log"))
	var b strings.Builder
	for _, m := range matches {
		data, _ := os.ReadFile(m)
		b.Write(data)
	}
	return b.String()
}

// Stop kills the server; its port stays reserved for Restart. Stopping a
// stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited // the process is gone and its port closed
	s.cmd = nil
}

// Pause stops the server's process (SIGSTOP) without closing its port: it
// accepts connections and answers nothing, as a hung Redis does, until
// Resume or the end of the test.
func (s *Server) Pause() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("redistest: Pause: %s is not running", s.Addr)
	}
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatalf("redistest: Pause: %v", err)
	}
	s.t.Cleanup(s.Resume) // before Stop, which the cleanups run later
}

// Resume continues a paused server (SIGCONT); it does nothing to one that
// is not paused.
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Restart starts a stopped server again on the same port, empty.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart: %v", err)
	}
}

// Cluster starts a Redis Cluster of three masters (no replicas) on free
// loopback ports, waits until it serves all slots, and stops it when t ends.
// It returns the masters' addresses. It needs redis-server and redis-cli.
func Cluster(t testing.TB) []string {
	t.Helper()
	var addrs []string
	for _, s := range ClusterNodes(t) {
		addrs = append(addrs, s.Addr)
	}
	return addrs
}

// ClusterNodes is Cluster, returning the masters' servers (to Pause them).
func ClusterNodes(t testing.TB) []*Server {
	t.Helper()
	need(t, "redis-server")
	need(t, "redis-cli")
	var servers []*Server
	var addrs []string
	for range 3 {
		// Each node also listens on its port + 10000 (the cluster bus).
		port, err := freePort(true)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		dir := t.TempDir()
		s := &Server{
			Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			t:    t,
			dir:  dir,
			args: []string{
				"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
				"--save", "", "--appendonly", "no", "--dir", dir,
				"--logfile", filepath.Join(dir, "redis.log"),
				"--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-node-timeout", "5000",
			},
		}
		if err := s.start(); err != nil {
			t.Fatalf("redistest: cluster node: %v", err)
		}
		t.Cleanup(s.Stop)
		servers = append(servers, s)
		addrs = append(addrs, s.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, addr := range addrs {
		if err := waitClusterOK(ctx, addr); err != nil {
			t.Fatalf("redistest: cluster node %s: %v", addr, err)
		}
	}
	return servers
}

func waitClusterOK(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster_state not ok within %v: %v %q", startTimeout, err, info)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// need skips or fails t when the binary is not on PATH.
func need(t testing.TB, binary string) {
	t.Helper()
	if _, err := exec.LookPath(binary); err == nil {
		return
	}
	msg := fmt.Sprintf("redistest: %s not found on PATH: install it (Debian: apt-get install redis-server redis-tools) or set %s=host:port for the single-server tests", binary, EnvAddr)
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("%s (%s=1 makes a missing Redis a failure)", msg, EnvRequire)
	}
	t.Skip(msg)
}

// freePort returns a loopback port nobody listens on; with bus, port+10000
// is free as well.
func freePort(bus bool) (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !bus {
			_ = l.Close()
			return port, nil
		}
		if port+10000 <= 65535 {
			if l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000))); err == nil {
				_ = l2.Close()
				_ = l.Close()
				return port, nil
			}
		}
		_ = l.Close()
	}
	return 0, errors.New("no free loopback port pair found")
}

// ping sends PING over a plain connection and reads the reply, without a
// client library's retries.
func ping(addr string, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// EnvTimingTests, set to "1", runs the tests that measure call durations
// and exact counts under heavy load (Sentinel and Cluster failover,
// resharding, the many-clients load scenario, the slow-Redis fallback).
// They need a machine with no other load: beside the rest of the suite run
// in parallel under the race detector, on 2 cores, their 50-250ms timeouts
// measure CPU starvation rather than Redis.
const EnvTimingTests = "RATELIMIT_TIMING_TESTS"

// RequireTimingTests skips t unless RATELIMIT_TIMING_TESTS=1.
func RequireTimingTests(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvTimingTests) != "1" {
		t.Skipf("load and failover timing test: set %s=1 to run it (on an otherwise idle machine)", EnvTimingTests)
	}
}
