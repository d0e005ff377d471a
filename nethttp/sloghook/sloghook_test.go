package sloghook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/nethttp/sloghook"
)

var (
	t0    = time.Unix(1_700_000_000, 0)
	perIP = core.TokenBucket(100, time.Minute).WithName("per-ip")
	login = core.FixedWindow(5, time.Minute).WithName("login")
)

// clock is a settable clock, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: t0} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// set moves the clock to t0+d.
func (c *clock) set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t0.Add(d)
}

// output is what a JSON handler wrote, without the time attribute.
type output struct {
	mu  sync.Mutex // JSONHandler serialises its writes; reads need it too
	buf bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

// take returns the lines written since the last take.
func (o *output) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := strings.TrimSuffix(o.buf.String(), "\n")
	o.buf.Reset()
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func logger(w *output, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// setup returns a hook logging at Debug and above to out, with the clock c.
func setup(opts ...sloghook.Option) (h *sloghook.Hook, c *clock, out *output) {
	c, out = newClock(), new(output)
	h = sloghook.New(logger(out, slog.LevelDebug), append([]sloghook.Option{sloghook.WithClock(c.now)}, opts...)...)
	return h, c, out
}

// event is an Event of outcome o under policy p, from the client 192.0.2.1.
func event(o nethttp.Outcome, p core.Policy) nethttp.Event {
	return nethttp.Event{
		Request: httptest.NewRequest(http.MethodGet, "/", nil),
		Key:     "192.0.2.1",
		Cost:    1,
		Outcome: o,
		Decision: core.Decision{
			Limit: p.Limit, Policy: p,
		},
	}
}

// failed is an Event of a limiter that failed: a store error or timeout,
// from source src.
func failed(o nethttp.Outcome, p core.Policy, src core.Source, err error) nethttp.Event {
	e := event(o, p)
	e.Decision.Source, e.Err, e.LimiterCalled = src, err, true
	return e
}

func TestDenials(t *testing.T) {
	h, c, out := setup()
	denied := event(nethttp.OutcomeDenied, perIP)

	t.Run("logs the first denial at once", func(t *testing.T) {
		h.Handle(denied)
		if got, want := out.take(), ([]string{
			`{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"per-ip","count":1}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
	})
	t.Run("counts the next ones without logging them", func(t *testing.T) {
		for i := range 4 {
			c.set(time.Duration(i+1) * time.Second)
			h.Handle(denied)
		}
		c.set(59*time.Second + 999*time.Millisecond)
		h.Handle(denied)
		if got := out.take(); len(got) != 0 {
			t.Errorf("log lines: got %v, want empty", got)
		}
	})
	t.Run("logs their count with the denial that ends the interval", func(t *testing.T) {
		c.set(time.Minute)
		h.Handle(denied)
		if got, want := out.take(), ([]string{
			`{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"per-ip","count":6,"period":60000000000}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
	})
	t.Run("logs a pending count from any later hook call, even an allowed request's", func(t *testing.T) {
		c.set(90 * time.Second)
		h.Handle(denied)
		if got := out.take(); len(got) != 0 {
			t.Errorf("log lines: got %v, want empty", got)
		}
		c.set(150 * time.Second)
		h.Handle(event(nethttp.OutcomeAllowed, login))
		if got, want := out.take(), ([]string{
			`{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"per-ip","count":1,"period":90000000000}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
	})
	t.Run("logs the first denial after a quiet interval at once again", func(t *testing.T) {
		c.set(150*time.Second + time.Minute - time.Nanosecond)
		h.Handle(denied)
		if got := out.take(); len(got) != 0 {
			t.Errorf("an interval since the last line has not passed yet: got %v, want empty", got)
		}
		c.set(4 * time.Minute)
		h.Handle(event(nethttp.OutcomeAllowed, login)) // the summary
		out.take()
		c.set(5*time.Minute - time.Nanosecond)
		h.Handle(denied)
		if got := out.take(); len(got) != 0 {
			t.Errorf("quiet for less than an interval: got %v, want empty", got)
		}
		c.set(7 * time.Minute)
		h.Handle(event(nethttp.OutcomeAllowed, login)) // the summary
		out.take()
		c.set(8 * time.Minute)
		h.Handle(denied)
		if got, want := out.take(), ([]string{
			`{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"per-ip","count":1}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
	})
	t.Run("Flush logs the pending count at once, then nothing", func(t *testing.T) {
		c.set(8*time.Minute + 5*time.Second)
		h.Handle(denied)
		h.Handle(denied)
		h.Flush()
		if got, want := out.take(), ([]string{
			`{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"per-ip","count":2,"period":5000000000}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
		h.Flush()
		if got := out.take(); len(got) != 0 {
			t.Errorf("log lines: got %v, want empty", got)
		}
	})
}

func TestGroups(t *testing.T) {
	t.Run("counts each policy and outcome apart, summaries in a stable order", func(t *testing.T) {
		h, c, out := setup()
		for _, e := range []nethttp.Event{
			event(nethttp.OutcomeDenied, perIP), event(nethttp.OutcomeDenied, login),
			event(nethttp.OutcomeDryRun, login),
		} {
			for range 3 {
				h.Handle(e)
			}
		}
		if got, want := out.take(), ([]string{
			`{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"per-ip","count":1}`,
			`{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"login","count":1}`,
			`{"level":"INFO","msg":"ratelimit: requests would have been denied (dry run)","outcome":"dry-run","policy":"login","count":1}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
		c.set(time.Minute)
		h.Handle(event(nethttp.OutcomeDenied, perIP))
		if got, want := out.take(), ([]string{
			`{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"login","count":2,"period":60000000000}`,
			`{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"per-ip","count":3,"period":60000000000}`,
			`{"level":"INFO","msg":"ratelimit: requests would have been denied (dry run)","outcome":"dry-run","policy":"login","count":2,"period":60000000000}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
	})
	t.Run("names policies as the RateLimit-Policy header does", func(t *testing.T) {
		for _, p := range []core.Policy{
			core.TokenBucket(100, time.Minute),
			core.FixedWindow(10, 1500*time.Millisecond),
			core.SlidingWindow(7, time.Hour).WithBuckets(4),
			core.LeakyBucket(3, time.Second).WithName("backend"),
		} {
			lim := core.MustNew(p)
			h := nethttp.Middleware(lim, nethttp.WithHeaderStyle(nethttp.HeadersIETF))(http.NotFoundHandler())
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			h.ServeHTTP(w, r)
			lim.Close()
			header := w.Header().Get(nethttp.HeaderRateLimitPolicy)
			name, _, _ := strings.Cut(header, ";")

			hook, _, out := setup()
			hook.Handle(event(nethttp.OutcomeDenied, p))
			lines := out.take()
			if got := len(lines); got != 1 {
				t.Fatalf("len(lines): got %d, want %d", got, 1)
			}
			var got struct{ Policy string }
			if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got := `"` + got.Policy + `"`; got != name {
				t.Errorf("%v: got %q, want %q", p.String(), got, name)
			}
		}
	})
	t.Run("leaves the policy out when none is known, and names no source", func(t *testing.T) {
		h, _, out := setup()
		e := failed(nethttp.OutcomeFailedOpen, core.Policy{}, core.SourceStore, errors.New("policy func: plan lookup timed out"))
		e.LimiterCalled = false // the lookup failed before the call
		h.Handle(e)
		if got, want := out.take(), ([]string{
			`{"level":"ERROR","msg":"ratelimit: limiter failed, requests served without a limit","outcome":"failed-open","source":"none","count":1,"error":"policy func: plan lookup timed out"}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
	})
}

func TestFailures(t *testing.T) {
	h, c, out := setup()
	refused, timeout := errors.New("dial tcp 10.0.0.7:6379: connect: connection refused"), errors.New("i/o timeout")

	t.Run("logs the first store failure at once at Error, with its error and source", func(t *testing.T) {
		h.Handle(failed(nethttp.OutcomeFailedOpen, perIP, core.SourceStore, refused))
		h.Handle(failed(nethttp.OutcomeFailedOpen, perIP, core.SourceStore, timeout))
		h.Handle(failed(nethttp.OutcomeFailedOpen, perIP, core.SourceStore, refused))
		h.Handle(failed(nethttp.OutcomeFailedClosed, login, core.SourceFallback, timeout))
		if got, want := out.take(), ([]string{
			`{"level":"ERROR","msg":"ratelimit: limiter failed, requests served without a limit","outcome":"failed-open","policy":"per-ip","source":"store","count":1,"error":"dial tcp 10.0.0.7:6379: connect: connection refused"}`,
			`{"level":"ERROR","msg":"ratelimit: limiter failed, requests refused","outcome":"failed-closed","policy":"login","source":"fallback","count":1,"error":"i/o timeout"}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
	})
	t.Run("then their count per interval, with the last error", func(t *testing.T) {
		c.set(10 * time.Second)
		h.Handle(failed(nethttp.OutcomeFailedOpen, perIP, core.SourceStore, timeout))
		c.set(time.Minute)
		h.Flush()
		if got, want := out.take(), ([]string{
			`{"level":"ERROR","msg":"ratelimit: limiter failed, requests served without a limit","outcome":"failed-open","policy":"per-ip","source":"store","count":3,"period":60000000000,"last_error":"i/o timeout"}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
	})
	t.Run("counts each source apart", func(t *testing.T) {
		h, _, out := setup()
		h.Handle(failed(nethttp.OutcomeFailedOpen, perIP, core.SourceStore, refused))
		h.Handle(failed(nethttp.OutcomeFailedOpen, perIP, core.SourceFallback, timeout))
		if got := len(out.take()); got != 2 {
			t.Errorf("len(out.take()): got %d, want %d", got, 2)
		}
	})
	t.Run("logs key and cost errors at Warn, aggregated likewise", func(t *testing.T) {
		h, c, out := setup()
		for range 3 {
			// Under WithPolicyFunc nethttp gives them a zero Decision: no
			// policy is known before the lookup, which needs the key.
			h.Handle(failed(nethttp.OutcomeKeyError, core.Policy{}, core.SourceStore, errors.New("keyfunc: no key in request: header X-API-Key is missing or empty")))
			h.Handle(failed(nethttp.OutcomeCostError, core.Policy{}, core.SourceStore, errors.New("cost function: batch too large")))
		}
		c.set(time.Minute)
		h.Flush()
		if got, want := out.take(), ([]string{
			`{"level":"WARN","msg":"ratelimit: requests without a key","outcome":"key-error","count":1,"error":"keyfunc: no key in request: header X-API-Key is missing or empty"}`,
			`{"level":"WARN","msg":"ratelimit: cost function failed","outcome":"cost-error","count":1,"error":"cost function: batch too large"}`,
			`{"level":"WARN","msg":"ratelimit: requests without a key","outcome":"key-error","count":2,"period":60000000000,"last_error":"keyfunc: no key in request: header X-API-Key is missing or empty"}`,
			`{"level":"WARN","msg":"ratelimit: cost function failed","outcome":"cost-error","count":2,"period":60000000000,"last_error":"cost function: batch too large"}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
	})
	t.Run("logs a settlement the store refused at Error, with its error and source", func(t *testing.T) {
		h, _, out := setup()
		h.Handle(failed(nethttp.OutcomeSettleFailed, perIP, core.SourceStore, errors.New("settle: final cost 0, charged 3: i/o timeout")))
		if got, want := out.take(), ([]string{
			`{"level":"ERROR","msg":"ratelimit: limiter failed to settle final costs, charges kept","outcome":"settle-failed","policy":"per-ip","source":"store","count":1,"error":"settle: final cost 0, charged 3: i/o timeout"}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
	})
	t.Run("logs a canceled request at Debug only, as no failure", func(t *testing.T) {
		out := new(output)
		h := sloghook.New(logger(out, slog.LevelInfo))
		h.Handle(failed(nethttp.OutcomeCanceled, perIP, core.SourceStore, context.Canceled))
		h.Flush()
		if got := out.take(); len(got) != 0 {
			t.Errorf("not even counted below the logger's level: got %v, want empty", got)
		}

		h, _, out = setup()
		h.Handle(failed(nethttp.OutcomeCanceled, perIP, core.SourceStore, context.Canceled))
		if got, want := out.take(), ([]string{
			`{"level":"DEBUG","msg":"ratelimit: requests canceled while limited","outcome":"canceled","policy":"per-ip","count":1,"error":"context canceled"}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
	})
	t.Run("leaves a denial's error out", func(t *testing.T) {
		h, _, out := setup()
		e := event(nethttp.OutcomeDenied, perIP)
		e.Err = core.ErrCostExceedsCapacity
		h.Handle(e)
		if got, want := out.take(), ([]string{
			`{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"per-ip","count":1}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
	})
}

func TestLevels(t *testing.T) {
	t.Run("logs nothing for allowed requests by default", func(t *testing.T) {
		h, c, out := setup()
		for range 3 {
			h.Handle(event(nethttp.OutcomeAllowed, perIP))
		}
		c.set(time.Hour)
		h.Handle(event(nethttp.OutcomeAllowed, perIP))
		h.Flush()
		if got := out.take(); len(got) != 0 {
			t.Errorf("log lines: got %v, want empty", got)
		}
	})
	t.Run("WithLevel logs allowed requests at Debug, aggregated", func(t *testing.T) {
		h, _, out := setup(sloghook.WithLevel(nethttp.OutcomeAllowed, slog.LevelDebug))
		for range 3 {
			h.Handle(event(nethttp.OutcomeAllowed, perIP))
		}
		h.Flush()
		if got, want := out.take(), ([]string{
			`{"level":"DEBUG","msg":"ratelimit: requests allowed","outcome":"allowed","policy":"per-ip","count":1}`,
			`{"level":"DEBUG","msg":"ratelimit: requests allowed","outcome":"allowed","policy":"per-ip","count":2,"period":0}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
	})
	t.Run("WithLevel changes an outcome's level, LevelOff turns it off", func(t *testing.T) {
		h, _, out := setup(sloghook.WithLevel(nethttp.OutcomeDenied, slog.LevelWarn),
			sloghook.WithLevel(nethttp.OutcomeDryRun, sloghook.LevelOff))
		h.Handle(event(nethttp.OutcomeDenied, perIP))
		h.Handle(event(nethttp.OutcomeDryRun, perIP))
		h.Flush()
		if got, want := out.take(), ([]string{
			`{"level":"WARN","msg":"ratelimit: requests denied","outcome":"denied","policy":"per-ip","count":1}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
	})
	t.Run("WithInterval sets the interval", func(t *testing.T) {
		h, c, out := setup(sloghook.WithInterval(10 * time.Second))
		h.Handle(event(nethttp.OutcomeDenied, perIP))
		h.Handle(event(nethttp.OutcomeDenied, perIP))
		c.set(10 * time.Second)
		h.Handle(event(nethttp.OutcomeAllowed, perIP))
		if got, want := out.take(), ([]string{
			`{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"per-ip","count":1}`,
			`{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"per-ip","count":1,"period":10000000000}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
	})
}

func TestKeys(t *testing.T) {
	events := func(h *sloghook.Hook, c *clock) {
		c.set(0)
		h.Handle(event(nethttp.OutcomeDenied, perIP))
		e := failed(nethttp.OutcomeFailedOpen, perIP, core.SourceStore, errors.New("down"))
		h.Handle(e)
		e.Key = "198.51.100.9"
		h.Handle(e)
		e = event(nethttp.OutcomeDenied, perIP)
		e.Key = "203.0.113.5"
		h.Handle(e)
		c.set(time.Minute)
		h.Flush()
	}
	t.Run("never logs a key by default", func(t *testing.T) {
		h, c, out := setup()
		events(h, c)
		lines := out.take()
		if got := len(lines); got != 4 {
			t.Errorf("len(lines): got %d, want %d", got, 4)
		}
		for _, l := range lines {
			if strings.Contains(l, "192.0.2.1") {
				t.Errorf("line %q contains %q", l, "192.0.2.1")
			}
			if strings.Contains(l, "198.51.100.9") {
				t.Errorf("line %q contains %q", l, "198.51.100.9")
			}
			if strings.Contains(l, "203.0.113.5") {
				t.Errorf("line %q contains %q", l, "203.0.113.5")
			}
			if strings.Contains(l, "key") {
				t.Errorf("line %q contains %q", l, "key")
			}
		}
	})
	t.Run("WithKeys logs the key, and the last one on a summary", func(t *testing.T) {
		h, c, out := setup(sloghook.WithKeys())
		events(h, c)
		if got, want := out.take(), ([]string{
			`{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"per-ip","count":1,"key":"192.0.2.1"}`,
			`{"level":"ERROR","msg":"ratelimit: limiter failed, requests served without a limit","outcome":"failed-open","policy":"per-ip","source":"store","count":1,"error":"down","key":"192.0.2.1"}`,
			`{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"per-ip","count":1,"period":60000000000,"last_key":"203.0.113.5"}`,
			`{"level":"ERROR","msg":"ratelimit: limiter failed, requests served without a limit","outcome":"failed-open","policy":"per-ip","source":"store","count":1,"period":60000000000,"last_error":"down","last_key":"198.51.100.9"}`,
		}); !reflect.DeepEqual(got, want) {
			t.Errorf("log lines: got %v, want %v", got, want)
		}
	})
}

func TestOptionErrors(t *testing.T) {
	lg := logger(new(output), slog.LevelInfo)
	for _, tc := range []struct {
		build func()
		want  string
	}{
		{func() { sloghook.New(nil) }, "sloghook: New: nil logger"},
		{func() { sloghook.New(lg, sloghook.WithKeys(), nil) }, "sloghook: New: option 2 is nil"},
		{func() { sloghook.WithInterval(0) }, "sloghook: WithInterval(0s): the interval must be > 0"},
		{func() { sloghook.WithInterval(-time.Second) }, "sloghook: WithInterval(-1s): the interval must be > 0"},
		{func() { sloghook.WithClock(nil) }, "sloghook: WithClock: nil function"},
	} {
		if got := panicMessage(tc.build); got != tc.want {
			t.Errorf("panic: got %q, want %q", got, tc.want)
		}
	}
}

// panicMessage returns the message of the error f panics with, or "" if f
// returns.
func panicMessage(f func()) (msg string) {
	defer func() {
		if err, ok := recover().(error); ok {
			msg = err.Error()
		}
	}()
	f()
	return ""
}

// Many goroutines log through one hook while the clock runs: every event is
// counted exactly once, and a group never logs twice within an interval.
func TestConcurrentCountsAreExact(t *testing.T) {
	const (
		goroutines = 32
		perG       = 2000
		interval   = 10 * time.Millisecond
	)
	var ticks atomic.Int64 // every clock read moves the clock 10 µs on
	now := func() time.Time { return t0.Add(time.Duration(ticks.Add(1)) * 10 * time.Microsecond) }
	out := new(output)
	h := sloghook.New(logger(out, slog.LevelDebug), sloghook.WithClock(now), sloghook.WithInterval(interval))
	events := []nethttp.Event{
		event(nethttp.OutcomeDenied, perIP),
		event(nethttp.OutcomeDenied, login),
		failed(nethttp.OutcomeFailedOpen, perIP, core.SourceStore, errors.New("down")),
		event(nethttp.OutcomeAllowed, perIP),
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				h.Handle(events[(g+i)%len(events)])
			}
		})
	}
	wg.Wait()
	h.Flush()

	type entry struct {
		Outcome, Policy string
		Count           int64
		Period          *time.Duration
	}
	counts := map[string]int64{}
	lines := map[string]int{}
	all := out.take()
	for i, l := range all {
		var e entry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%v: %v", l, err)
		}
		g := e.Outcome + "/" + e.Policy
		counts[g] += e.Count
		lines[g]++
		// The last lines may come from Flush, whose period can be short.
		if e.Period != nil && *e.Period < interval {
			if i < len(all)-3 {
				t.Errorf("a short period before the last lines: line %d of %d: %s", i, len(all), l)
			}
		}
	}
	total := int64(goroutines * perG / len(events))
	if got, want := counts, (map[string]int64{
		"denied/per-ip": total, "denied/login": total, "failed-open/per-ip": total,
	}); !reflect.DeepEqual(got, want) {
		t.Errorf("counts: got %v, want %v", got, want)
	}
	elapsed := time.Duration(ticks.Load()) * 10 * time.Microsecond
	for g, n := range lines {
		if most := int(elapsed/interval) + 2; n > most {
			t.Errorf("%s: %d lines, want at most %d", g, n, most)
		}
		if n <= 2 {
			t.Errorf("%s: %d lines, want summaries along the way (more than 2)", g, n)
		}
	}
}

// The counting path allocates nothing.
func TestCountingDoesNotAllocate(t *testing.T) {
	h, _, out := setup()
	denied, allowed := event(nethttp.OutcomeDenied, core.TokenBucket(1, time.Second)), event(nethttp.OutcomeAllowed, perIP)
	h.Handle(denied)
	out.take()
	if got := testing.AllocsPerRun(100, func() { h.Handle(denied) }); got != 0 {
		t.Errorf("allocations handling an event denied: got %v, want 0", got)
	}
	if got := testing.AllocsPerRun(100, func() { h.Handle(allowed) }); got != 0 {
		t.Errorf("allocations handling an event allowed: got %v, want 0", got)
	}
}

// errLimiter is a store that is down.
type errLimiter struct{ core.Limiter }

func (l errLimiter) AllowN(context.Context, string, int64) (core.Decision, error) {
	return core.Decision{}, errors.New("redis: connection refused")
}

// Through the middleware: hooks get the events of real requests.
func TestThroughMiddleware(t *testing.T) {
	h, c, out := setup()
	lim := core.MustNew(core.FixedWindow(2, time.Minute).WithName("per-ip"), core.WithClock(c.now))
	defer lim.Close()
	handler := nethttp.Middleware(lim, nethttp.WithHook(h.Handle))(http.NotFoundHandler())
	down := nethttp.Middleware(errLimiter{lim}, nethttp.WithHook(h.Handle))(http.NotFoundHandler())
	send := func(h http.Handler, addr string) int {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = addr
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	var codes []int
	for range 5 {
		codes = append(codes, send(handler, "192.0.2.1:1234"))
	}
	codes = append(codes, send(down, "192.0.2.1:1234"), send(down, "192.0.2.2:1234"))
	if got, want := codes, ([]int{404, 404, 429, 429, 429, 404, 404}); !reflect.DeepEqual(got, want) {
		t.Errorf("codes: got %v, want %v", got, want)
	}
	c.set(30 * time.Second)
	h.Flush()
	if got, want := out.take(), ([]string{
		`{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"per-ip","count":1}`,
		`{"level":"ERROR","msg":"ratelimit: limiter failed, requests served without a limit","outcome":"failed-open","policy":"per-ip","source":"store","count":1,"error":"redis: connection refused"}`,
		`{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"per-ip","count":2,"period":30000000000}`,
		`{"level":"ERROR","msg":"ratelimit: limiter failed, requests served without a limit","outcome":"failed-open","policy":"per-ip","source":"store","count":1,"period":30000000000,"last_error":"redis: connection refused"}`,
	}); !reflect.DeepEqual(got, want) {
		t.Errorf("log lines: got %v, want %v", got, want)
	}
}

func BenchmarkHandle(b *testing.B) {
	for _, o := range []nethttp.Outcome{nethttp.OutcomeAllowed, nethttp.OutcomeDenied} {
		e := event(o, perIP)
		b.Run("outcome="+o.String(), func(b *testing.B) {
			h := sloghook.New(logger(new(output), slog.LevelInfo))
			b.ReportAllocs()
			for b.Loop() {
				h.Handle(e)
			}
		})
		b.Run("outcome="+o.String()+"/parallel", func(b *testing.B) {
			h := sloghook.New(logger(new(output), slog.LevelInfo))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					h.Handle(e)
				}
			})
		})
	}
}
