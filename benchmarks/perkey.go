package benchmarks

import (
	"net/http"
	"sync"
	"time"
)

// perKey is the wrapper users write around a single-key limiter
// (golang.org/x/time/rate, go.uber.org/ratelimit) to limit per client: a
// map of limiters under one mutex, each with the time it was last used, and
// a janitor that deletes the keys idle for longer than a TTL. It is the shape
// of the common tutorials and of echo's own RateLimiterMemoryStore. The
// mutex covers only the map lookup; the limiter's own call runs outside it.
type perKey[L any] struct {
	mu         sync.Mutex
	m          map[string]*visitor[L]
	ttl        time.Duration
	newLimiter func() L
}

type visitor[L any] struct {
	lim      L
	lastSeen time.Time
}

func (p *perKey[L]) get(key string, now time.Time) L {
	p.mu.Lock()
	v, ok := p.m[key]
	if !ok {
		if p.m == nil {
			p.m = make(map[string]*visitor[L])
		}
		v = &visitor[L]{lim: p.newLimiter()}
		p.m[key] = v
	}
	v.lastSeen = now
	p.mu.Unlock()
	return v.lim
}

// sweep is the janitor's pass: users run it from a ticker goroutine.
func (p *perKey[L]) sweep(now time.Time) {
	p.mu.Lock()
	for k, v := range p.m {
		if now.Sub(v.lastSeen) > p.ttl {
			delete(p.m, k)
		}
	}
	p.mu.Unlock()
}

// discardWriter is the http.ResponseWriter of the middleware benchmarks: it
// keeps one header map, emptied before each request, and drops the body, so
// a benchmark measures the handler chain and not a recorder.
type discardWriter struct {
	h      http.Header
	status int
}

func newDiscardWriter() *discardWriter { return &discardWriter{h: make(http.Header)} }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }

// reset prepares the writer for the next request.
func (w *discardWriter) reset() {
	clear(w.h)
	w.status = 0
}
