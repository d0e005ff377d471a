package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// tune returns a copy of go-redis options o (Options, ClusterOptions or
// RingOptions, whose fields share their names) set for the limiter's
// client: it applies a context's deadline to its sockets, and that deadline
// alone (ContextTimeoutEnabled, no socket timeouts of its own), retries
// nothing (a retry would come after the deadline, or run a script twice),
// dials once (a refused connection is an error at once, not after
// go-redis's back-off), keeps no idle connections beyond those used, and
// its TCP connections are readyConns (but for go-redis's own TLS dialing).
// It gets push notification handlers of its own (rdb's already hold rdb's:
// sharing them makes go-redis log a failure to register them) and no
// client-side cache, which EVALSHA never reads.
func tune[O any](o O, q *queueClock) *O {
	v := reflect.ValueOf(&o).Elem()
	v.FieldByName("ContextTimeoutEnabled").SetBool(true)
	for name, x := range map[string]int64{"MaxRetries": -1, "DialerRetries": 1, "MinIdleConns": 0, "ReadTimeout": -1, "WriteTimeout": -1} {
		v.FieldByName(name).SetInt(x)
	}
	for _, name := range []string{"PushNotificationProcessor", "ClientSideCache", "ClientSideCacheConfig"} {
		if f := v.FieldByName(name); f.IsValid() {
			f.SetZero()
		}
	}
	dial := v.FieldByName("Dialer").Interface().(func(ctx context.Context, network, addr string) (net.Conn, error))
	if dial == nil {
		if !v.FieldByName("TLSConfig").IsNil() {
			return &o // go-redis's own TLS dialing: no readyConns
		}
		dial = redis.NewDialer(&redis.Options{DialTimeout: time.Duration(v.FieldByName("DialTimeout").Int())})
	}
	v.FieldByName("Dialer").Set(reflect.ValueOf(func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if tcp, ok := conn.(*net.TCPConn); ok {
			return &readyConn{TCPConn: tcp, queueing: q}, nil
		}
		return conn, err
	}))
	return &o
}

// OwnHooks returns the hooks to add to rdb's own client: tests see the
// limiter's commands through them.
var OwnHooks = func(redis.UniversalClient) []redis.Hook { return nil }

// readyConn is a TCP connection that reads an answer as soon as this
// process runs the reader after the answer has arrived, however busy the
// process. A reader waiting for bytes is woken by the network poller,
// which a saturated process consults only every 10 ms and whose readied
// goroutines wait behind every other runnable one (hundreds of ms while
// thousands of HTTP connections open: benchmarks/README.md), while a
// timer's goroutine runs next. So Read waits for the poller in steps
// (1 ms, doubling up to 8 ms) and, woken by a step's timer,
// looks at the socket again; at the deadline it looks once more, so that
// an answer that reached this host in time is never a timeout. A step
// that finds nothing costs a timer and a system call.
//
// It does so only within a second of a call queueing for a round trip
// (queueing): a process that keeps up reads as any connection does, where
// the timers cost two callers about a fifth of their throughput
// (benchmarks/README.md).
type readyConn struct {
	*net.TCPConn
	rd, wd   time.Time   // the read and write deadlines; zero: none
	polled   bool        // the socket may hold a poll's deadline, not rd
	queueing *queueClock // when a call last queued
}

// queueClock is when a call of the limiter last queued for a round trip,
// in Unix ns, to a millisecond.
type queueClock struct{ at atomic.Int64 }

// queued records that a call queues now.
func (q *queueClock) queued() {
	if now := time.Now().UnixNano(); now-q.at.Load() > int64(time.Millisecond) {
		q.at.Store(now)
	}
}

// busy reports whether a call queued within the last second.
func (q *queueClock) busy() bool { return time.Now().UnixNano()-q.at.Load() < int64(time.Second) }

func (c *readyConn) SetDeadline(t time.Time) error {
	c.rd, c.wd, c.polled = t, t, false
	return c.TCPConn.SetDeadline(t)
}

func (c *readyConn) SetWriteDeadline(t time.Time) error {
	c.wd = t
	return c.TCPConn.SetWriteDeadline(t)
}

// Write writes nothing once the write deadline has passed, and says so
// (errNotSent): then Redis never saw the command.
func (c *readyConn) Write(p []byte) (int, error) {
	if !c.wd.IsZero() && !time.Now().Before(c.wd) {
		return 0, errNotSent
	}
	return c.TCPConn.Write(p)
}

// errNotSent is a command's deadline passing before it was written: a
// timeout (it wraps os.ErrDeadlineExceeded) that tells nothing about Redis.
var errNotSent = fmt.Errorf("deadline passed before the command was written: %w", os.ErrDeadlineExceeded)

func (c *readyConn) SetReadDeadline(t time.Time) error {
	c.rd, c.polled = t, false
	return c.TCPConn.SetReadDeadline(t)
}

func (c *readyConn) Read(p []byte) (int, error) {
	if !c.queueing.busy() {
		if c.polled { // a reply's next piece, once the process is no longer busy
			c.polled = false
			if err := c.TCPConn.SetReadDeadline(c.rd); err != nil {
				return 0, err
			}
		}
		return c.TCPConn.Read(p)
	}
	c.polled = true
	for step := time.Millisecond; ; step = min(2*step, 8*time.Millisecond) {
		until := time.Now().Add(step)
		last := !c.rd.IsZero() && !until.Before(c.rd)
		if last {
			until = c.rd
		}
		if err := c.TCPConn.SetReadDeadline(until); err != nil {
			return 0, err
		}
		n, err := c.TCPConn.Read(p)
		if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		if last {
			return c.late(p, err)
		}
	}
}

// late reads what is there once the deadline has passed, without waiting;
// err is the deadline's error, returned when nothing is.
func (c *readyConn) late(p []byte, err error) (int, error) {
	raw, rerr := c.TCPConn.SyscallConn()
	if rerr != nil || c.TCPConn.SetReadDeadline(time.Time{}) != nil {
		return 0, err
	}
	n := 0
	rerr = raw.Read(func(fd uintptr) bool {
		n, rerr = syscall.Read(int(fd), p)
		return true // never wait
	})
	_ = c.TCPConn.SetReadDeadline(c.rd)
	if rerr != nil || n <= 0 {
		return 0, err
	}
	return n, nil
}
