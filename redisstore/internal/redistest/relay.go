package redistest

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Relay forwards loopback TCP connections to a server, passing what the
// server sends on to the client a delay after it arrived, as over a slow
// link or from a slow server: a client of a Redis behind it sees every
// reply the delay late (TestSlowRedis), a replica replicating through it
// stays the delay behind its primary (Sentinel.DelayReplication). What the
// client sends goes to the server as is.
//
// The delay is latency, not throughput: replies keep their order and are
// held side by side, each until its own arrival plus the delay. A change
// of the delay applies to what is held too, so setting it to 0 passes on
// at once everything held (a slow server that recovers answers its
// backlog). When the server's side of a connection ends, what the relay
// still holds for it is dropped and the client's side is closed at once,
// as the unsent part of a dying primary's replication buffer is lost.
type Relay struct {
	ln     net.Listener
	target string
	closed chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	delay   time.Duration
	changed chan struct{} // closed and replaced when the delay changes
	conns   []net.Conn
}

// StartRelay starts a relay to the server at target on a free loopback
// port, with no delay, and closes it and its connections when t ends.
func StartRelay(t testing.TB, target string) *Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	r := &Relay{ln: ln, target: target, closed: make(chan struct{}), changed: make(chan struct{})}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.close)
	return r
}

// Addr returns the relay's address, "127.0.0.1:port": clients connect
// there instead of to the server.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// SetDelay sets how long what the server sends is held before it is
// passed on, for what is held already as well.
func (r *Relay) SetDelay(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delay = d
	close(r.changed)
	r.changed = make(chan struct{})
}

// current returns the delay and a channel closed when it changes.
func (r *Relay) current() (time.Duration, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.delay, r.changed
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		client, err := r.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", r.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, client, server)
		r.mu.Unlock()
		r.wg.Add(2)
		go func() { // client to server: as is
			defer r.wg.Done()
			_, _ = io.Copy(server, client)
			_ = server.Close()
			_ = client.Close()
		}()
		go r.down(server, client)
	}
}

// down passes what the server sends on to the client, each chunk the
// delay after it arrived. When the server's side ends, the chunks still
// held are dropped and the client's connection is closed at once.
func (r *Relay) down(server, client net.Conn) {
	defer r.wg.Done()
	type chunk struct {
		at   time.Time
		data []byte
	}
	chunks := make(chan chunk, 1<<14)
	gone := make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(gone)
		for {
			buf := make([]byte, 32<<10)
			n, err := server.Read(buf)
			if n > 0 {
				select {
				case chunks <- chunk{time.Now(), buf[:n]}:
				case <-r.closed:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer client.Close()
	defer server.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-gone:
			return
		case <-r.closed:
			return
		case c := <-chunks:
			for {
				delay, changed := r.current()
				wait := time.Until(c.at.Add(delay))
				if wait <= 0 {
					break
				}
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-changed:
					timer.Stop()
				case <-gone:
					return
				case <-r.closed:
					return
				}
			}
			if _, err := client.Write(c.data); err != nil {
				return
			}
		}
	}
}

func (r *Relay) close() {
	close(r.closed)
	_ = r.ln.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}
