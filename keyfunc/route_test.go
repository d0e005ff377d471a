package keyfunc_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-ratelimit/ratelimit/internal/testkit/assert"
	"github.com/go-ratelimit/ratelimit/internal/testkit/require"

	"github.com/go-ratelimit/ratelimit/keyfunc"
)

func TestRoute(t *testing.T) {
	route := keyfunc.Route()

	t.Run("reads the pattern an adapter set on its copy of the request", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, "/users/42", nil)
		kr := r.WithContext(r.Context())
		kr.Pattern = "/users/:id"
		assert.Equal(t, "/users/:id", mustKey(t, route, kr))
		_, err := route(r)
		assert.ErrorIs(t, err, keyfunc.ErrNoKey, "the caller's request is not changed")
	})
	t.Run("reads the pattern net/http's ServeMux sets inside a registered handler", func(t *testing.T) {
		var key string
		var err error
		mux := http.NewServeMux()
		mux.HandleFunc("GET /users/{id}", func(_ http.ResponseWriter, r *http.Request) { key, err = route(r) })
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/users/42", nil))
		require.NoError(t, err)
		assert.Equal(t, "GET /users/{id}", key)
	})
	t.Run("sees no pattern in a middleware wrapping the whole mux", func(t *testing.T) {
		var err error
		mux := http.NewServeMux()
		mux.HandleFunc("GET /users/{id}", func(http.ResponseWriter, *http.Request) {})
		outer := func(w http.ResponseWriter, r *http.Request) { _, err = route(r); mux.ServeHTTP(w, r) }
		outer(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/users/42", nil))
		assert.ErrorIs(t, err, keyfunc.ErrNoKey)
	})
	t.Run("fails with ErrNoKey without a pattern, never using the raw path", func(t *testing.T) {
		key, err := route(httptest.NewRequest(http.MethodGet, "/users/42", nil))
		assert.ErrorIs(t, err, keyfunc.ErrNoKey)
		assert.Empty(t, key)
	})
	t.Run("allocates nothing", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, "/users/42", nil)
		r.Pattern = "GET /users/{id}"
		assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = route(r) }))
	})
}
