package transport

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/script"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// newSender returns the Sender of a limiter of p on rdb, with timeout.
func newSender(t *testing.T, rdb redis.UniversalClient, p core.Policy, timeout time.Duration) *Sender {
	t.Helper()
	tr := NewSender(rdb, Options{Script: script.New(p, p.Recovery()), Timeout: timeout, MaxFlights: 2})
	t.Cleanup(tr.Close)
	return tr
}

// call returns a call for key, cost 1, made now.
func call(key string, timeout time.Duration) *Call {
	c := NewCall()
	c.Key, c.N, c.Deadline = key, 1, time.Now().Add(timeout)
	return c
}

// TestQueuedCallsEscapeStalledFlights: a call that has waited half its
// timeout for a round trip in flight (here every flight's sender stalled
// for good) sends its own, and Redis decides it in time; the extra flight
// ends with it.
func TestQueuedCallsEscapeStalledFlights(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	const timeout = 200 * time.Millisecond
	b := newSender(t, rdb, core.TokenBucket(100, time.Hour), timeout).batcher
	flying := func(n int) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.flying = n
	}
	flying(b.MaxFlights)
	defer flying(0)
	key := fmt.Sprintf("escape-%d", time.Now().UnixNano())
	for i := range 3 {
		c := call(key, timeout)
		start := time.Now()
		require.NoError(t, b.Send(context.Background(), c))
		took := time.Since(start)
		require.NoError(t, c.Err)
		assert.Equal(t, int64(99-i), c.Res.Remaining)
		assert.GreaterOrEqual(t, took, timeout/2, "sent half its timeout in")
		b.mu.Lock()
		assert.Equal(t, b.MaxFlights, b.flying, "the escaped flight ended")
		b.mu.Unlock()
		c.Release()
	}
}

// TestReplyAndDeadlineArrivingTogether is the suspected defect of issue 8:
// a caller waiting for its answer saw a timeout for a call Redis had
// answered (and counted) when the answer and the deadline were both there
// when it looked, because select picks among ready cases at random. The
// answer must win, every time. The call here is queued behind a flight,
// with its answer ready and its deadline passed (or its context ended)
// before the caller looks: each round was a coin toss before.
func TestReplyAndDeadlineArrivingTogether(t *testing.T) {
	busy := func() *batcher { // calls queue
		return &batcher{conf: &conf{Options: Options{MaxFlights: 1}, queueing: new(queueClock)}, flying: 1}
	}
	check := func(t *testing.T, b *batcher, ctx context.Context) {
		for range 100 {
			c := NewCall()
			c.Deadline = time.Now()
			c.state.Store(callSent)
			c.Res = core.Decision{Allowed: true, Remaining: 7}
			c.done <- struct{}{}
			require.NoError(t, b.Send(ctx, c), "the answer is there: it wins")
			assert.Equal(t, core.Decision{Allowed: true, Remaining: 7}, c.Res)
			c.Release()
			b.pending = nil
		}
	}
	t.Run("the deadline passed", func(t *testing.T) {
		check(t, busy(), context.Background())
	})
	t.Run("the context ended", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		check(t, busy(), ctx)
	})
	t.Run("without an answer it is a timeout", func(t *testing.T) {
		c := call("k", time.Millisecond)
		require.ErrorIs(t, busy().Send(context.Background(), c), ErrDeadline)
		assert.Equal(t, int32(callAbandoned), c.state.Load(), "not sent yet: no round trip takes it")
		assert.Zero(t, c.RoundTrip())
	})
}

