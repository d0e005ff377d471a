package chimw_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/go-ratelimit/ratelimit/chimw"
	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/nethttp/adaptertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }

func limit(_ testing.TB, lim core.Limiter, opts ...nethttp.Option) func(http.Handler) http.Handler {
	return chimw.Limit(lim, opts...)
}

// onWith mounts the limit on the route with r.With (none for a nil lim).
func onWith(t testing.TB, lim core.Limiter, opts ...nethttp.Option) http.Handler {
	r := chi.NewRouter()
	if lim == nil {
		r.Get("/items/{id}", ok)
		return r
	}
	r.With(limit(t, lim, opts...)).Get("/items/{id}", ok)
	return r
}

func BenchmarkLimit(b *testing.B) { adaptertest.Benchmark(b, adaptertest.Adapter{Mount: onWith}) }

func TestAdapterSuite(t *testing.T) {
	t.Run("on r.With", func(t *testing.T) {
		adaptertest.Run(t, adaptertest.Adapter{Mount: onWith})
	})
	t.Run("in a group under a mounted sub-router", func(t *testing.T) {
		adaptertest.Run(t, adaptertest.Adapter{
			Mount: func(t testing.TB, lim core.Limiter, opts ...nethttp.Option) http.Handler {
				r := chi.NewRouter()
				r.Route("/items", func(r chi.Router) {
					r.Group(func(r chi.Router) {
						r.Use(limit(t, lim, opts...))
						r.Get("/{id}", ok)
					})
				})
				return r
			},
		})
	})
}

func get(h http.Handler, path string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr = "192.0.2.1:1234"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestRouteKeys(t *testing.T) {
	newLim := func(t *testing.T) core.Limiter {
		lim, err := core.New(core.FixedWindow(1, time.Minute))
		require.NoError(t, err)
		t.Cleanup(func() { _ = lim.Close() })
		return lim
	}
	t.Run("keys a mounted route on its full pattern", func(t *testing.T) {
		var keys []string
		lim := newLim(t)
		r := chi.NewRouter()
		r.Route("/api", func(r chi.Router) {
			r.With(limit(t, lim, nethttp.WithKeyFunc(func(r *http.Request) (string, error) {
				k, err := keyfunc.Route()(r)
				keys = append(keys, k)
				return k, err
			}))).Get("/users/{id}", ok)
		})
		assert.Equal(t, http.StatusOK, get(r, "/api/users/1").Code)
		assert.Equal(t, http.StatusTooManyRequests, get(r, "/api/users/2").Code)
		assert.Equal(t, []string{"/api/users/{id}", "/api/users/{id}"}, keys)
	})
	t.Run("keeps separate routes separate", func(t *testing.T) {
		lim := newLim(t)
		mw := limit(t, lim, nethttp.WithKeyFunc(keyfunc.Route()))
		r := chi.NewRouter()
		r.With(mw).Get("/a/{id}", ok)
		r.With(mw).Get("/b/{id}", ok)
		assert.Equal(t, http.StatusOK, get(r, "/a/1").Code)
		assert.Equal(t, http.StatusOK, get(r, "/b/1").Code)
		assert.Equal(t, http.StatusTooManyRequests, get(r, "/a/2").Code)
	})
	t.Run("has no route on a top-level r.Use, which runs before routing", func(t *testing.T) {
		r := chi.NewRouter()
		r.Use(limit(t, newLim(t), nethttp.WithKeyFunc(keyfunc.Route())))
		r.Get("/items/{id}", ok)
		assert.Equal(t, http.StatusBadRequest, get(r, "/items/1").Code)
	})
	t.Run("passes the request on unchanged", func(t *testing.T) {
		var seen *http.Request
		r := chi.NewRouter()
		r.With(limit(t, newLim(t), nethttp.WithKeyFunc(keyfunc.Route()))).Get("/items/{id}",
			func(_ http.ResponseWriter, r *http.Request) { seen = r })
		req := httptest.NewRequest(http.MethodGet, "/items/1", nil)
		r.ServeHTTP(httptest.NewRecorder(), req)
		require.NotNil(t, seen)
		assert.Equal(t, "1", chi.URLParam(seen, "id"))
		_, err := keyfunc.Route()(req)
		assert.ErrorIs(t, err, keyfunc.ErrNoKey, "the caller's request carries no route")
	})
	t.Run("passes chi's request on in a sub-router, though it decided on the full pattern", func(t *testing.T) {
		var keys []string
		var seen []*http.Request
		var patterns []string
		r := chi.NewRouter()
		r.Route("/api", func(r chi.Router) {
			r.With(func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					seen = append(seen, r) // what chi hands the limit
					next.ServeHTTP(w, r)
				})
			}, limit(t, newLim(t), nethttp.WithKeyFunc(func(r *http.Request) (string, error) {
				k, err := keyfunc.Route()(r)
				keys = append(keys, k)
				return k, err
			}))).Get("/users/{id}", func(_ http.ResponseWriter, r *http.Request) {
				seen = append(seen, r)
				patterns = append(patterns, r.Pattern)
			})
		})
		assert.Equal(t, http.StatusOK, get(r, "/api/users/1").Code)
		assert.Equal(t, []string{"/api/users/{id}"}, keys)
		require.Len(t, seen, 2)
		assert.Same(t, seen[0], seen[1], "the handler gets the request chi gave the limit")
		assert.Equal(t, []string{"/api/users/{id}"}, patterns, "chi's own Pattern: the full pattern since chi v5.3.0")
	})
}

func TestLimitPanicsAtConstruction(t *testing.T) {
	assert.PanicsWithError(t, "chimw: Limit: nil limiter", func() { chimw.Limit(nil) })
	lim := core.MustNew(core.FixedWindow(1, time.Second))
	defer lim.Close()
	assert.PanicsWithError(t, "nethttp: Middleware: nil Option", func() { chimw.Limit(lim, nil) })
}
