package adaptertest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Handler is the handler of the route an Adapter mounts, in the router's
// own handler type where it has one (gin.WrapH, echo.WrapHandler). It
// answers "ok", with the status of the request's X-Status field (200
// without one), after calling [nethttp.SetFinalCost] with its
// X-Final-Cost field, if it has one (500 if that fails).
var Handler http.Handler = http.HandlerFunc(serve)

func serve(w http.ResponseWriter, r *http.Request) {
	if v := r.Header.Get("X-Final-Cost"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil {
			err = nethttp.SetFinalCost(r, n)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	if v := r.Header.Get("X-Status"); v != "" {
		code, _ := strconv.Atoi(v)
		w.WriteHeader(code)
	}
	_, _ = w.Write([]byte("ok"))
}

// settling is the limiter of the settlement cases: a memory limiter whose
// Settle waits for release, when it is not nil, and then reports its error
// (err's, if it is not nil, instead of calling the limiter) on done.
type settling struct {
	*core.MemoryLimiter
	release chan struct{}
	err     error
	done    chan error
}

func (s settling) Settle(ctx context.Context, key string, d core.Decision, charged, cost int64) error {
	if s.release != nil {
		<-s.release
	}
	err := s.err
	if err == nil {
		err = s.MemoryLimiter.Settle(ctx, key, d, charged, cost)
	}
	s.done <- err
	return err
}

// wait returns what the next settlement reported on done, failing t if
// none comes within 10 seconds (a timeout for a broken build, not a
// measurement).
func wait(t *testing.T, done chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no settlement")
		return nil
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

// notCharging5xx is the final cost of the settlement cases: the charge,
// or nothing for a 5xx.
func notCharging5xx(status int, _ http.Header, charged int64) int64 {
	if status >= 500 {
		return 0
	}
	return charged
}

// settleStep is one request of a settlement case: its X-Cost (the
// estimate), X-Final-Cost and X-Status, the answer's status and
// rate-limit fields (the admission's, before the settlement), and whether
// a settlement follows it.
type settleStep struct {
	at                  time.Duration
	cost, final, status string
	code                int
	want                map[string]string
	settles             bool
}

// settleCases check each rule of a settlement both ways, on a limit of 10
// per minute that does not charge a 5xx.
var settleCases = []struct {
	name  string
	opts  []nethttp.Option
	steps []settleStep
}{
	{"a refund in its window, then admitted at the bound and denied one past it", nil, []settleStep{
		{cost: "5", final: "2", code: 200, want: x("10", "5", "60"), settles: true},
		{cost: "8", code: 200, want: x("10", "0", "60")},
		{cost: "1", final: "0", code: 429, want: x("10", "0", "60", "Retry-After", "60")},
	}},
	{"a debt past the quota, paid off with its window", nil, []settleStep{
		{cost: "1", final: "15", code: 200, want: x("10", "9", "60"), settles: true},
		{cost: "1", code: 429, want: x("10", "0", "60", "Retry-After", "60")},
		{at: time.Minute, cost: "10", code: 200, want: x("10", "0", "60")},
	}},
	{"a 5xx is not charged", nil, []settleStep{
		{cost: "3", status: "503", code: 503, want: x("10", "7", "60"), settles: true},
		{cost: "10", code: 200, want: x("10", "0", "60")},
	}},
	{"the handler's final cost comes before the function's", nil, []settleStep{
		{cost: "2", final: "4", status: "503", code: 503, want: x("10", "8", "60"), settles: true},
		{cost: "6", code: 200, want: x("10", "0", "60")},
	}},
	{"a denial is never settled", nil, []settleStep{
		{cost: "10", code: 200, want: x("10", "0", "60")},
		{cost: "1", final: "0", code: 429, want: x("10", "0", "60", "Retry-After", "60")},
		{cost: "1", code: 429, want: x("10", "0", "60", "Retry-After", "60")},
	}},
	{"dry run settles what it admitted, as enforcing would", []nethttp.Option{nethttp.WithDryRun()}, []settleStep{
		{cost: "10", final: "0", code: 200, want: x("10", "0", "60"), settles: true},
		{cost: "10", code: 200, want: x("10", "0", "60")},
		{cost: "1", final: "0", code: 500, want: x("10", "0", "60")}, // SetFinalCost failed: not settled
		{cost: "2", code: 200, want: x("10", "0", "60")},
	}},
}

// settle runs settleCases through the adapter.
func (s suite) settle(t *testing.T) {
	for _, c := range settleCases {
		t.Run(c.name, func(t *testing.T) {
			mem, clk := s.limiter(t, core.FixedWindow(10, time.Minute))
			lim := settling{MemoryLimiter: mem, done: make(chan error, 10)}
			h := s.Mount(t, lim, append(c.opts, nethttp.WithCostFunc(costHeader), nethttp.WithFinalCost(notCharging5xx))...)
			for i, st := range c.steps {
				clk.Set(t0.Add(st.at))
				w := get(h, "/items/1", "X-Cost", st.cost, "X-Final-Cost", st.final, "X-Status", st.status)
				if w.Code != st.code {
					t.Fatalf("request %d: status %d, want %d", i+1, w.Code, st.code)
				}
				if got := rateHeaders(w); !reflect.DeepEqual(got, st.want) {
					t.Errorf("request %d: got %v, want %v", i+1, got, st.want)
				}
				if st.settles {
					if err := wait(t, lim.done); err != nil {
						t.Fatalf("request %d: settle: %v", i+1, err)
					}
				}
			}
			select {
			case err := <-lim.done:
				t.Errorf("a settlement not expected, which returned %v", err)
			default:
			}
		})
	}
}

func costHeader(r *http.Request) (int64, error) {
	return strconv.ParseInt(r.Header.Get("X-Cost"), 10, 64)
}

// slowSettle: the answer is complete while Settle is still waiting, and
// the settlement counts once it is done.
func (s suite) slowSettle(t *testing.T) {
	mem, _ := s.limiter(t, core.FixedWindow(10, time.Minute))
	lim := settling{MemoryLimiter: mem, release: make(chan struct{}), done: make(chan error, 1)}
	h := s.Mount(t, lim, nethttp.WithFinalCost(notCharging5xx))
	answered := make(chan *httptest.ResponseRecorder)
	go func() { answered <- get(h, "/items/1", "X-Final-Cost", "4") }()
	select {
	case w := <-answered:
		wantStatus(t, w, http.StatusOK)
		wantHeaders(t, w, x("10", "9", "60"))
	case <-time.After(30 * time.Second):
		close(lim.release)
		t.Fatal("the answer waited for Settle")
	}
	close(lim.release)
	if err := wait(t, lim.done); err != nil {
		t.Fatalf("settle: %v", err)
	}
	wantHeaders(t, get(h, "/items/1"), x("10", "5", "60"))
}

// settleFailed: a settlement the limiter refuses is a second Event, after
// the request's, with the admission's decision, key and charge.
func (s suite) settleFailed(t *testing.T) {
	mem, _ := s.limiter(t, core.FixedWindow(10, time.Minute).WithName("per-ip"))
	refused := errors.New("store: settle refused")
	lim := settling{MemoryLimiter: mem, err: refused, done: make(chan error, 1)}
	events := make(chan nethttp.Event, 2)
	h := s.Mount(t, lim, nethttp.WithFinalCost(notCharging5xx), nethttp.WithCostFunc(costHeader),
		nethttp.WithHook(func(ev nethttp.Event) { events <- ev }))
	w := get(h, "/items/1", "X-Cost", "3", "X-Status", "500")
	wantStatus(t, w, http.StatusInternalServerError)
	if err := wait(t, lim.done); !errors.Is(err, refused) {
		t.Fatalf("settle: got %v, want %v", err, refused)
	}
	admitted, failed := nextEvent(t, events), nextEvent(t, events)
	if admitted.Outcome != nethttp.OutcomeAllowed || failed.Outcome != nethttp.OutcomeSettleFailed {
		t.Fatalf("outcomes: got %v then %v, want allowed then settle-failed", admitted.Outcome, failed.Outcome)
	}
	if !errors.Is(failed.Err, refused) || failed.Err.Error() != "settle: final cost 0, charged 3: "+refused.Error() {
		t.Errorf("Err: got %v, want %v, prefixed", failed.Err, refused)
	}
	if failed.Key != "192.0.2.1" || failed.Cost != 3 || failed.Decision != admitted.Decision || !failed.LimiterCalled {
		t.Errorf("event: got %+v, want the admission's key, cost and decision, with the limiter called", failed)
	}
	wantHeaders(t, get(h, "/items/1", "X-Cost", "1"), x("10", "6", "60"))
}
