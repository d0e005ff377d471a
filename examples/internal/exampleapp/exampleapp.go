// Package exampleapp checks the application that examples/nethttp,
// examples/chi, examples/gin, examples/echo and examples/echo5 each build with
// their router, so that the five stay alike and do not rot.
package exampleapp

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
)

// Run checks an example application: GET / limited per IP ("per-ip", 100
// per minute), POST /login also limited per IP ("login", 5 per minute), and
// GET /api/items also limited per X-API-Key ("per-api-key", 1000 per hour),
// answering 401 without a key; both header styles.
//
// newHandler builds the application, passing opts to every limiter; it
// returns the handler and a function that closes the limiters.
func Run(t *testing.T, newHandler func(opts ...core.Option) (http.Handler, func())) {
	// 54 s into a minute: the login window resets in 6 s.
	h, closeLimits := newHandler(core.WithClock(func() time.Time { return time.Unix(1_700_000_034, 0) }))
	defer closeLimits()
	send := func(method, path string, header ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		r.RemoteAddr = "192.0.2.1:1234"
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	t.Run("limits every request per IP", func(t *testing.T) {
		w := send(http.MethodGet, "/")
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, "100", w.Header().Get("X-RateLimit-Limit"))
		assert.Equal(t, `"per-ip";q=100;w=60`, w.Header().Get("RateLimit-Policy"))
	})
	t.Run("denies the sixth login in a minute", func(t *testing.T) {
		for range 5 {
			require.Equal(t, http.StatusOK, send(http.MethodPost, "/login").Code)
		}
		w := send(http.MethodPost, "/login")
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Equal(t, "6", w.Header().Get("Retry-After"))
		assert.Equal(t, "5", w.Header().Get("X-RateLimit-Limit"))
		assert.Equal(t, `"per-ip";q=100;w=60, "login";q=5;w=60`, w.Header().Get("RateLimit-Policy"))
	})
	t.Run("asks for an API key", func(t *testing.T) {
		w := send(http.MethodGet, "/api/items")
		assert.Equal(t, http.StatusUnauthorized, w.Code)
		assert.NotEmpty(t, w.Header().Get("WWW-Authenticate"))
	})
	t.Run("counts API calls per key", func(t *testing.T) {
		w := send(http.MethodGet, "/api/items", "X-API-Key", "demo")
		assert.Equal(t, http.StatusOK, w.Code)
		assert.JSONEq(t, `["apple","pear"]`, w.Body.String())
		assert.Equal(t, `"per-ip";q=100;w=60, "per-api-key";q=1000;w=3600`, w.Header().Get("RateLimit-Policy"))
	})
}
