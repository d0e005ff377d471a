package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/go-ratelimit/ratelimit/core"
)

// TestDemo runs a short demo end to end, over a real loopback server and
// real time, with -serve, and checks what it recorded and printed. Its
// assertions hold however late the requests run, except that the overload
// is denied in part, which is checked only when the traffic went out on
// time.
func TestDemo(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := config{addr: "127.0.0.1:0", limit: 10, window: 200 * time.Millisecond, duration: time.Second, serve: true}
	stdout := &watchedBuffer{want: "Press Ctrl-C", seen: make(chan struct{})}
	stderr := &watchedBuffer{}
	type outcome struct {
		rep report
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		rep, err := run(ctx, cfg, stdout, stderr)
		done <- outcome{rep, err}
	}()
	select {
	case <-stdout.seen:
	case o := <-done:
		t.Fatalf("run returned before serving: %v\n%s", o.err, stdout)
	case <-time.After(20 * time.Second):
		t.Fatalf("no \"Press Ctrl-C\" after 20s:\n%s", stdout)
	}

	t.Run("keeps serving with -serve and prints curl commands that work", func(t *testing.T) {
		m := regexp.MustCompile(`curl -i (http://127\.0\.0\.1:\d+/token)\n`).FindStringSubmatch(stdout.String())
		require.NotNil(t, m, "no curl line for /token in:\n%s", stdout)
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Get(m[1])
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Contains(t, []int{http.StatusOK, http.StatusTooManyRequests}, resp.StatusCode)
		assert.Equal(t, "10", resp.Header.Get("X-RateLimit-Limit"))
		assert.Equal(t, `"tokenbucket-10-per-200ms";q=10;w=1`, resp.Header.Get("RateLimit-Policy"))
		if resp.StatusCode == http.StatusOK {
			assert.Equal(t, "admitted by the token bucket: TokenBucket 10 per 200ms burst 10\n", string(body))
		}
	})

	cancel() // Ctrl-C
	var o outcome
	select {
	case o = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return 10s after its context ended")
	}
	require.NoError(t, o.err)
	rep, out := o.rep, stdout.String()
	require.Len(t, rep.results, 4)

	t.Run("draws a picture per algorithm, then the summary table", func(t *testing.T) {
		titles := []string{"FIXED WINDOW  /fixed", "SLIDING WINDOW  /sliding", "TOKEN BUCKET  /token", "LEAKY BUCKET  /leaky"}
		at := 0
		for _, title := range titles {
			i := strings.Index(out[at:], title)
			require.GreaterOrEqual(t, i, 0, "no section %q after byte %d of:\n%s", title, at, out)
			at += i
		}
		assert.Contains(t, out[at:], "sent  admitted  denied")
		for _, r := range rep.results {
			assert.Regexp(t, regexp.MustCompile(`(?m)^`+r.title+` +\d+ +\d+ +\d+ `), out, "no table row for %s", r.title)
		}
		assert.Contains(t, out, "Stopping.")
	})

	t.Run("counts every request once, as admitted or denied, on both sides", func(t *testing.T) {
		for _, r := range rep.results {
			served := 0
			for _, q := range r.requests {
				if !q.served.IsZero() {
					served++
				}
			}
			assert.Equal(t, int64(len(rep.plan.sends)), r.sent, r.title)
			assert.Equal(t, r.sent, r.admitted+r.denied, "%s: admitted + denied", r.title)
			assert.Zero(t, r.failed, "%s: requests without a 200 or 429", r.title)
			assert.Len(t, r.requests, int(r.sent), "%s: requests the server saw", r.title)
			assert.Equal(t, int(r.admitted), served, "%s: requests the handler served", r.title)
			// Twice the limit is sent; only a machine too busy to send
			// it on time (the demo says so) spreads it thin enough that
			// every request fits.
			if rep.lag < cfg.window/10 {
				assert.Positive(t, r.denied, "%s: the overload was denied in part", r.title)
			} else {
				t.Logf("%s: traffic up to %v late, so the overload is not checked", r.title, rep.lag)
			}
		}
	})

	t.Run("the fixed window admits at most twice its limit in any window-long interval", func(t *testing.T) {
		r := resultFor(t, rep, core.AlgFixedWindow)
		assert.LessOrEqual(t, mostWithin(admittedAt(r), cfg.window), int(2*cfg.limit))
	})

	t.Run("the sliding window admits at most limit*(1+1/buckets) in any window-long interval", func(t *testing.T) {
		r := resultFor(t, rep, core.AlgSlidingWindow)
		bound := r.policy.Limit + r.policy.Limit/r.policy.Buckets
		assert.LessOrEqual(t, mostWithin(admittedAt(r), cfg.window), int(bound))
	})

	t.Run("the leaky bucket holds admitted requests before serving them", func(t *testing.T) {
		r := resultFor(t, rep, core.AlgLeakyBucket)
		_, worst := r.delays()
		assert.Positive(t, worst)
	})

	t.Run("writes no terminal control characters when not on a terminal", func(t *testing.T) {
		assert.NotContains(t, out, "\r")
		assert.NotContains(t, out, "\x1b")
		assert.NotContains(t, stderr.String(), "\r")
		assert.Contains(t, stderr.String(), "demo: phase 1")
	})
}

