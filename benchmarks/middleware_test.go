package benchmarks

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const clientAddr = "192.0.2.1:1234"

func newRequest() *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = clientAddr
	return r
}

// serve sends one request from clientAddr through h and returns the writer.
func serve(h http.Handler) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, newRequest())
	return w
}

func TestStacksAdmitAndDenyAsConfigured(t *testing.T) {
	for _, s := range Stacks() {
		name := "router=" + s.Router + "/lib=" + s.Lib
		t.Run(name+" answers 200 to every request under allow-all", func(t *testing.T) {
			h, err := s.New(AllowAll)
			require.NoError(t, err)
			for range 1000 {
				require.Equal(t, http.StatusOK, serve(h).Code)
			}
		})
		if s.Lib == "bare" {
			continue
		}
		t.Run(name+" answers 429 to the second request under deny-most", func(t *testing.T) {
			h, err := s.New(DenyMost)
			require.NoError(t, err)
			first := serve(h)
			assert.Equal(t, http.StatusOK, first.Code)
			assert.Equal(t, s.SetsHeaders, hasRateLimitHeader(first.Header()), "rate-limit headers on an admitted response")
			for range 10 {
				assert.Equal(t, http.StatusTooManyRequests, serve(h).Code)
			}
		})
	}
}

// hasRateLimitHeader reports whether any rate-limit header is set, whatever
// the library's spelling.
func hasRateLimitHeader(h http.Header) bool {
	for _, name := range []string{"X-Ratelimit-Limit", "X-Rate-Limit-Limit", "Ratelimit-Limit", "Ratelimit-Policy", "Ratelimit"} {
		if h.Get(name) != "" {
			return true
		}
	}
	return false
}

// Scenario 4: one client, one goroutine, every request admitted; the
// overhead of a middleware is its time minus the bare stack of its router.
// Besides the wall-clock ns/op it reports cpu-ns/op, the process's CPU time
// per request (the garbage collector's included), which time spent
// descheduled on a shared machine does not inflate.
func BenchmarkMiddleware(b *testing.B) {
	for _, s := range Stacks() {
		b.Run("router="+s.Router+"/lib="+s.Lib, func(b *testing.B) {
			h, err := s.New(AllowAll)
			require.NoError(b, err)
			r := newRequest()
			w := newDiscardWriter()
			wrong := 0
			b.ReportAllocs()
			cpu0, cpuOK := processCPU()
			for b.Loop() {
				w.reset()
				h.ServeHTTP(w, r)
				if w.status != http.StatusOK {
					wrong++
				}
			}
			if cpu1, ok := processCPU(); cpuOK && ok {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
			if wrong > 0 {
				b.Fatalf("%d of %d responses were not 200", wrong, b.N)
			}
		})
	}
}
