package nethttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// settleRecorder is a Settler whose Settle records its final costs on
// done, after waiting for release when it is not nil; with fail set, its
// AllowN fails (the store is down) and its Settle reports to done only.
type settleRecorder struct {
	*core.MemoryLimiter
	release chan struct{}
	done    chan int64
	fail    bool
}

func newSettleRecorder(t *testing.T, limit int64) settleRecorder {
	return settleRecorder{MemoryLimiter: newLimiter(t, core.FixedWindow(limit, time.Minute), newClock(t0)), done: make(chan int64, 10)}
}

func (s settleRecorder) AllowN(ctx context.Context, key string, n int64) (core.Decision, error) {
	if s.fail {
		return core.Decision{}, errors.New("store down")
	}
	return s.MemoryLimiter.AllowN(ctx, key, n)
}

func (s settleRecorder) Settle(ctx context.Context, key string, d core.Decision, charged, cost int64) error {
	if s.release != nil {
		select {
		case <-s.release:
		case <-ctx.Done():
			s.done <- cost
			return ctx.Err()
		}
	}
	err := s.MemoryLimiter.Settle(ctx, key, d, charged, cost)
	s.done <- cost
	return err
}

// nextSettle returns the final cost of the next settlement, failing t if
// none comes within 10 seconds (a bound for a broken build, not a timing).
func nextSettle(t *testing.T, done chan int64) int64 {
	t.Helper()
	select {
	case cost := <-done:
		return cost
	case <-time.After(10 * time.Second):
		t.Fatal("no settlement")
		return 0
	}
}

// nextEvent returns the next Event on events, failing t if none comes
// within 10 seconds.
func nextEvent(t *testing.T, events chan nethttp.Event) nethttp.Event {
	t.Helper()
	select {
	case ev := <-events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
		return nethttp.Event{}
	}
}

// noSettle fails t if a settlement was made.
func noSettle(t *testing.T, done chan int64) {
	t.Helper()
	select {
	case cost := <-done:
		t.Errorf("a settlement to %d, want none", cost)
	default:
	}
}

func keep(_ int, _ http.Header, charged int64) int64 { return charged }

// zero gives the whole charge back.
func zero(int, http.Header, int64) int64 { return 0 }

func TestFinalCostPanicsAtConstruction(t *testing.T) {
	lim := struct{ core.Limiter }{newLimiter(t, core.FixedWindow(1, time.Minute), newClock(t0))}
	for _, tc := range []struct {
		name, want string
		build      func()
	}{
		{"a nil function", "nethttp: WithFinalCost: nil function", func() { nethttp.WithFinalCost(nil) }},
		{"a limiter that settles nothing", "nethttp: Middleware: WithFinalCost needs a core.Settler, and struct { core.Limiter } is not one",
			func() { nethttp.Middleware(lim, nethttp.WithFinalCost(keep)) }},
		{"NewEngine, likewise", "nethttp: NewEngine: WithFinalCost needs a core.Settler, and struct { core.Limiter } is not one",
			func() { nethttp.NewEngine(lim, nethttp.WithFinalCost(keep)) }},
	} {
		if got := panicMessage(tc.build); got != tc.want {
			t.Errorf("%s: panic %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestSetFinalCost: the handler's cost wins over the function's, a
// negative one is refused and changes nothing, and a request not behind
// WithFinalCost gets an error.
func TestSetFinalCost(t *testing.T) {
	lim := newSettleRecorder(t, 10)
	var errs []error
	h := nethttp.Middleware(lim, nethttp.WithFinalCost(zero))(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		errs = append(errs, nethttp.SetFinalCost(r, 7), nethttp.SetFinalCost(r, -1))
	}))
	get(h, "")
	if got := nextSettle(t, lim.done); got != 7 {
		t.Errorf("final cost: got %d, want 7 (the handler's, not -1 nor the function's 0)", got)
	}
	if errs[0] != nil || errs[1] == nil || errs[1].Error() != "nethttp: SetFinalCost: a final cost is >= 0, got -1" {
		t.Errorf("errors: got %v, want [nil, a final cost is >= 0]", errs)
	}
	wantHeaders(t, get(wrap(t, lim), ""), xHeaders("10", "2", "60")) // 7 used, and this one
	err := nethttp.SetFinalCost(httptest.NewRequest(http.MethodGet, "/", nil), 1)
	if err == nil || err.Error() != "nethttp: SetFinalCost: the request is not served behind a middleware with WithFinalCost" {
		t.Errorf("outside the middleware: got %v", err)
	}
}

// TestSetFinalCostReachesEveryMiddleware: behind two settling
// middlewares (per client and global), each is refunded.
func TestSetFinalCostReachesEveryMiddleware(t *testing.T) {
	perIP, global := newSettleRecorder(t, 10), newSettleRecorder(t, 100)
	h := nethttp.Middleware(global, nethttp.WithFinalCost(keep))(
		nethttp.Middleware(perIP, nethttp.WithFinalCost(keep))(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			_ = nethttp.SetFinalCost(r, 0)
		})))
	get(h, "")
	if a, b := nextSettle(t, perIP.done), nextSettle(t, global.done); a != 0 || b != 0 {
		t.Errorf("final costs: got %d and %d, want 0 and 0", a, b)
	}
	wantHeaders(t, get(wrap(t, perIP), ""), xHeaders("10", "9", "60"))
	wantHeaders(t, get(wrap(t, global), ""), xHeaders("100", "99", "60"))
}

