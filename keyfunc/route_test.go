package keyfunc_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-ratelimit/ratelimit/internal/testkit/assert"
	"github.com/go-ratelimit/ratelimit/internal/testkit/require"

	"github.com/go-ratelimit/ratelimit/keyfunc"
)

func TestRoute(t *testing.T) {
	route := keyfunc.Route()

	t.Run("reads the pattern attached by WithRoute", func(t *testing.T) {
		r := keyfunc.WithRoute(httptest.NewRequest(http.MethodGet, "/users/42", nil), "/users/{id}")
		assert.Equal(t, "/users/{id}", mustKey(t, route, r))
	})
	t.Run("prefers WithRoute over Request.Pattern", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, "/users/42", nil)
		r.Pattern = "GET /users/{id}"
		assert.Equal(t, "/users/:id", mustKey(t, route, keyfunc.WithRoute(r, "/users/:id")))
	})
	t.Run("takes the latest WithRoute", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, "/api/users/42", nil)
		r = keyfunc.WithRoute(keyfunc.WithRoute(r, "/api/*"), "/api/users/{id}")
		assert.Equal(t, "/api/users/{id}", mustKey(t, route, r))
	})
	t.Run("falls back to Request.Pattern for an empty WithRoute", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, "/users/42", nil)
		r.Pattern = "GET /users/{id}"
		assert.Equal(t, "GET /users/{id}", mustKey(t, route, keyfunc.WithRoute(r, "")))
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
}

func TestWithRoute(t *testing.T) {
	type ctxKey struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	r := httptest.NewRequest(http.MethodGet, "/users/42", nil).WithContext(parent)
	r2 := keyfunc.WithRoute(r, "/users/{id}")

	t.Run("does not modify the original request", func(t *testing.T) {
		assert.NotSame(t, r, r2)
		_, err := keyfunc.Route()(r)
		assert.ErrorIs(t, err, keyfunc.ErrNoKey)
	})
	t.Run("keeps the parent's values", func(t *testing.T) {
		assert.Equal(t, "v", r2.Context().Value(ctxKey{}))
	})
	t.Run("keeps the parent's cancellation", func(t *testing.T) {
		child, stop := context.WithCancel(r2.Context())
		defer stop()
		cancel()
		<-r2.Context().Done()
		<-child.Done()
		assert.ErrorIs(t, r2.Context().Err(), context.Canceled)
	})
	t.Run("describes itself for debugging", func(t *testing.T) {
		assert.Contains(t, r2.Context().(interface{ String() string }).String(), `WithRoute("/users/{id}")`)
	})
}
