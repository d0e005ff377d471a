package redisstore

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Defaults of the options (each option's doc says its default).
const (
	defaultPrefix        = "ratelimit"
	defaultTimeout       = 50 * time.Millisecond
	defaultDenyCacheSize = 65536
)

// Defaults of the batcher, measured in benchmarks/README.md.
const (
	// defaultMaxBatch bounds the calls one script call decides: about a
	// millisecond of Redis time, for which the server serves nobody else.
	defaultMaxBatch = 512
	// defaultMaxFlights is how many round trips may be in flight at once:
	// with one, two callers take turns; with more than two, 64 callers'
	// batches get smaller and their decisions slower (BenchmarkRedis,
	// benchmarks/README.md).
	defaultMaxFlights = 2
)

// Option configures New.
type Option func(*config) error

type config struct {
	prefix     string
	timeout    time.Duration
	denySize   int // 0: no deny cache
	maxBatch   int
	maxFlights int
	failures   int
	interval   time.Duration
	hook       func(BreakerChange)
	noFallback bool
	clock      func() time.Time // tests: fixes the scripts' now
	localNow   func() time.Time // tests: the deny cache's and breaker's clock alone
}

// WithPrefix sets the first part of every Redis key the limiter writes
// ("<prefix>:{<key>}:<algorithm>"). Use one prefix per application sharing a
// Redis. It may not be empty or contain '{' or '}'. The default is
// "ratelimit".
func WithPrefix(prefix string) Option {
	return func(c *config) error {
		if err := validPrefix(prefix); err != nil {
			return err
		}
		c.prefix = prefix
		return nil
	}
}

// WithTimeout bounds every call that goes to Redis by wall-clock time: a
// call with no answer d after it was made, waiting for its turn included,
// fails (see "Timeouts and errors" in the package docs). d must be > 0. The
// default is 50ms.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("redisstore: WithTimeout must be > 0, got %v", d)
		}
		c.timeout = d
		return nil
	}
}

// WithDenyCacheSize bounds the local deny cache (see "Deny cache" in the
// package docs) to about n keys; n = 0 switches it off, and every call then
// asks Redis. n must be >= 0. The default is 65536 keys, a few MB.
func WithDenyCacheSize(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("redisstore: WithDenyCacheSize must be >= 0 (0 switches the deny cache off), got %d", n)
		}
		c.denySize = n
		return nil
	}
}

// Defaults of the circuit breaker (see "Outages" in the package docs).
const (
	defaultBreakerFailures      = 5
	defaultBreakerProbeInterval = time.Second
)

// WithoutFallback switches off the local fallback: a call that Redis fails,
// or that the circuit breaker keeps from Redis, returns an error wrapping
// ErrUnavailable, for the adapter's failure policy (see "Outages" in the
// package docs); a cost above the policy's capacity stays a denial (its
// error wrapping core.ErrCostExceedsCapacity and ErrUnavailable).
func WithoutFallback() Option {
	return func(c *config) error { c.noFallback = true; return nil }
}

// WithBreakerFailures sets how many consecutive round trips that Redis
// fails (errors, refused connections, timeouts of commands written; a
// success in between starts the count again) open the circuit breaker. n
// must be > 0. The default is 5.
func WithBreakerFailures(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("redisstore: WithBreakerFailures must be > 0, got %d", n)
		}
		c.failures = n
		return nil
	}
}

// WithBreakerProbeInterval sets how long the open breaker waits before it
// lets one call through to Redis as a probe, and again after each probe
// that fails. d must be > 0. The default is 1s.
func WithBreakerProbeInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("redisstore: WithBreakerProbeInterval must be > 0, got %v", d)
		}
		c.interval = d
		return nil
	}
}

// WithBreakerHook sets a function called on every change of the circuit
// breaker's state, with the reason. The calls are made one at a time, in
// the order of the changes, each on the goroutine of a call to the Limiter
// (usually the one that caused the change), which waits for it: keep f
// fast. f may call the Limiter.
func WithBreakerHook(f func(BreakerChange)) Option {
	return func(c *config) error {
		if f == nil {
			return errors.New("redisstore: WithBreakerHook needs a non-nil function")
		}
		c.hook = f
		return nil
	}
}

func validPrefix(prefix string) error {
	switch {
	case prefix == "":
		return fmt.Errorf("redisstore: WithPrefix needs a non-empty prefix")
	case strings.ContainsAny(prefix, "{}"):
		return fmt.Errorf("redisstore: WithPrefix(%q): a prefix may not contain '{' or '}' (the key's hash tag is the library's)", prefix)
	}
	return nil
}
