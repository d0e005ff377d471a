package redisstore

import (
	"fmt"
	"strings"
	"time"
)

// Defaults of the options (each option's doc says its default), and of
// the batcher's flights, measured in benchmarks/README.md.
const (
	defaultPrefix               = "ratelimit"
	defaultTimeout              = 50 * time.Millisecond
	defaultDenyCacheSize        = 65536
	defaultBreakerFailures      = 5
	defaultBreakerProbeInterval = time.Second

	// defaultMaxFlights is how many round trips may be in flight at once:
	// with one, two callers take turns; with more than two, 64 callers'
	// batches get smaller and their decisions slower (BenchmarkRedis,
	// benchmarks/README.md).
	defaultMaxFlights = 2
)

// Option configures New.
type Option func(*config) error

// option returns the Option that applies set, if ok (its value is valid),
// or else fails with the error that format and args describe.
func option(ok bool, set func(*config), format string, args ...any) Option {
	return func(c *config) error {
		if !ok {
			return fmt.Errorf("redisstore: "+format, args...)
		}
		set(c)
		return nil
	}
}

type config struct {
	prefix     string
	timeout    time.Duration
	denySize   int // 0: no deny cache
	maxFlights int
	failures   int
	interval   time.Duration
	hook       func(BreakerChange)
	noFallback bool
	clock      func() time.Time // tests: fixes the scripts' now
	local      func() int64     // the deny cache's and breaker's clock, ns (tests replace it)
	ttlPlus    time.Duration    // tests: added to the keys' expiry
}

// WithPrefix sets the first part of every Redis key the limiter writes.
// Use one prefix per application sharing a Redis. It may not be empty or
// contain '{' or '}'. The default is "ratelimit".
//
// The limiter keeps one Redis key per user key, expiring after the
// policy's Recovery time:
//
//	<prefix>:{<user key>}:<algorithm>:<limit>:<window>[:<burst or buckets>][:meter][:<name>]:v3
//	ratelimit:{203.0.113.7}:tb:100:1m0s:100:per-ip:v3
//
// The braces are the Cluster hash tag; '%', '{' and '}' of the user key are
// escaped inside them, so a user key cannot choose its slot. Limiters with
// different policies on one prefix stay apart; changing a limiter's own
// policy starts from fresh keys, so to change limits and keep what keys
// used, give the policy with each call (Limiter.AllowPolicy).
func WithPrefix(prefix string) Option {
	if prefix == "" {
		return option(false, nil, "WithPrefix needs a non-empty prefix")
	}
	return option(!strings.ContainsAny(prefix, "{}"), func(c *config) { c.prefix = prefix },
		"WithPrefix(%q): a prefix may not contain '{' or '}' (the key's hash tag is the library's)", prefix)
}

// WithTimeout sets how long a call that goes to Redis may take, from when
// it is made, waiting for its turn included. d must be > 0. The default
// is 50ms.
//
// The timeout is the clock: a call returns by then, or by its context's
// deadline if that comes first, plus the time this process takes to run
// the caller again, whatever round trip carries it. The context bounds a
// call too: its deadline always, its cancellation while the call waits for
// its turn or a connection. A call that timed out after it was sent may
// have been counted by Redis (over-counting by at most its cost); one
// whose context had ended before it was sent, or that was still waiting
// for its turn, was not. Calls that arrive while others are in flight are
// decided together in one script call, as separate calls would be; one
// still waiting half its timeout in sends its own.
//
// A call with no answer in time fails (see ErrUnavailable) and is decided
// by the local fallback (see WithoutFallback). So a process too saturated
// to send its calls within d (thousands of requests in flight on a few
// cores) has them decided locally: each client between its quota and its
// quota times the number of app servers plus one. How far the total goes
// above the quota depends on the CPU the process gets: in the load
// scenario on two cores (benchmarks/README.md), within 5% on one Redis and
// 7-12% above on a three-master Cluster. A longer timeout buys exactness
// under overload.
func WithTimeout(d time.Duration) Option {
	return option(d > 0, func(c *config) { c.timeout = d }, "WithTimeout must be > 0, got %v", d)
}

// WithDenyCacheSize bounds the deny cache to about n keys; n = 0 switches
// it off, and every call then asks Redis. n must be >= 0. The default is
// 65536 keys, a few MB; a full cache never blocks or fails a call.
//
// After Redis denies a unit-cost request with RetryAfter t, further
// unit-cost requests for that key under the same policy are denied in this
// process, without a round trip, until t has passed (never beyond the
// moment Redis would admit), with Source core.SourceDenyCache: other
// servers can only consume more, so the denial stands. Not after a denial
// under another policy than the key's state, which the denial leaves.
// Limiter.Reset and Limiter.Set clear it for the key in this process;
// another process may keep denying until its cached RetryAfter.
func WithDenyCacheSize(n int) Option {
	return option(n >= 0, func(c *config) { c.denySize = n },
		"WithDenyCacheSize must be >= 0 (0 switches the deny cache off), got %d", n)
}

// WithoutFallback switches off the local fallback.
//
// By default a call that Redis failed, or that the circuit breaker kept
// from it, is decided without an error by the fallback: an in-memory
// limiter of this process under the call's policy, its Decision's Source
// core.SourceFallback. N app servers then admit up to N times the limit
// while Redis is away (N+1 in a window spanning the outage), never
// unlimited. What the fallback counted is not written back; Reset forgets
// the key there too; Get, Set and Ping are not answered by it.
//
// Without it such a call returns its error (see ErrUnavailable), for the
// adapter's failure policy. A cost above the policy's capacity stays a
// denial, its error wrapping core.ErrCostExceedsCapacity (and
// ErrUnavailable when Redis failed the call).
func WithoutFallback() Option {
	return func(c *config) error { c.noFallback = true; return nil }
}

// WithBreakerFailures sets how many consecutive round trips that Redis
// fails (error replies, refused or broken connections, commands written
// and not answered in time) open the circuit breaker, which is always on;
// a success in between starts the count again. n must be > 0. The default
// is 5.
//
// The calls one round trip carried count once, and what says nothing
// about Redis counts for nothing: a call still waiting for its turn at its
// deadline, a command this process had not written by its deadline (a
// busy process), a caller that stopped waiting before its round trip ended
// (its round trip counts when it ends). Open, the breaker keeps calls from
// Redis (see WithoutFallback) until WithBreakerProbeInterval has passed;
// then one call probes Redis, and its answer closes the breaker or keeps
// it open. A refused connection fails at once, so an outage costs the
// calls that opened the breaker and one call per probe interval.
func WithBreakerFailures(n int) Option {
	return option(n > 0, func(c *config) { c.failures = n }, "WithBreakerFailures must be > 0, got %d", n)
}

// WithBreakerProbeInterval sets how long the open breaker waits before it
// lets one call through to Redis as a probe, and again after each probe
// that fails. d must be > 0. The default is 1s.
func WithBreakerProbeInterval(d time.Duration) Option {
	return option(d > 0, func(c *config) { c.interval = d }, "WithBreakerProbeInterval must be > 0, got %v", d)
}

// WithBreakerHook sets a function called on every change of the circuit
// breaker's state, with the reason. The calls are made one at a time, in
// the order of the changes, each on the goroutine of a call to the Limiter
// (usually the one that caused the change), which waits for it: keep f
// fast. f may call the Limiter.
func WithBreakerHook(f func(BreakerChange)) Option {
	return option(f != nil, func(c *config) { c.hook = f }, "WithBreakerHook needs a non-nil function")
}