// TestFinalCostSeesTheStatusSent: the function gets the status the client
// gets, whichever way the handler sent it.
func TestFinalCostSeesTheStatusSent(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		want int
	}{
		{"nothing written", func(http.ResponseWriter, *http.Request) {}, 200},
		{"a body only", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "x") }, 200},
		{"an error", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "x", http.StatusServiceUnavailable) }, 503},
		{"an informational status first", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusCreated)
		}, 201},
		{"a second WriteHeader, ignored", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			w.WriteHeader(http.StatusOK)
		}, 500},
		{"a flush through ResponseController", func(w http.ResponseWriter, _ *http.Request) {
			if err := http.NewResponseController(w).Flush(); err != nil {
				panic(err)
			}
			w.WriteHeader(http.StatusInternalServerError)
		}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			h := nethttp.Middleware(newSettleRecorder(t, 10), nethttp.WithFinalCost(func(status int, _ http.Header, charged int64) int64 {
				got = append(got, status)
				return charged
			}))(tc.h)
			get(h, "")
			if !reflect.DeepEqual(got, []int{tc.want}) {
				t.Errorf("statuses: got %v, want [%d]", got, tc.want)
			}
		})
	}
}

// TestNotSettled: only a request the limiter admitted is settled; what was
// not charged is never refunded.
func TestNotSettled(t *testing.T) {
	panics := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	for _, tc := range []struct {
		name string
		fail bool
		opts []nethttp.Option
		h    http.Handler
		want []nethttp.Outcome
	}{
		{"skipped", false, []nethttp.Option{nethttp.WithSkip(func(*http.Request) bool { return true })}, ok, []nethttp.Outcome{}},
		{"failed open", true, nil, ok, []nethttp.Outcome{nethttp.OutcomeFailedOpen}},
		{"denied under dry run", false, []nethttp.Option{nethttp.WithDryRun(), nethttp.WithCostFunc(func(*http.Request) (int64, error) { return 11, nil })}, ok, []nethttp.Outcome{nethttp.OutcomeDryRun}},
		{"a handler that panics", false, nil, panics, []nethttp.Outcome{nethttp.OutcomeAllowed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := newSettleRecorder(t, 10)
			lim.fail = tc.fail
			var events []nethttp.Event
			h := nethttp.Middleware(lim, append(tc.opts, nethttp.WithFinalCost(zero), recorder(&events))...)(tc.h)
			func() {
				defer func() { _ = recover() }()
				get(h, "")
			}()
			if got := outcomes(events); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("outcomes: got %v, want %v", got, tc.want)
			}
			noSettle(t, lim.done)
		})
	}
}

