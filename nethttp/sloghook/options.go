package sloghook

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Option configures [New]. An option given a nil function or an invalid
// value panics, naming itself: a mistake in the program, reported where it
// is made.
type Option func(*config)

type config struct {
	interval int64 // ns
	now      func() time.Time
	keys     bool
	levels   [256]slog.Level // by Outcome (a uint8)
}

// DefaultInterval is the interval of [WithInterval] when it is not used.
const DefaultInterval = time.Minute

// LevelOff, given to [WithLevel], turns an outcome's lines off: its events
// are not even counted. It is the default level of nethttp.OutcomeAllowed.
const LevelOff = slog.Level(math.MaxInt32)

func defaults() config {
	c := config{interval: int64(DefaultInterval)} // now: nil for the real clock
	for i := range c.levels {
		// Key and cost errors, and an outcome added to nethttp later.
		c.levels[i] = slog.LevelWarn
	}
	c.levels[nethttp.OutcomeAllowed] = LevelOff
	c.levels[nethttp.OutcomeDenied] = slog.LevelInfo
	c.levels[nethttp.OutcomeDryRun] = slog.LevelInfo
	c.levels[nethttp.OutcomeFailedOpen] = slog.LevelError
	c.levels[nethttp.OutcomeFailedClosed] = slog.LevelError
	c.levels[nethttp.OutcomeCanceled] = slog.LevelDebug
	c.levels[nethttp.OutcomeSettleFailed] = slog.LevelError
	return c
}

// WithInterval sets the interval of the package documentation's groups. It
// panics if d <= 0. The default is [DefaultInterval].
func WithInterval(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Errorf("sloghook: WithInterval(%v): the interval must be > 0", d))
	}
	return func(c *config) { c.interval = int64(d) }
}

// WithClock sets the clock intervals are measured with (time.Now by
// default), for tests. It panics if now is nil. With it, no timer logs a
// summary when it is due: the hook calls and Flush that come after the
// test has moved the clock do. (testing/synctest's fake clock drives the
// timer of a Hook without WithClock.)
func WithClock(now func() time.Time) Option {
	if now == nil {
		panic(errors.New("sloghook: WithClock: nil function"))
	}
	return func(c *config) { c.now = now }
}

// WithKeys adds the key to each line, for debugging: see "Personal data" in
// the package documentation.
func WithKeys() Option {
	return func(c *config) { c.keys = true }
}

// WithLevel sets the level of the lines of outcome o; [LevelOff] turns them
// off. The defaults are in the package documentation. Events whose level
// the logger does not enable are not counted either.
func WithLevel(o nethttp.Outcome, level slog.Level) Option {
	return func(c *config) { c.levels[o] = level }
}
