package redisstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/redistest"
	"github.com/go-ratelimit/ratelimit/redisstore/internal/transport"
)

// Regression tests for the redisstore defects of issue 8, each named after
// its scenario.

// TestSlidingWindowAdmitsAClientAtExactlyLimitPerWindow is defect 1: the
// script's bound on B+1 consecutive buckets was Limit + Limit/B rounded
// down, while a client sending steadily at Limit per Window lands
// Limit + ceil(Limit/B) in them whenever B does not divide Limit, and was
// denied (10 of 60 requests for 5 per minute).
func TestSlidingWindowAdmitsAClientAtExactlyLimitPerWindow(t *testing.T) {
	rdb := newClient(t, redistest.Addr(t))
	ctx := context.Background()
	for _, tc := range []struct {
		p     core.Policy
		every time.Duration
	}{
		{core.SlidingWindow(5, time.Minute), 12 * time.Second},
		{core.SlidingWindow(5, time.Second), 200 * time.Millisecond},
		{core.SlidingWindow(15, 1500*time.Millisecond), 100 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("%v every %v", tc.p, tc.every), func(t *testing.T) {
			// Every phase of the requests against the buckets, in
			// sevenths of a bucket (the first, 0, is aligned).
			for phase := range 7 {
				clock := coretest.NewClock(coretest.Epoch.Add(time.Duration(phase) * tc.p.Interval() / 7))
				lim := newLimiter(t, rdb, tc.p, withClock(clock.Now))
				for i := range 60 {
					d, err := lim.Allow(ctx, "steady")
					require.NoError(t, err)
					require.True(t, d.Allowed, "phase %d/7 of a bucket: request %d at +%v denied", phase, i, clock.Now().Sub(coretest.Epoch))
					clock.Advance(tc.every)
				}
			}
		})
	}
}

// TestMaxBucketsFitLua runs a sliding window of core.MaxBuckets buckets,
// the most any store accepts: the script unpacks the whole ring onto Lua's
// stack, and still answers as the in-memory limiter does.
func TestMaxBucketsFitLua(t *testing.T) {
	rdb := newClient(t, redistest.Addr(t))
	ctx := context.Background()
	p := core.SlidingWindow(100_000, core.MaxBuckets*time.Millisecond).WithBuckets(core.MaxBuckets)
	clock := coretest.NewClock(coretest.Epoch)
	lim := newLimiter(t, rdb, p, withClock(clock.Now))
	ref, err := core.New(p, core.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ref.Close() })
	for i, n := range []int64{1, 40_000, 0, 30_000, 50_000, 1, 0} {
		clock.Advance(time.Duration(i) * 700 * time.Millisecond)
		var got, want core.Decision
		if n == 0 {
			got, err = lim.Peek(ctx, "k")
			require.NoError(t, err)
			want, err = ref.Peek(ctx, "k")
		} else {
			got, err = lim.AllowN(ctx, "k", n)
			require.NoError(t, err)
			want, err = ref.AllowN(ctx, "k", n)
		}
		require.NoError(t, err)
		require.Equal(t, want, got, "step %d, cost %d", i, n)
	}
}

// hookFunc is a go-redis hook running f around each single command sent
// (the connection's handshake included); pipelines pass through untouched.
type hookFunc func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error

func (f hookFunc) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f hookFunc) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { return f(ctx, cmd, next) }
}

func (f hookFunc) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// isDenial reports whether cmd is a script call that Redis answered with a
// denial.
func isDenial(cmd redis.Cmder) bool {
	c, ok := cmd.(*redis.Cmd)
	if !ok || !isScriptCall(cmd) {
		return false
	}
	v, ok := c.Val().(string) // one call: 5 little-endian int64, allowed first, then now
	return ok && len(v) == 40+16 && binary.LittleEndian.Uint64([]byte(v[:8])) == 0
}