// TestSettleFailures: a final cost the limiter refuses, or a limiter that
// does not answer within the bound, is one OutcomeSettleFailed Event, and
// the charge stays.
func TestSettleFailures(t *testing.T) {
	t.Run("a negative final cost", func(t *testing.T) {
		lim := newSettleRecorder(t, 10)
		events := make(chan nethttp.Event, 2)
		h := nethttp.Middleware(lim, nethttp.WithFinalCost(func(int, http.Header, int64) int64 { return -2 }),
			nethttp.WithHook(func(ev nethttp.Event) { events <- ev }))(ok)
		get(h, "")
		if got := nextSettle(t, lim.done); got != -2 {
			t.Fatalf("final cost: got %d, want -2", got)
		}
		if ev := nextEvent(t, events); ev.Outcome != nethttp.OutcomeAllowed {
			t.Fatalf("first event: %v, want allowed", ev.Outcome)
		}
		ev := nextEvent(t, events)
		if ev.Outcome != nethttp.OutcomeSettleFailed || !errors.Is(ev.Err, core.ErrInvalidCost) {
			t.Errorf("event: got %v %v, want settle-failed, core.ErrInvalidCost", ev.Outcome, ev.Err)
		}
		wantHeaders(t, get(wrap(t, lim), ""), xHeaders("10", "8", "60"))
	})
	t.Run("a limiter past the bound", func(t *testing.T) {
		nethttp.SetMaxSettleWait(t, 20*time.Millisecond)
		lim := newSettleRecorder(t, 10)
		lim.release = make(chan struct{}) // never closed
		events := make(chan nethttp.Event, 2)
		h := nethttp.Middleware(lim, nethttp.WithFinalCost(zero), nethttp.WithHook(func(ev nethttp.Event) { events <- ev }))(ok)
		get(h, "")
		nextSettle(t, lim.done)
		nextEvent(t, events)
		if ev := nextEvent(t, events); ev.Outcome != nethttp.OutcomeSettleFailed || !errors.Is(ev.Err, context.DeadlineExceeded) {
			t.Errorf("event: got %v %v, want settle-failed, context.DeadlineExceeded", ev.Outcome, ev.Err)
		}
		wantHeaders(t, get(wrap(t, lim), ""), xHeaders("10", "8", "60"))
	})
}

// TestSettlementAfterTheResponse: over a real loopback server, the client
// has the whole response, body included, while Settle is still blocked.
func TestSettlementAfterTheResponse(t *testing.T) {
	nethttp.SetMaxSettleWait(t, time.Hour) // so that only release ends Settle
	lim := newSettleRecorder(t, 10)
	lim.release = make(chan struct{})
	srv := httptest.NewServer(nethttp.Middleware(lim, nethttp.WithFinalCost(zero))(ok))
	defer srv.Close()
	type answer struct {
		code int
		body string
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answered <- answer{resp.StatusCode, string(b), err}
	}()
	select {
	case a := <-answered:
		if a.err != nil || a.code != 200 || a.body != "ok" {
			t.Errorf("answer: got %d %q %v, want 200 \"ok\"", a.code, a.body, a.err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the response waited for the settlement")
	}
	close(lim.release)
	if got := nextSettle(t, lim.done); got != 0 {
		t.Errorf("final cost: got %d, want 0", got)
	}
}

var _ core.Settler = settleRecorder{}

// TestCanceledDuringDelaySettlesAtZero: a request the limiter charged and
// that was let go during its leaky-bucket delay was never served: it is
// settled at 0 whatever the function would say (here: keep every charge),
// and the function is not asked.
func TestCanceledDuringDelaySettlesAtZero(t *testing.T) {
	lim := settleRecorder{MemoryLimiter: newLimiter(t, core.LeakyBucket(1, time.Second).WithBurst(3), newClock(t0)), done: make(chan int64, 10)}
	asked := 0
	var events []nethttp.Event
	h := wrap(t, lim, recorder(&events), nethttp.WithFinalCost(func(_ int, _ http.Header, charged int64) int64 {
		asked++
		return charged
	}))
	get(h, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if w := send(h, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx), ""); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("canceled during its Delay: %d, want 503", w.Code)
	}
	if got := nextSettle(t, lim.done); got != 0 {
		t.Errorf("settled at %d, want 0", got)
	}
	noSettle(t, lim.done)
	if asked != 1 {
		t.Errorf("the function was asked %d times, want 1 (the request served)", asked)
	}
	if got := outcomes(events); !reflect.DeepEqual(got, []nethttp.Outcome{nethttp.OutcomeAllowed, nethttp.OutcomeCanceled}) {
		t.Errorf("outcomes: %v", got)
	}
}
