package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/outage"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
)

// redisCalls counts the calls a client sends to Redis, pipelined or not:
// EVALSHA and DEL (not the EVAL that follows an EVALSHA when Redis did
// not have the script, nor a connection's handshake). It can make them
// fail as if Redis had, and with hold set, a counted command waits,
// before it is sent, until hold is closed or its context ends.
type redisCalls struct {
	n    atomic.Int64
	fail atomic.Bool
	hold atomic.Pointer[chan struct{}]

	mu      sync.Mutex
	byPhase map[string]int64 // user keys' text up to the first '-'
}

// sent returns how many counted commands were for keys "<phase>-...".
func (r *redisCalls) sent(phase string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byPhase[phase]
}

// count counts cmd, by the phase in its user key (between the braces).
func (r *redisCalls) count(cmd redis.Cmder) {
	r.n.Add(1)
	args := cmd.Args()
	pos := 3 // EVALSHA sha 1 key ...
	if cmd.Name() == "del" {
		pos = 1
	}
	if len(args) <= pos {
		return
	}
	key, _ := args[pos].(string)
	if i := strings.IndexByte(key, '{'); i >= 0 {
		key = key[i+1:]
	}
	phase, _, _ := strings.Cut(key, "-")
	r.mu.Lock()
	if r.byPhase == nil {
		r.byPhase = map[string]int64{}
	}
	r.byPhase[phase]++
	r.mu.Unlock()
}

var errInjected = errors.New("injected: Redis is unavailable")

func counted(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "evalsha", "del":
		return true
	}
	return false
}