// TestResetUndoneByAnInFlightDenial is defect 5: Reset cleared the deny
// cache and then sent DEL, so a unit-cost denial that Redis produced before
// the DEL but whose reply had not been handled yet cached itself after the
// clear, and the key stayed denied in this process for its RetryAfter
// after the Reset. Both orders: the denial's reply handled after Reset has
// returned, and while its DEL is in flight.
func TestResetUndoneByAnInFlightDenial(t *testing.T) {
	addr := redistest.Addr(t)
	ctx := context.Background()
	p := core.TokenBucket(1, time.Minute) // after one request, denied for a minute

	// setup returns a limiter with the deny cache whose client runs hook,
	// on a frozen test clock, with the key "k" used up.
	setup := func(t *testing.T, hook hookFunc) *Limiter {
		rdb := newClient(t, addr)
		addHook(rdb, hook)
		clock := coretest.NewClock(coretest.Epoch)
		lim := newLimiter(t, rdb, p, withClock(clock.Now), WithTimeout(time.Minute))
		d, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		require.True(t, d.Allowed)
		return lim
	}

	t.Run("the denial's reply is handled after Reset returned", func(t *testing.T) {
		answered := make(chan struct{}) // Redis has denied the held call
		release := make(chan struct{})  // let its reply through
		armed := make(chan struct{}, 1)
		lim := setup(t, func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
			err := next(ctx, cmd)
			if isDenial(cmd) {
				select {
				case <-armed:
					close(answered)
					<-release
				default:
				}
			}
			return err
		})
		armed <- struct{}{}
		held := make(chan core.Decision, 1)
		go func() {
			d, err := lim.Allow(ctx, "k")
			assert.NoError(t, err)
			held <- d
		}()
		<-answered
		require.NoError(t, lim.Reset(ctx, "k"))
		close(release)
		assert.False(t, (<-held).Allowed, "Redis denied it before the DEL")

		d, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		assert.True(t, d.Allowed, "the next call after Reset is admitted")
	})

	t.Run("the denial's reply is handled while the DEL is in flight", func(t *testing.T) {
		delSent := make(chan struct{})
		proceed := make(chan struct{})
		lim := setup(t, func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
			if cmd.Name() == "del" {
				close(delSent)
				<-proceed
			}
			return next(ctx, cmd)
		})
		reset := make(chan error, 1)
		go func() { reset <- lim.Reset(ctx, "k") }()
		<-delSent // Reset has begun, its DEL not yet at Redis
		d, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		require.False(t, d.Allowed, "Redis has not seen the DEL yet")
		close(proceed)
		require.NoError(t, <-reset)

		d, err = lim.Allow(ctx, "k")
		require.NoError(t, err)
		assert.True(t, d.Allowed, "the next call after Reset is admitted")
	})

	t.Run("a denial Redis produces after the DEL is cached", func(t *testing.T) {
		var sent int
		lim := setup(t, func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
			if isScriptCall(cmd) {
				sent++ // calls are sequential here
			}
			return next(ctx, cmd)
		})
		d, err := lim.Allow(ctx, "k")
		require.NoError(t, err)
		require.False(t, d.Allowed)
		require.NoError(t, lim.Reset(ctx, "k"))
		d, err = lim.Allow(ctx, "k")
		require.NoError(t, err)
		require.True(t, d.Allowed)
		d, err = lim.Allow(ctx, "k")
		require.NoError(t, err)
		require.False(t, d.Allowed)
		before := sent
		d, err = lim.Allow(ctx, "k")
		require.NoError(t, err)
		assert.False(t, d.Allowed)
		assert.Equal(t, before, sent, "answered from the deny cache")
	})
}

// TestATimedOutCallMayHaveBeenCounted shows what a caller can observe when
// its call has been written to Redis but the answer comes after the caller
// gave up (its deadline passed or, here, its context was cancelled: await
// treats both alike): an error, for a request that Redis counted. Nothing
// can tell the caller otherwise without waiting past its timeout; the
// package docs say so ("Timeouts and errors").
func TestATimedOutCallMayHaveBeenCounted(t *testing.T) {
	addr := redistest.Addr(t)
	ctx := context.Background()
	p := core.TokenBucket(10, time.Minute)
	armed := make(chan struct{}, 1)
	counted := make(chan struct{}) // Redis has answered the held call
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	addHook(rdb, hookFunc(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		if isScriptCall(cmd) && err == nil {
			select {
			case <-armed:
				// Redis has counted it: the reply is held until the
				// caller's context ends, as if it came too late.
				close(counted)
				<-ctx.Done()
				return ctx.Err()
			default:
			}
		}
		return err
	}))
	clock := coretest.NewClock(coretest.Epoch)
	lim := newLimiter(t, rdb, p, withClock(clock.Now), WithTimeout(time.Minute))
	d, err := lim.Peek(ctx, "k") // loads the script: the call below is one EVALSHA
	require.NoError(t, err)
	require.Equal(t, int64(10), d.Remaining)

	armed <- struct{}{}
	callCtx, cancel := context.WithCancel(ctx)
	go func() {
		<-counted
		cancel()
	}()
	_, err = lim.Allow(callCtx, "k")
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, ErrUnavailable, "the caller hung up: not a store failure")

	d, err = lim.Peek(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(9), d.Remaining, "Redis counted the call whose caller got an error")
}

// TestAnEndedContextSendsNothing: a call whose context has already ended
// returns its error without handing anything to the client, so Redis never
// counts a request whose caller was told it failed. Before, such a call
// went to the client (which happened to drop it) on the caller's
// goroutine, and through the batcher it was queued half the time, where
// the batcher could take it before the caller withdrew it.
func TestAnEndedContextSendsNothing(t *testing.T) {
	forClients(t, func(t *testing.T, newClient func(string) *redis.Client) {
		rdb := newClient(redistest.Addr(t))
		rec := &recorder{}
		addHook(rdb, rec)
		p := core.TokenBucket(100, time.Minute)
		clock := coretest.NewClock(coretest.Epoch)
		lim := newLimiter(t, rdb, p, withClock(clock.Now))
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel2()
		for range 20 {
			_, err := lim.Allow(cancelled, "k")
			require.ErrorIs(t, err, context.Canceled)
			_, err = lim.Allow(expired, "k")
			require.ErrorIs(t, err, context.DeadlineExceeded)
			_, err = lim.Peek(cancelled, "k")
			require.ErrorIs(t, err, context.Canceled)
			require.ErrorIs(t, lim.Reset(cancelled, "k"), context.Canceled)
		}
		assert.Zero(t, rec.commands.Load(), "no script call sent")
		d, err := lim.Peek(context.Background(), "k")
		require.NoError(t, err)
		assert.Equal(t, p.Burst, d.Remaining, "nothing counted")
	})
}

// TestACallNotSentInTimeIsATimeout: a call still queued at its deadline
// (never sent) fails as a timeout of Redis's that the breaker does not
// count (issue 8).
func TestACallNotSentInTimeIsATimeout(t *testing.T) {
	l := &Limiter{timeout: time.Millisecond}
	err := l.gaveUp("AllowN", transport.NewCall(), transport.ErrDeadline)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, ErrUnavailable)
	var se *storeError
	require.ErrorAs(t, err, &se)
	assert.Zero(t, se.rt, "not sent: no failure of Redis's")
}
