package sloghook

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Hook logs the events of the middlewares whose [nethttp.WithHook] it is
// given (Handle), as the package documentation says. Build it with [New]:
// the zero Hook is not usable.
type Hook struct {
	log *slog.Logger
	config
	timed bool // now is the real clock: a timer logs each summary when due

	// due is when the earliest pending summary is due (Unix ns), 0 when no
	// event is waiting to be logged: the only thing a call for an outcome
	// that is not logged reads. Written under mu, by setDueLocked.
	due atomic.Int64

	mu      sync.Mutex
	groups  map[group]*state
	timer   *time.Timer // when timed and a summary is pending: fires at timerAt
	timerAt int64
}

// group is what events are counted under. It holds the whole policy rather
// than its name, because deriving a name per event would allocate; two
// policies with one name and different numbers are counted apart, each line
// under that name.
type group struct {
	outcome nethttp.Outcome
	policy  core.Policy
	// source is, for failures only, where the limiter failed ("none" if it
	// was not called): a denial's source says nothing to an operator.
	source string
}

// state is a group's count since its last line.
type state struct {
	since int64  // when the group's last line was logged (Unix ns)
	n     int64  // events since then, not yet logged
	err   error  // the last error among them
	key   string // the last key among them (WithKeys)
}

// line is a line to write once the lock is released.
type line struct {
	ctx     context.Context
	g       group
	n       int64
	period  time.Duration // 0 for a line logged at once
	summary bool
	err     error
	key     string
}

// New returns a Hook that logs to logger. It panics if logger is nil.
func New(logger *slog.Logger, opts ...Option) *Hook {
	if logger == nil {
		panic(errors.New("sloghook: New: nil logger"))
	}
	c := defaults()
	for i, o := range opts {
		if o == nil {
			panic(errors.New("sloghook: New: option " + strconv.Itoa(i+1) + " is nil"))
		}
		o(&c)
	}
	h := &Hook{log: logger, config: c, timed: c.now == nil, groups: make(map[group]*state)}
	if h.timed {
		h.now = time.Now
	}
	return h
}

// Handle counts e and logs what is due; give it to [nethttp.WithHook].
func (h *Hook) Handle(e nethttp.Event) {
	ctx := context.Background()
	if e.Request != nil {
		ctx = e.Request.Context()
	}
	if level := h.levels[e.Outcome]; level == LevelOff || !h.log.Enabled(ctx, level) {
		if due := h.due.Load(); due != 0 {
			if now := h.now().UnixNano(); now >= due {
				h.sweep(now, 0)
			}
		}
		return
	}
	h.write(h.count(ctx, e))
}

// count counts e in its group and returns the lines to log: e's own, if
// its group has been quiet for an interval, and the summaries due.
func (h *Hook) count(ctx context.Context, e nethttp.Event) []line {
	g := group{outcome: e.Outcome, policy: e.Decision.Policy}
	err := e.Err // the failure itself
	switch e.Outcome {
	case nethttp.OutcomeAllowed, nethttp.OutcomeDenied, nethttp.OutcomeDryRun:
		// A denial's error, core.ErrCostExceedsCapacity, is left out: on
		// a summary of thousands of denials it would read as the reason
		// for all.
		err = nil
	case nethttp.OutcomeFailedOpen, nethttp.OutcomeFailedClosed, nethttp.OutcomeSettleFailed:
		// A limiter failure: its lines name the decision's source.
		g.source = "none"
		if e.LimiterCalled {
			g.source = e.Decision.Source.String()
		}
	}
	now := h.now().UnixNano()
	var lines []line
	h.mu.Lock()
	defer h.mu.Unlock()
	switch s := h.groups[g]; {
	case s == nil || s.n == 0 && now-s.since >= h.interval:
		// Quiet: log this one at once.
		if s == nil {
			s = new(state)
			h.groups[g] = s
		}
		s.since = now
		lines = append(lines, line{ctx: ctx, g: g, n: 1, err: err, key: e.Key})
	default:
		s.n++
		if err != nil {
			s.err = err
		}
		s.key = e.Key
		if due := h.due.Load(); s.n == 1 && (due == 0 || s.since+h.interval < due) {
			h.setDueLocked(s.since + h.interval)
		}
	}
	if due := h.due.Load(); due != 0 && now >= due {
		lines = h.sweepLocked(now, lines)
	}
	return lines
}

// Flush logs the pending counts at once, whatever the time: call it at
// shutdown (after the server has stopped) so that no count is lost. A
// group's interval starts again at a Flush. With nothing pending, no timer
// is left to fire.
func (h *Hook) Flush() {
	now := h.now().UnixNano()
	h.mu.Lock()
	var lines []line
	for g, s := range h.groups {
		if s.n > 0 {
			lines = append(lines, h.summary(g, s, now))
		}
	}
	h.setDueLocked(0)
	h.mu.Unlock()
	h.write(lines)
}

