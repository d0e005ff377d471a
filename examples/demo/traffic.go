package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// plan is the traffic every endpoint receives, as offsets from the start of
// the run, which is a window boundary (windows are aligned to the Unix epoch,
// so the demo can aim at them).
type plan struct {
	window   time.Duration
	limit    int64
	steady   time.Duration   // phase 1: 2*limit per window, for whole windows
	boundary time.Duration   // phase 2: the window boundary the bursts straddle
	span     time.Duration   // each burst is limit requests spread over span
	sends    []time.Duration // every request, in order
}

// quietWindows is the pause between the phases, in windows, minus the first
// burst: enough for every algorithm to recover its full quota and for the
// leaky bucket to drain, so that phase 2 starts from fresh limiters.
const quietWindows = 2

func newPlan(limit int64, window, duration time.Duration) plan {
	p := plan{
		window: window,
		limit:  limit,
		// Phase 2 takes about three windows (the pause, the bursts and the
		// leaky bucket draining); phase 1 gets the rest.
		steady: (duration/window - 3) * window,
		span:   window / 5,
	}
	p.boundary = p.steady + quietWindows*window
	// Each request sits in the middle of its share of time, so that none
	// lands exactly on a window or slice boundary.
	spread := func(from, length time.Duration, n int64) {
		gap := length / time.Duration(n)
		for i := range n {
			p.sends = append(p.sends, from+time.Duration(i)*gap+gap/2)
		}
	}
	spread(0, p.steady, 2*limit*int64(p.steady/window))
	spread(p.boundary-p.span, p.span, limit)
	spread(p.boundary, p.span, limit)
	return p
}

// rate is phase 1's request rate, for people: "20 requests/s".
func (p plan) rate() string {
	per := p.window
	if per == time.Second {
		return fmt.Sprintf("%d requests/s", 2*p.limit)
	}
	return fmt.Sprintf("%d requests per %v", 2*p.limit, per)
}

// end is the time after which no request is left in flight, at the latest:
// the second burst plus the leaky bucket draining.
func (p plan) end() time.Duration { return p.boundary + p.span + p.window }

// counts is what the client saw of one endpoint. Atomic, because the requests
// run concurrently and the progress line reads the counts while they do.
type counts struct {
	sent, admitted, denied, failed atomic.Int64
}

// drive sends the plan's requests to every endpoint at once, each request at
// its own time and on its own goroutine: a leaky-bucket request is held by
// the server for its Decision.Delay, and the next ones must not wait for it.
// It returns when every answer is in, or early with ctx's error, and reports
// how late the latest request went out: on a busy machine the pictures are
// only as regular as the traffic was.
func drive(ctx context.Context, base string, eps []*endpoint, start time.Time, p plan) (lag time.Duration, err error) {
	client := &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 256},
		Timeout:   2*p.window + 10*time.Second,
	}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, at := range p.sends {
		due := start.Add(at)
		if err := sleepUntil(ctx, due); err != nil {
			return lag, err
		}
		lag = max(lag, time.Since(due))
		for _, ep := range eps {
			c := &ep.counts
			c.sent.Add(1)
			wg.Go(func() {
				switch get(ctx, client, base+ep.path) {
				case http.StatusOK:
					c.admitted.Add(1)
				case http.StatusTooManyRequests:
					c.denied.Add(1)
				default:
					c.failed.Add(1)
				}
			})
		}
	}
	wg.Wait()
	return lag, ctx.Err()
}

// get returns the status of a GET of url, or 0 if there was no answer.
func get(ctx context.Context, client *http.Client, url string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body) // so the connection is reused
	return resp.StatusCode
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// nextBoundary returns the first window boundary after now, counted like the
// limiters count (from the Unix epoch), keeping now's monotonic reading.
func nextBoundary(now time.Time, window time.Duration) time.Time {
	ns := now.UnixNano()
	w := int64(window)
	return now.Add(time.Duration((ns/w+1)*w - ns))
}

// request is what the server did with one request.
type request struct {
	arrived time.Time // reached the rate limiter
	served  time.Time // reached the handler, after any delay; zero if denied
}

// journal records every request one endpoint received. record wraps the
// rate-limit middleware, and the handler behind it calls markServed, so a
// request the middleware denies has no served time.
type journal struct {
	mu       sync.Mutex
	requests []request
}

type requestKey struct{}

func (j *journal) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := &request{arrived: time.Now()}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestKey{}, req)))
		j.mu.Lock()
		j.requests = append(j.requests, *req)
		j.mu.Unlock()
	})
}

func markServed(r *http.Request) {
	if req, ok := r.Context().Value(requestKey{}).(*request); ok {
		req.served = time.Now()
	}
}

func (j *journal) snapshot() []request {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]request(nil), j.requests...)
}
