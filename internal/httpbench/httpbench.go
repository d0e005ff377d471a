// Package httpbench holds what this repository's HTTP benchmarks share: a
// policy that admits every request of a benchmark loop, and a ResponseWriter
// that costs nothing.
package httpbench

import (
	"net/http"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// Policy is the policy benchmarks of the admitted path use: a token bucket
// refilling 1000 tokens every 50µs (20 million requests a second), so that no
// benchmark loop is ever denied, with numbers as small as a real policy's
// (Remaining <= 1000, Reset 1 s).
var Policy = core.TokenBucket(1000, 50*time.Microsecond).WithName("bench")

// DiscardWriter is a ResponseWriter for benchmarks: it keeps one header map,
// cleared by Reset, so that a benchmark measures the handler, not a
// recorder, and it counts statuses other than 200.
type DiscardWriter struct {
	h            http.Header
	total, other int
}

// NewDiscardWriter returns a DiscardWriter with an empty header map.
func NewDiscardWriter() *DiscardWriter { return &DiscardWriter{h: http.Header{}} }

// Reset clears the headers for the next request.
func (w *DiscardWriter) Reset() { clear(w.h) }

// Check fails b if more than 1% of the requests were answered with another
// status than 200: the benchmark left the path it meant to measure. (A
// parallel benchmark on a busy machine sees rare denials: a goroutine
// descheduled between reading the clock and deciding for longer than the
// bucket's 50µs of tolerance is denied. They do not move the average.)
func (w *DiscardWriter) Check(b *testing.B) {
	if w.other*100 > max(w.total, 100) {
		b.Fatalf("%d of %d responses were not 200: the benchmark measured another path", w.other, w.total)
	}
}

// Header returns the header map.
func (w *DiscardWriter) Header() http.Header { return w.h }

// Write discards b.
func (w *DiscardWriter) Write(b []byte) (int, error) { return len(b), nil }

// WriteHeader counts the status.
func (w *DiscardWriter) WriteHeader(code int) {
	w.total++
	if code != http.StatusOK {
		w.other++
	}
}