func TestParseFlags(t *testing.T) {
	t.Run("defaults to 10 per second on a free loopback port", func(t *testing.T) {
		cfg, err := parseFlags(nil, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, config{addr: "127.0.0.1:0", limit: 10, window: time.Second, duration: 6 * time.Second}, cfg)
	})
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"rejects a limit below 1", []string{"-limit", "0"}, "demo: -limit must be at least 1, got 0"},
		{"rejects a window below 100ms", []string{"-window", "50ms"}, "demo: -window must be at least 100ms, got 50ms"},
		{"rejects more than one request per millisecond", []string{"-limit", "600"}, "faster than one per millisecond"},
		{"rejects a duration below 4 windows", []string{"-window", "2s"}, "demo: -duration must be at least 4 windows (8s), got 6s"},
		{"rejects arguments that are not flags", []string{"now"}, `demo: unexpected argument "now"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags(tc.args, io.Discard)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

func TestRender(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	p := newPlan(2, time.Second, 4*time.Second)
	rep := report{start: start, plan: p, results: []result{{
		path: "/fixed", title: "Fixed window", policy: core.FixedWindow(2, time.Second),
		sent: 4, admitted: 3, denied: 1,
		requests: []request{
			{arrived: at(10), served: at(10)},
			{arrived: at(20), served: at(20)},
			{arrived: at(30)},
			{arrived: at(150), served: at(150)},
		},
	}}}
	var out bytes.Buffer
	render(&out, rep)

	t.Run("stacks denied above admitted, one block per request", func(t *testing.T) {
		assert.Contains(t, out.String(), ""+
			"    3 │░\n"+
			"      │█\n"+
			"      │██\n"+
			"    0 └┴─────────┴─────────┴─────────┴─────────┴─\n"+
			"       0s        1s        2s        3s        4s\n"+
			"       ├────────┤ phase 1          ├──┤ phase 2: bursts\n")
	})
	t.Run("summarises each algorithm in the table", func(t *testing.T) {
		assert.Regexp(t, `(?m)^Fixed window +4 +3 +1 +3 +- +-$`, out.String())
	})
	t.Run("says nothing of lag when the traffic was on time", func(t *testing.T) {
		assert.NotContains(t, out.String(), "busy")
	})
	t.Run("warns when requests went out late enough to blur the pictures", func(t *testing.T) {
		late := rep
		late.lag = 320 * time.Millisecond
		var out bytes.Buffer
		render(&out, late)
		assert.Contains(t, out.String(), "Note: this machine was busy. Some requests went out up to 320ms late")
	})
}

func TestMostWithin(t *testing.T) {
	ms := func(v ...int) []time.Time {
		var ts []time.Time
		for _, m := range v {
			ts = append(ts, time.Unix(0, 0).Add(time.Duration(m)*time.Millisecond))
		}
		return ts
	}
	assert.Equal(t, 0, mostWithin(nil, time.Second))
	assert.Equal(t, 2, mostWithin(ms(0, 999, 1000), time.Second), "the interval is half-open")
	assert.Equal(t, 3, mostWithin(ms(0, 1500, 1600, 2499), time.Second))
}

// mostWithin is the most of ts in any half-open interval of length w.
func mostWithin(ts []time.Time, w time.Duration) int {
	ts = slices.Clone(ts)
	slices.SortFunc(ts, time.Time.Compare)
	best, from := 0, 0
	for to := range ts {
		for ts[to].Sub(ts[from]) >= w {
			from++
		}
		best = max(best, to-from+1)
	}
	return best
}

// admittedAt returns when each admitted request was decided (the server's
// arrival time: the limiter decides microseconds later).
func admittedAt(r result) []time.Time {
	var ts []time.Time
	for _, q := range r.requests {
		if !q.served.IsZero() {
			ts = append(ts, q.arrived)
		}
	}
	return ts
}

func resultFor(t *testing.T, rep report, a core.Algorithm) result {
	t.Helper()
	for _, r := range rep.results {
		if r.policy.Algorithm == a {
			return r
		}
	}
	t.Fatalf("no result for %v", a)
	return result{}
}

// watchedBuffer is a bytes.Buffer safe for concurrent use that closes seen
// once the text written contains want.
type watchedBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *watchedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.b.Write(p)
	if w.want != "" && strings.Contains(w.b.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

func (w *watchedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func TestShowProgress(t *testing.T) {
	p := newPlan(10, time.Second, 6*time.Second)
	eps := []*endpoint{{path: "/fixed"}}
	eps[0].counts.sent.Store(3)
	eps[0].counts.admitted.Store(2)
	eps[0].counts.denied.Store(1)
	start := time.Now().Add(time.Hour) // still waiting for the first window

	t.Run("redraws one line in place on a terminal and clears it at the end", func(t *testing.T) {
		var out bytes.Buffer
		stop := showProgress(&out, true, start, p, eps)
		stop()
		line := "▕··········▏  0.0s  aligning to a window      3 sent, 2 ok, 1 denied"
		assert.Equal(t, "\r"+line+"\r"+strings.Repeat(" ", len([]rune(line)))+"\r", out.String())
	})
	t.Run("prints a plain line per phase elsewhere", func(t *testing.T) {
		var out bytes.Buffer
		stop := showProgress(&out, false, start, p, eps)
		stop()
		assert.Equal(t, "demo: aligning to a window\n", out.String())
	})
}