// sweepLocked appends to lines the summaries due at now, forgets the groups
// that have been quiet for an interval (their next event is logged at once)
// and sets due to the next summary's time.
func (h *Hook) sweepLocked(now int64, lines []line) []line {
	next := int64(0)
	for g, s := range h.groups {
		if now-s.since >= h.interval {
			if s.n == 0 {
				delete(h.groups, g)
				continue
			}
			lines = append(lines, h.summary(g, s, now))
			continue
		}
		if s.n > 0 && (next == 0 || s.since+h.interval < next) {
			next = s.since + h.interval
		}
	}
	h.setDueLocked(next)
	return lines
}

// setDueLocked records when the earliest pending summary is due (0: none).
// With the real clock it arms a timer for then, so that the summary is
// logged on time whether or not a request comes; with nothing pending, the
// timer stops. A timer is a goroutine only while it runs, which it does at
// most once per summary.
func (h *Hook) setDueLocked(due int64) {
	h.due.Store(due)
	if !h.timed || due != 0 && h.timer != nil && h.timerAt <= due {
		return
	}
	if h.timer != nil {
		h.timer.Stop()
		h.timer, h.timerAt = nil, 0
	}
	if due != 0 {
		h.timer, h.timerAt = time.AfterFunc(time.Duration(due-h.now().UnixNano()), func() { h.sweep(h.now().UnixNano(), due) }), due
	}
}

// sweep logs the summaries due at now, for the timer armed for at, or for
// an event when at is 0.
func (h *Hook) sweep(now, at int64) {
	h.mu.Lock()
	if h.timerAt == at { // not a timer replaced by an earlier one (none for 0)
		h.timer, h.timerAt = nil, 0
	}
	lines := h.sweepLocked(now, nil)
	h.mu.Unlock()
	h.write(lines)
}

// summary returns the summary of g's pending count and resets the count.
func (h *Hook) summary(g group, s *state, now int64) line {
	l := line{
		ctx: context.Background(), g: g, n: s.n, summary: true,
		period: time.Duration(max(now-s.since, 0)), err: s.err, key: s.key, // 0 if the clock stepped back
	}
	s.since, s.n, s.err, s.key = now, 0, nil, ""
	return l
}

// write logs lines, summaries in a stable order (outcome, then policy
// name), each at its outcome's level.
func (h *Hook) write(lines []line) {
	if len(lines) > 1 {
		slices.SortStableFunc(lines, func(a, b line) int {
			return cmp.Or(cmp.Compare(a.g.outcome, b.g.outcome),
				strings.Compare(a.g.policy.Label(), b.g.policy.Label()),
				strings.Compare(a.g.source, b.g.source))
		})
	}
	for _, l := range lines {
		attrs := make([]slog.Attr, 0, 7)
		attrs = append(attrs, slog.String("outcome", l.g.outcome.String()))
		if name := l.g.policy.Label(); name != "" {
			attrs = append(attrs, slog.String("policy", name))
		}
		if l.g.source != "" {
			attrs = append(attrs, slog.String("source", l.g.source))
		}
		attrs = append(attrs, slog.Int64("count", l.n))
		errName, keyName := "error", "key"
		if l.summary {
			attrs = append(attrs, slog.Duration("period", l.period))
			errName, keyName = "last_error", "last_key"
		}
		if l.err != nil {
			attrs = append(attrs, slog.String(errName, l.err.Error()))
		}
		if h.keys && l.key != "" {
			attrs = append(attrs, slog.String(keyName, l.key))
		}
		h.log.LogAttrs(l.ctx, h.levels[l.g.outcome], message(l.g.outcome), attrs...)
	}
}

// messages are the messages of each outcome's lines.
var messages = [...]string{
	nethttp.OutcomeAllowed:      "ratelimit: requests allowed",
	nethttp.OutcomeDenied:       "ratelimit: requests denied",
	nethttp.OutcomeDryRun:       "ratelimit: requests would have been denied (dry run)",
	nethttp.OutcomeFailedOpen:   "ratelimit: limiter failed, requests served without a limit",
	nethttp.OutcomeFailedClosed: "ratelimit: limiter failed, requests refused",
	nethttp.OutcomeKeyError:     "ratelimit: requests without a key",
	nethttp.OutcomeCostError:    "ratelimit: cost function failed",
	nethttp.OutcomeCanceled:     "ratelimit: requests canceled while limited",
	nethttp.OutcomeSettleFailed: "ratelimit: limiter failed to settle final costs, charges kept",
}

// message is the message of o's lines.
func message(o nethttp.Outcome) string {
	if int(o) < len(messages) {
		return messages[o]
	}
	return "ratelimit: " + o.String()
}