// TestReadyConnRefusesLateWrites: once its write deadline has passed, a
// readyConn writes nothing and says so, and the batcher counts such a
// command as never sent, unlike a socket's own timeout.
func TestReadyConnRefusesLateWrites(t *testing.T) {
	raw, err := net.Dial("tcp", redistest.Addr(t))
	require.NoError(t, err)
	defer raw.Close()
	conn := &readyConn{TCPConn: raw.(*net.TCPConn), queueing: new(queueClock)}
	require.NoError(t, conn.SetWriteDeadline(time.Now().Add(-time.Millisecond)))
	n, err := conn.Write([]byte("PING\r\n"))
	assert.Zero(t, n)
	require.ErrorIs(t, err, errNotSent)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	assert.True(t, ne.Timeout())

	require.NoError(t, conn.SetDeadline(time.Now().Add(time.Second)))
	_, err = conn.Write([]byte("PING\r\n"))
	require.NoError(t, err)
	buf := make([]byte, 16)
	n, err = conn.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "+PONG\r\n", string(buf[:n]))

	assert.True(t, isUnsent(errNotSent))
	assert.True(t, isUnsent(fmt.Errorf("go-redis: %w", context.DeadlineExceeded)), "the client's check before it takes a connection")
	assert.False(t, isUnsent(&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}), "a read that timed out: sent")
	assert.False(t, isUnsent(&net.OpError{Op: "write", Err: os.ErrDeadlineExceeded}), "a write that timed out: perhaps partly sent")
	assert.False(t, isUnsent(nil))
}

// TestReadyConnKeepsItsDeadlineAfterAPoll: a polled read leaves a poll's
// short deadline on the socket; a read after the process stopped being busy
// (no poll) must wait for the connection's own deadline, not time out at
// the poll's, as a reply read in two pieces across that moment would.
func TestReadyConnKeepsItsDeadlineAfterAPoll(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	raw, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer raw.Close()
	peer, err := ln.Accept()
	require.NoError(t, err)
	defer peer.Close()
	q := new(queueClock)
	conn := &readyConn{TCPConn: raw.(*net.TCPConn), queueing: q}
	const deadline = 300 * time.Millisecond
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(deadline)))
	q.queued() // busy: reads poll
	_, err = peer.Write([]byte("+"))
	require.NoError(t, err)
	buf := make([]byte, 16)
	n, err := conn.Read(buf)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	q.at.Store(0) // no longer busy: a plain read
	start := time.Now()
	_, err = conn.Read(buf) // nothing comes: the connection's deadline
	took := time.Since(start)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.Greater(t, took, deadline/2, "timed out at a poll's deadline, not the connection's")
}

// TestQueueClock: a readyConn polls only within a second of a call
// queueing for a round trip.
func TestQueueClock(t *testing.T) {
	var q queueClock
	assert.False(t, q.busy(), "no call has queued")
	q.queued()
	assert.True(t, q.busy())
	q.at.Store(time.Now().Add(-1001 * time.Millisecond).UnixNano())
	assert.False(t, q.busy(), "the last one queued over a second ago")
}