func (r *redisCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *redisCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !counted(cmd) {
			return next(ctx, cmd)
		}
		r.count(cmd)
		if err := r.fault(ctx); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// fault holds a counted command while hold is set, and fails it while
// fail is.
func (r *redisCalls) fault(ctx context.Context) error {
	if h := r.hold.Load(); h != nil {
		select {
		case <-*h:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if r.fail.Load() {
		return errInjected
	}
	return nil
}

func (r *redisCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, cmd := range cmds {
			if counted(cmd) {
				r.count(cmd)
				n++
			}
		}
		if n == 0 {
			return next(ctx, cmds)
		}
		if err := r.fault(ctx); err != nil {
			for _, cmd := range cmds {
				cmd.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// changeLog records what WithBreakerHook reports.
type changeLog struct {
	mu      sync.Mutex
	changes []BreakerChange
	then    func(BreakerChange) // called after each change is logged
}

func (c *changeLog) add(ch BreakerChange) {
	c.mu.Lock()
	c.changes = append(c.changes, ch)
	then := c.then
	c.mu.Unlock()
	if then != nil {
		then(ch)
	}
}

// path returns the changes as "from->to", an error as "from->to (error)".
func (c *changeLog) path() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []string{}
	for _, ch := range c.changes {
		s := ch.From.String() + "->" + ch.To.String()
		if ch.Err != nil {
			s += " (error)"
		}
		out = append(out, s)
	}
	return out
}

func (c *changeLog) last() BreakerChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changes[len(c.changes)-1]
}

// forFallbackClients runs test with the client kinds of forClients, each
// with a PoolSize far above the dials the tests fail: after PoolSize failed
// dials go-redis stops dialling and returns the last dial error until a
// dial in the background, once a second, gets through, so the probe after
// a restart could fail for up to a second (in production too: the next
// probe then closes the breaker).
func forFallbackClients(t *testing.T, test func(t *testing.T, newClient func(addr string) *redis.Client)) {
	for _, tc := range []struct {
		name string
		opts redis.Options
	}{
		{"with go-redis defaults", redis.Options{}},
		{"with ContextTimeoutEnabled", redis.Options{ContextTimeoutEnabled: true}},
		{"with ContextTimeoutEnabled and socket deadlines disabled", redis.Options{ContextTimeoutEnabled: true, ReadTimeout: -2, WriteTimeout: -2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			test(t, func(addr string) *redis.Client {
				o := tc.opts
				o.Addr, o.PoolSize = addr, 1000
				c := redis.NewClient(&o)
				t.Cleanup(func() { _ = c.Close() })
				return c
			})
		})
	}
}

// TestFallbackWhenRedisStops stops a real redis-server under steady
// traffic from several goroutines (in rounds, one call per goroutine per
// round, so that each phase can be checked exactly) and starts it again:
// the fallback decides every call Redis fails; the breaker opens after
// BreakerFailures failures, then Redis is not called except by one probe
// per interval; the fallback admits exactly its policy; after the restart
// a probe closes the breaker and Redis decides again, from its own state.
// The clock (scripts, breaker and fallback) is a test clock: the probes
// come exactly when the test moves it.
//
// Each phase has keys of its own, and the client's hook counts commands
// by key: a call that gave up on Redis may still reach the wire later (the
// batcher can be busy with go-redis's dial retries for longer than the
// timeout), and its key says which phase sent it, whenever it arrives.
func TestFallbackWhenRedisStops(t *testing.T) {
	forFallbackClients(t, testFallbackWhenRedisStops)
}

func testFallbackWhenRedisStops(t *testing.T, newClient func(string) *redis.Client) {
	const (
		callers  = 4  // goroutines, one call each per round
		keys     = 2  // two callers per key
		failures = 10 // reached in the third round of failures
		interval = time.Second
		timeout  = time.Second
	)
	shared := core.FixedWindow(10, time.Hour) // the test clock stays in one window
	local := shared                           // the fallback's policy
	srv := redistest.Start(t)
	rdb := newClient(srv.Addr)
	calls := &redisCalls{}
	addHook(rdb, calls)
	clock := coretest.NewClock(coretest.Epoch)
	var changes changeLog
	lim := newLimiter(t, rdb, shared, withClock(clock.Now), WithTimeout(timeout),
		WithBreakerFailures(failures), WithBreakerProbeInterval(interval), WithBreakerHook(changes.add))
	ctx := context.Background()

	fallbackCalls, fallbackAdmitted := map[string]int64{}, map[string]int64{}
	// round makes one call from each of the callers at once, on the keys
	// "<phase>-k0" and "<phase>-k1", and returns the Sources of the
	// decisions, and how long the round took. In the phase "down" the
	// callers take turns, so that each failure is a round trip of its own
	// (the breaker counts the calls of one round trip as one failure).
	round := func(phase string) ([]core.Source, time.Duration) {
		t.Helper()
		start := time.Now()
		ds := make([]core.Decision, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() { ds[i], errs[i] = lim.Allow(ctx, fmt.Sprintf("%s-k%d", phase, i%keys)) })
			if phase == "down" {
				wg.Wait()
			}
		}
		wg.Wait()
		elapsed := time.Since(start)
		var srcs []core.Source
		for i, d := range ds {
			require.NoError(t, errs[i], "caller %d", i)
			srcs = append(srcs, d.Source)
			if d.Source == core.SourceFallback {
				assert.Equal(t, local, d.Policy)
				key := fmt.Sprintf("%s-k%d", phase, i%keys)
				fallbackCalls[key]++
				if d.Allowed {
					fallbackAdmitted[key]++
				}
			}
		}
		return srcs, elapsed
	}
	all := func(src core.Source, n int) []core.Source { return slices.Repeat([]core.Source{src}, n) }
	fromFallback := all(core.SourceFallback, callers)

	// Redis up: Redis decides.
	for range 3 {
		srcs, _ := round("up")
		assert.Equal(t, all(core.SourceStore, callers), srcs)
	}
	require.Equal(t, BreakerClosed, breakerState(lim))

	srv.Stop()
	// Two rounds of failures, 8 in all: each call is decided by the
	// fallback, and the breaker stays closed.
	for i := range 2 {
		srcs, _ := round("down")
		assert.Equal(t, fromFallback, srcs)
		require.Equal(t, BreakerClosed, breakerState(lim), "after %d failures", (i+1)*callers)
	}
	assert.Empty(t, changes.path())
	// The third round brings the failures to 10: open.
	srcs, _ := round("down")
	assert.Equal(t, fromFallback, srcs)
	require.Equal(t, BreakerOpen, breakerState(lim))
	require.Equal(t, []string{"closed->open (error)"}, changes.path())
	assert.Contains(t, changes.last().Err.Error(), "redisstore: AllowN")

	// Open: Redis is not called, and no call waits for it.
	for i := range 4 {
		srcs, elapsed := round("open")
		assert.Equal(t, fromFallback, srcs)
		assert.Less(t, elapsed, timeout/2, "open, round %d", i)
	}
	assert.Zero(t, calls.sent("open"))
	// The probe interval passes: one call probes, the others do not wait.
	clock.Advance(interval)
	srcs, _ = round("probe1")
	assert.Equal(t, fromFallback, srcs)
	require.Equal(t, BreakerOpen, breakerState(lim))
	assert.Equal(t, []string{"closed->open (error)", "open->half-open", "half-open->open (error)"}, changes.path())
	srcs, _ = round("open") // no second probe within the interval
	assert.Equal(t, fromFallback, srcs)

	srv.Restart()
	srcs, _ = round("open") // Redis is back, but the interval has not passed
	assert.Equal(t, fromFallback, srcs)
	assert.Zero(t, calls.sent("open"))
	clock.Advance(interval)
	round("probe2")
	require.Equal(t, BreakerClosed, breakerState(lim))
	assert.Equal(t, []string{
		"closed->open (error)", "open->half-open", "half-open->open (error)",
		"open->half-open", "half-open->closed",
	}, changes.path())
	assert.Positive(t, calls.sent("probe2"))

	// Closed: Redis decides again, every call, from its own state:
	// restarted empty, and without what the fallback counted.
	for range 3 {
		srcs, _ := round("up2")
		assert.Equal(t, all(core.SourceStore, callers), srcs)
	}
	for k := range keys {
		d, err := lim.Peek(ctx, fmt.Sprintf("up2-k%d", k))
		require.NoError(t, err)
		assert.Equal(t, shared.Limit-3*callers/keys, d.Remaining)
		d, err = lim.Peek(ctx, fmt.Sprintf("open-k%d", k))
		require.NoError(t, err)
		assert.Equal(t, core.SourceStore, d.Source)
		assert.Equal(t, shared.Limit, d.Remaining, "the fallback's count is not in Redis")
	}

	// Every phase's Redis calls, whenever they reached the wire: none
	// while open (only the Peeks above, with the breaker closed); one
	// probe at most per interval (a probe that gave up while queued for a
	// busy batcher is never sent); the failures before the breaker
	// opened, no more than the calls.
	assert.Equal(t, int64(keys), calls.sent("open"))
	assert.LessOrEqual(t, calls.sent("probe1"), int64(1))
	assert.LessOrEqual(t, calls.sent("down"), int64(3*callers))
	// The fallback admitted exactly its limit per key, and denied the
	// rest: on the open phase's keys, more calls than the limit.
	for key, n := range fallbackCalls {
		assert.Equal(t, min(n, local.Limit), fallbackAdmitted[key], "key %s", key)
	}
	assert.Greater(t, fallbackCalls["open-k0"], local.Limit)
}

// TestFallbackWhenRedisIsSlow delays every reply of a real Redis by ten
// times the timeout: timeouts are failures, so the breaker opens and the
// calls after it return at once. The server keeps its data meanwhile, so
// when the delay goes, the state Redis had resumes: what the fallback
// counted is not written back.
func TestFallbackWhenRedisIsSlow(t *testing.T) {
	redistest.RequireTimingTests(t)
	relay := redistest.StartRelay(t, redistest.Addr(t))
	rdb := newClient(t, relay.Addr())
	calls := &redisCalls{}
	addHook(rdb, calls)
	const timeout = 200 * time.Millisecond
	clock := coretest.NewClock(coretest.Epoch)
	var changes changeLog
	shared := core.TokenBucket(5, time.Hour)
	local := shared // the fallback's policy
	lim := newLimiter(t, rdb, shared, withClock(clock.Now), WithTimeout(timeout),
		WithBreakerFailures(2), WithBreakerHook(changes.add))
	ctx := context.Background()

	for range 3 {
		d, err := lim.Allow(ctx, "resumes")
		require.NoError(t, err)
		require.Equal(t, core.SourceStore, d.Source)
	}

	relay.SetDelay(10 * timeout)
	for i := range 2 { // on another key: Redis counts these (see "Timeouts and errors")
		start := time.Now()
		d, err := lim.Allow(ctx, "trips")
		require.NoError(t, err)
		assert.Equal(t, core.SourceFallback, d.Source)
		assert.GreaterOrEqual(t, time.Since(start), timeout, "call %d waited for Redis", i)
	}
	require.Equal(t, BreakerOpen, breakerState(lim))
	assert.ErrorIs(t, changes.last().Err, context.DeadlineExceeded)

	sent := calls.n.Load()
	start := time.Now()
	for i := range 10 {
		d, err := lim.Allow(ctx, "resumes")
		require.NoError(t, err)
		assert.Equal(t, core.SourceFallback, d.Source)
		assert.Equal(t, i < int(local.Burst), d.Allowed, "call %d in fallback", i)
	}
	assert.Less(t, time.Since(start), timeout, "ten calls in fallback, none waiting for Redis")
	assert.Equal(t, sent, calls.n.Load())

	// The replies the relay holds pass at once: the two round trips of
	// "trips" end, and the probe is sent rather than queued behind them.
	relay.SetDelay(0)
	clock.Advance(defaultBreakerProbeInterval)
	d, err := lim.Peek(ctx, "resumes") // the probe
	require.NoError(t, err)
	assert.Equal(t, core.SourceStore, d.Source)
	assert.Equal(t, shared.Burst-3, d.Remaining, "Redis's state from before the outage, without the fallback's")
	assert.Equal(t, BreakerClosed, breakerState(lim))
	assert.Equal(t, []string{"closed->open (error)", "open->half-open", "half-open->closed"}, changes.path())
}

// breakerSetup is a limiter on a real Redis whose
// failures the test switches on and off, on a test clock.
type breakerSetup struct {
	lim     *Limiter
	calls   *redisCalls
	clock   *coretest.Clock
	changes *changeLog
}

const breakerTestInterval = 10 * time.Second

func newBreakerSetup(t *testing.T, p core.Policy, opts ...Option) *breakerSetup {
	rdb := newClient(t, redistest.Addr(t)) // ContextTimeoutEnabled: a lone call is one command
	s := &breakerSetup{calls: &redisCalls{}, clock: coretest.NewClock(coretest.Epoch), changes: &changeLog{}}
	addHook(rdb, s.calls)
	opts = append([]Option{withClock(s.clock.Now), WithBreakerFailures(3), WithBreakerProbeInterval(breakerTestInterval), WithBreakerHook(s.changes.add)}, opts...)
	s.lim = newLimiter(t, rdb, p, opts...)
	return s
}

// open fails Redis and makes three calls: the breaker opens.
func (s *breakerSetup) open(t *testing.T) {
	t.Helper()
	s.calls.fail.Store(true)
	for range 3 {
		_, err := s.lim.Allow(context.Background(), "opener")
		if s.lim.fb == nil {
			require.ErrorIs(t, err, errInjected)
		} else {
			require.NoError(t, err)
		}
	}
	require.Equal(t, BreakerOpen, breakerState(s.lim))
}

func TestBreaker(t *testing.T) {
	ctx := context.Background()
	p := core.FixedWindow(5, time.Hour)

	t.Run("opens on the third consecutive failure, not before", func(t *testing.T) {
		s := newBreakerSetup(t, p)
		s.calls.fail.Store(true)
		for i := range 3 {
			require.Equal(t, BreakerClosed, breakerState(s.lim), "after %d failures", i)
			d, err := s.lim.Allow(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, core.SourceFallback, d.Source)
			assert.True(t, d.Allowed)
			assert.Equal(t, int64(5-i-1), d.Remaining, "the fallback's count")
		}
		assert.Equal(t, BreakerOpen, breakerState(s.lim))
		assert.Equal(t, int64(3), s.calls.n.Load())
		require.Equal(t, []string{"closed->open (error)"}, s.changes.path())
		assert.ErrorIs(t, s.changes.last().Err, errInjected)
	})

	t.Run("a success starts the count again", func(t *testing.T) {
		s := newBreakerSetup(t, p)
		for _, fail := range []bool{true, true, false, true, true} {
			s.calls.fail.Store(fail)
			d, err := s.lim.Allow(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, fail, d.Source == core.SourceFallback)
		}
		assert.Equal(t, BreakerClosed, breakerState(s.lim))
		assert.Empty(t, s.changes.path())
		_, err := s.lim.Allow(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, BreakerOpen, breakerState(s.lim))
	})

	t.Run("probes once per interval and closes when a probe succeeds", func(t *testing.T) {
		s := newBreakerSetup(t, p)
		s.open(t)
		sent := s.calls.n.Load()
		s.clock.Advance(breakerTestInterval - time.Nanosecond)
		_, err := s.lim.Allow(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, sent, s.calls.n.Load(), "not yet")

		s.clock.Advance(time.Nanosecond)
		d, err := s.lim.Allow(ctx, "k") // the probe fails
		require.NoError(t, err)
		assert.Equal(t, core.SourceFallback, d.Source)
		assert.Equal(t, sent+1, s.calls.n.Load())
		assert.Equal(t, BreakerOpen, breakerState(s.lim))

		s.calls.fail.Store(false)
		s.clock.Advance(breakerTestInterval - time.Nanosecond)
		_, err = s.lim.Allow(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, sent+1, s.calls.n.Load(), "the interval starts again at the failed probe")
		s.clock.Advance(time.Nanosecond)
		d, err = s.lim.Allow(ctx, "k") // the probe succeeds
		require.NoError(t, err)
		assert.Equal(t, core.SourceStore, d.Source)
		assert.Equal(t, BreakerClosed, breakerState(s.lim))
		assert.Equal(t, []string{"closed->open (error)", "open->half-open", "half-open->open (error)", "open->half-open", "half-open->closed"}, s.changes.path())
	})

	t.Run("one probe at a time: the others are decided by the fallback meanwhile", func(t *testing.T) {
		s := newBreakerSetup(t, p)
		s.open(t)
		s.calls.fail.Store(false)
		hold := make(chan struct{})
		s.calls.hold.Store(&hold)
		sent := s.calls.n.Load()
		s.clock.Advance(breakerTestInterval)
		probe := make(chan core.Decision)
		go func() {
			d, err := s.lim.Allow(ctx, "k")
			assert.NoError(t, err)
			probe <- d
		}()
		for s.calls.n.Load() == sent { // until the probe has reached the client
			time.Sleep(time.Millisecond)
		}
		require.Equal(t, BreakerHalfOpen, breakerState(s.lim))
		for range 20 {
			d, err := s.lim.Allow(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, core.SourceFallback, d.Source)
		}
		d, err := s.lim.Peek(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, core.SourceFallback, d.Source)
		assert.Equal(t, sent+1, s.calls.n.Load(), "only the probe went to Redis")
		close(hold)
		assert.Equal(t, core.SourceStore, (<-probe).Source)
		assert.Equal(t, BreakerClosed, breakerState(s.lim))
	})

	t.Run("a caller's own cancellation or deadline is not a failure", func(t *testing.T) {
		s := newBreakerSetup(t, p)
		s.calls.fail.Store(true)
		ended, cancel := context.WithCancel(ctx)
		cancel()
		for range 5 {
			d, err := s.lim.Allow(ended, "k")
			assert.ErrorIs(t, err, context.Canceled)
			assert.NotErrorIs(t, err, ErrUnavailable)
			assert.Equal(t, core.Decision{Limit: p.Limit, Policy: p}, d, "undecided, as without a fallback")
			_, err = s.lim.Peek(ended, "k")
			assert.ErrorIs(t, err, context.Canceled)
			assert.ErrorIs(t, s.lim.Reset(ended, "k"), context.Canceled)
		}
		assert.Zero(t, s.calls.n.Load(), "an ended context sends nothing")
		// Ending while Redis is being asked.
		hold := make(chan struct{})
		t.Cleanup(func() { close(hold) }) // before the limiter's Close
		s.calls.hold.Store(&hold)
		for range 5 {
			short, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
			_, err := s.lim.Allow(short, "k")
			cancel()
			assert.ErrorIs(t, err, context.DeadlineExceeded)
		}
		assert.Equal(t, BreakerClosed, breakerState(s.lim))
		assert.Empty(t, s.changes.path())
	})

	t.Run("a probe its caller gives up on leaves the breaker half-open for the next call", func(t *testing.T) {
		s := newBreakerSetup(t, p)
		s.open(t)
		hold := make(chan struct{})
		t.Cleanup(func() { close(hold) }) // before the limiter's Close
		s.calls.hold.Store(&hold)
		s.clock.Advance(breakerTestInterval)
		short, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		defer cancel()
		_, err := s.lim.Allow(short, "k")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, BreakerHalfOpen, breakerState(s.lim))

		s.calls.hold.Store(nil)
		s.calls.fail.Store(false)
		d, err := s.lim.Allow(ctx, "k") // the next probe, without waiting for an interval
		require.NoError(t, err)
		assert.Equal(t, core.SourceStore, d.Source)
		assert.Equal(t, []string{"closed->open (error)", "open->half-open", "half-open->closed"}, s.changes.path())
	})

	t.Run("the deny cache answers its denials while open, and never as a probe", func(t *testing.T) {
		s := newBreakerSetup(t, core.TokenBucket(1, time.Hour))
		d, err := s.lim.Allow(ctx, "denied")
		require.NoError(t, err)
		require.True(t, d.Allowed)
		d, err = s.lim.Allow(ctx, "denied") // Redis denies for an hour: cached
		require.NoError(t, err)
		require.False(t, d.Allowed)
		s.open(t)
		s.clock.Advance(breakerTestInterval)
		sent := s.calls.n.Load()
		for range 3 {
			d, err = s.lim.Allow(ctx, "denied")
			require.NoError(t, err)
			assert.False(t, d.Allowed)
			assert.Equal(t, core.SourceDenyCache, d.Source)
			assert.Equal(t, time.Hour-breakerTestInterval, d.RetryAfter, "Redis's denial, from the cache")
		}
		assert.Equal(t, sent, s.calls.n.Load())
		assert.Equal(t, BreakerOpen, breakerState(s.lim), "no probe")
		d, err = s.lim.Allow(ctx, "other") // the probe
		require.NoError(t, err)
		assert.Equal(t, core.SourceFallback, d.Source)
		assert.Equal(t, sent+1, s.calls.n.Load())
	})

	t.Run("a denial from the deny cache neither fails nor starts the count again", func(t *testing.T) {
		s := newBreakerSetup(t, core.TokenBucket(1, time.Hour))
		for range 2 { // admitted, then denied for an hour: cached
			_, err := s.lim.Allow(ctx, "denied")
			require.NoError(t, err)
		}
		s.calls.fail.Store(true)
		sent := s.calls.n.Load()
		for i := range 3 {
			require.Equal(t, BreakerClosed, breakerState(s.lim), "after %d failures", i)
			d, err := s.lim.Allow(ctx, "denied")
			require.NoError(t, err)
			assert.Equal(t, core.SourceDenyCache, d.Source)
			d, err = s.lim.Allow(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, core.SourceFallback, d.Source)
		}
		assert.Equal(t, BreakerOpen, breakerState(s.lim))
		assert.Equal(t, sent+3, s.calls.n.Load())
	})

	t.Run("the hook may call the Limiter", func(t *testing.T) {
		var s *breakerSetup
		var seen []BreakerState
		s = newBreakerSetup(t, p, WithBreakerHook(func(c BreakerChange) {
			seen = append(seen, breakerState(s.lim))
			_, err := s.lim.Allow(ctx, "from the hook") // may change the state itself
			assert.NoError(t, err)
		}))
		s.open(t)
		assert.Equal(t, []BreakerState{BreakerOpen}, seen)
		s.calls.fail.Store(false)
		s.clock.Advance(breakerTestInterval)
		_, err := s.lim.Allow(ctx, "k") // probes: open -> half-open -> closed
		require.NoError(t, err)
		assert.Equal(t, BreakerClosed, breakerState(s.lim))
		assert.Len(t, seen, 3)
	})
}

func TestFallbackPeekAndReset(t *testing.T) {
	ctx := context.Background()
	p := core.FixedWindow(5, time.Hour)

	t.Run("Peek is the fallback's while the breaker is open, and agrees with AllowN", func(t *testing.T) {
		s := newBreakerSetup(t, p)
		s.open(t)
		for i := range 7 {
			peek, err := s.lim.Peek(ctx, "k")
			require.NoError(t, err)
			d, err := s.lim.Allow(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, core.SourceFallback, peek.Source)
			assert.Equal(t, peek.Allowed, d.Allowed, "call %d", i)
			assert.Equal(t, int64(5), peek.Limit)
		}
	})

	t.Run("a Peek that Redis fails is the fallback's", func(t *testing.T) {
		s := newBreakerSetup(t, p)
		s.calls.fail.Store(true)
		d, err := s.lim.Peek(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, core.SourceFallback, d.Source)
		assert.Equal(t, int64(5), d.Remaining)
		assert.Equal(t, int64(1), s.calls.n.Load())
	})

	t.Run("Reset while open forgets the key in the fallback and says Redis was not reset", func(t *testing.T) {
		s := newBreakerSetup(t, p)
		s.open(t)
		for range 5 {
			_, err := s.lim.Allow(ctx, "k")
			require.NoError(t, err)
		}
		d, err := s.lim.Peek(ctx, "k")
		require.NoError(t, err)
		require.False(t, d.Allowed)
		sent := s.calls.n.Load()
		err = s.lim.Reset(ctx, "k")
		assert.ErrorIs(t, err, ErrBreakerOpen)
		assert.Equal(t, sent, s.calls.n.Load())
		d, err = s.lim.Peek(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, int64(5), d.Remaining)
	})

	t.Run("Reset with Redis up forgets the key in both", func(t *testing.T) {
		s := newBreakerSetup(t, p)
		s.open(t) // the opener key's fallback quota is 2 down
		s.calls.fail.Store(false)
		s.clock.Advance(breakerTestInterval)
		_, err := s.lim.Allow(ctx, "opener") // probe: closed
		require.NoError(t, err)
		require.Equal(t, BreakerClosed, breakerState(s.lim))
		require.NoError(t, s.lim.Reset(ctx, "opener"))
		s.calls.fail.Store(true)
		d, err := s.lim.Peek(ctx, "opener")
		require.NoError(t, err)
		assert.Equal(t, core.SourceFallback, d.Source)
		assert.Equal(t, int64(5), d.Remaining, "forgotten in the fallback")
	})

	t.Run("Reset that Redis fails counts as a failure and returns its error", func(t *testing.T) {
		s := newBreakerSetup(t, p)
		s.calls.fail.Store(true)
		for range 3 {
			assert.ErrorIs(t, s.lim.Reset(ctx, "k"), errInjected)
		}
		assert.Equal(t, BreakerOpen, breakerState(s.lim))
	})
}

// TestFallbackCostAboveCapacity: a cost above capacity is a denial in
// every breaker state. With the breaker open, the fallback tells its own
// state of the key; WithoutFallback, nobody can tell it, and the Decision
// says so.
func TestFallbackCostAboveCapacity(t *testing.T) {
	ctx := context.Background()
	p := core.FixedWindow(100, time.Hour)

	t.Run("the fallback's denial, with its state of the key, without Redis", func(t *testing.T) {
		s := newBreakerSetup(t, p)
		s.open(t)
		sent := s.calls.n.Load()
		_, err := s.lim.AllowN(ctx, "k", 30)
		require.NoError(t, err)
		d, err := s.lim.AllowN(ctx, "k", 101)
		assert.ErrorIs(t, err, core.ErrCostExceedsCapacity)
		assert.Equal(t, core.Decision{Limit: 100, Remaining: 70, ResetAfter: d.ResetAfter, Policy: p, Source: core.SourceFallback, At: s.clock.Now()}, d, "At: the fallback's clock")
		assert.Positive(t, d.ResetAfter)
		assert.Equal(t, sent, s.calls.n.Load())
	})
	for _, open := range []bool{false, true} {
		t.Run(fmt.Sprintf("without a fallback, breaker open %v: a denial whose state is unknown", open), func(t *testing.T) {
			s := newBreakerSetup(t, p, WithoutFallback())
			if open {
				s.open(t)
			} else {
				s.calls.fail.Store(true)
			}
			d, err := s.lim.AllowN(ctx, "k", 101)
			assert.ErrorIs(t, err, core.ErrCostExceedsCapacity)
			assert.ErrorIs(t, err, ErrUnavailable)
			assert.ErrorIs(t, err, errInjected, "the cause")
			if open {
				assert.ErrorIs(t, err, ErrBreakerOpen)
			}
			assert.Equal(t, core.Decision{Limit: 100, Policy: p}, d)
		})
	}
	t.Run("an invalid cost is an error, as always", func(t *testing.T) {
		s := newBreakerSetup(t, p)
		s.open(t)
		_, err := s.lim.AllowN(ctx, "k", 0)
		assert.ErrorIs(t, err, core.ErrInvalidCost)
	})
}

func TestFallbackClose(t *testing.T) {
	ctx := context.Background()
	for _, open := range []bool{false, true} {
		t.Run(fmt.Sprintf("breaker open %v", open), func(t *testing.T) {
			s := newBreakerSetup(t, core.FixedWindow(100, time.Hour))
			if open {
				s.open(t)
			}
			require.NoError(t, s.lim.Close())
			require.NoError(t, s.lim.Close())
			_, err := s.lim.Allow(ctx, "k")
			assert.ErrorIs(t, err, core.ErrClosed)
			_, err = s.lim.Peek(ctx, "k")
			assert.ErrorIs(t, err, core.ErrClosed)
			assert.ErrorIs(t, s.lim.Reset(ctx, "k"), core.ErrClosed)
			_, err = s.lim.fb.Allow(ctx, "k")
			assert.ErrorIs(t, err, core.ErrClosed, "the fallback is closed too")
		})
	}
}

func TestBreakerOptionsRejectBadInput(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	p := core.TokenBucket(10, time.Second)
	cases := []struct {
		name string
		opt  Option
		want string
	}{
		{"zero failures", WithBreakerFailures(0), "redisstore: WithBreakerFailures must be > 0, got 0"},
		{"a zero probe interval", WithBreakerProbeInterval(0), "redisstore: WithBreakerProbeInterval must be > 0, got 0s"},
		{"a nil hook", WithBreakerHook(nil), "redisstore: WithBreakerHook needs a non-nil function"},
	}
	for _, tc := range cases {
		t.Run("rejects "+tc.name, func(t *testing.T) {
			l, err := New(rdb, p, tc.opt)
			assert.Nil(t, l)
			assert.EqualError(t, err, tc.want)
		})
	}
}

func TestBreakerStateString(t *testing.T) {
	assert.Equal(t, "closed", BreakerClosed.String())
	assert.Equal(t, "open", BreakerOpen.String())
	assert.Equal(t, "half-open", BreakerHalfOpen.String())
	assert.Equal(t, "BreakerState(7)", BreakerState(7).String())
}

// TestBreakerChangeNamesItsLimiter: a hook shared by several limiters
// learns from each change which limiter's breaker changed: its policy.
func TestBreakerChangeNamesItsLimiter(t *testing.T) {
	rdb := newClient(t, refusingAddr(t))
	var changes changeLog
	perIP := core.TokenBucket(100, time.Hour).WithName("per-ip")
	perKey := core.FixedWindow(10, time.Minute)
	ip := newLimiter(t, rdb, perIP, WithBreakerFailures(1), WithBreakerHook(changes.add))
	key := newLimiter(t, rdb, perKey, WithBreakerFailures(1), WithBreakerHook(changes.add))
	ctx := context.Background()
	_, err := ip.Allow(ctx, "k")
	require.NoError(t, err)
	_, err = key.Allow(ctx, "k")
	require.NoError(t, err)
	var got []string
	for _, c := range changes.changes {
		got = append(got, c.Policy.Label()+": "+c.From.String()+"->"+c.To.String())
	}
	assert.Equal(t, []string{"per-ip: closed->open", "fixedwindow-10-per-60s: closed->open"}, got)
	assert.Equal(t, perIP, changes.changes[0].Policy)
}

// TestBreakerStatesAgree: the breaker's states are BreakerState's, in its
// order (the hook converts one to the other).
func TestBreakerStatesAgree(t *testing.T) {
	assert.Equal(t, []BreakerState{BreakerClosed, BreakerOpen, BreakerHalfOpen},
		[]BreakerState{BreakerState(outage.Closed), BreakerState(outage.Open), BreakerState(outage.HalfOpen)})
}