// TestRefusedBatchIsDecidedKeyByKey: a cross-slot script call holding
// keys of several Cluster nodes goes to the first key's node, which
// refuses the keys it does not serve before it changes anything; the calls
// are then decided key by key, as sequential calls would be.
func TestRefusedBatchIsDecidedKeyByKey(t *testing.T) {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.Cluster(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	p := core.FixedWindow(3, time.Minute)
	now := coretest.Epoch
	// The batcher of one node, sent calls of several: one script call in
	// the cross-slot form.
	b := &batcher{conf: newSender(t, rdb, p, 10*time.Second).conf, route: routeNode}
	ref := core.MustNew(p, core.WithClock(func() time.Time { return now }))
	t.Cleanup(func() { _ = ref.Close() })
	ctx := context.Background()
	prefix := fmt.Sprintf("refused-%d-", time.Now().UnixNano())
	var calls []*Call
	nodes := map[string]bool{}
	for i := range 12 {
		c := call(prefix+fmt.Sprintf("user%d", i%6), time.Minute)
		c.N, c.Now = int64(i%3), now.UnixNano()
		calls = append(calls, c)
		node, err := rdb.MasterForKey(ctx, c.Key)
		require.NoError(t, err)
		nodes[node.Options().Addr] = true
	}
	require.Greater(t, len(nodes), 1, "the keys span several nodes")
	var refused int
	b.rdb.AddHook(afterProcess(func(cmd redis.Cmder) { // the limiter's own client
		if err := cmd.Err(); err != nil && isClusterRefusal(err) {
			refused++
		}
	}))
	b.exec(ctx, calls)
	assert.Positive(t, refused, "the node refused the batch")
	for i, c := range calls {
		require.NoError(t, c.Err, "call %d", i)
		var want core.Decision
		var err error
		if c.N == 0 {
			want, err = ref.Peek(ctx, c.Key)
		} else {
			want, err = ref.AllowN(ctx, c.Key, c.N)
		}
		require.NoError(t, err)
		c.Res.Limit, c.Res.Policy = p.Limit, p
		assert.Equal(t, want, c.Res, "call %d", i)
	}
}

// afterProcess is a go-redis hook calling f with each command it has sent.
type afterProcess func(redis.Cmder)

func (f afterProcess) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f afterProcess) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		f(cmd)
		return err
	}
}
func (f afterProcess) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestBatchRefusal: which errors make a cross-slot call fall back to
// calls key by key (the script has changed nothing), and which do not
// (the script may have run).
func TestBatchRefusal(t *testing.T) {
	for _, tc := range []struct {
		err    error
		refuse bool
	}{
		{proto("ERR Error running script (call to f_x): @user_script:5: Script attempted to access a non local key in a cluster node"), true},
		{proto("MOVED 3999 127.0.0.1:6381"), true},
		{proto("ASK 3999 127.0.0.1:6381"), true},
		{proto("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{proto("CROSSSLOT Keys in request don't hash to the same slot"), true},
		{proto("ERR Error compiling script (new function): user_script:1: unexpected symbol near '#'"), true},
		{proto("ERR some other error"), false},
		{context.DeadlineExceeded, false},
		{fmt.Errorf("read tcp: i/o timeout"), false},
	} {
		assert.Equal(t, tc.refuse, isClusterRefusal(tc.err), "%v", tc.err)
	}
}

// proto returns an error reply of the server, as go-redis returns it (a
// redis.Error).
func proto(msg string) error { return redisError(msg) }

type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

// TestRoute: how a round trip groups its calls into script calls follows
// the client's type, and nothing else about it (a client's options change
// no path).
func TestRoute(t *testing.T) {
	for _, tc := range []struct {
		rdb   redis.UniversalClient
		route route
	}{
		{redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), routeOne},
		{redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}), routeOne},
		{redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}}), routeOne},
		{redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}), routeCluster},
		{redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}}), routePerKey},
	} {
		t.Cleanup(func() { _ = tc.rdb.Close() })
		got := newSender(t, tc.rdb, core.TokenBucket(1, time.Second), time.Second).route
		assert.Equal(t, tc.route, got, "%T", tc.rdb)
	}
}

// TestClusterCloseWhileNodesAreAdded: Close reads the node batchers while
// a Send may add one (a node used for the first time); under the race
// detector, an unlocked read of the map is a reported race, and at worst a
// fatal concurrent map iteration and write. A node batcher made after
// Close took the list would never be stopped: none is made.
func TestClusterCloseWhileNodesAreAdded(t *testing.T) {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = rdb.Close() })
	cl := newSender(t, rdb, core.TokenBucket(1, time.Second), time.Second)
	for range 1000 {
		cl.node(new(redis.Client))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			cl.node(new(redis.Client))
		}
	}()
	cl.Close()
	<-done
	// Every node batcher made before Close was stopped with it, and one
	// asked for after it is the closed Sender's own: none is left open.
	for range 3 {
		nb := cl.node(new(redis.Client))
		nb.mu.Lock()
		assert.True(t, nb.closed, "a node's batcher after Close")
		nb.mu.Unlock()
	}
	assert.Empty(t, cl.nodeBatchers())
}
