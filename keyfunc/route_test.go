package keyfunc_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/keyfunc"
)

func TestRoute(t *testing.T) {
	route := keyfunc.Route()

	t.Run("reads the pattern an adapter set on its copy of the request", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, "/users/42", nil)
		kr := r.WithContext(r.Context())
		kr.Pattern = "/users/:id"
		wantKey(t, route, kr, "/users/:id")
		key, err := route(r) // the caller's request is not changed
		wantNoKey(t, key, err)
	})
	t.Run("hashes a pattern longer than 256 bytes, as every key", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Pattern = "GET /" + strings.Repeat("p", 300)
		key, err := route(r)
		if err != nil || len(key) != 50 || !strings.HasPrefix(key, "sha256:") {
			t.Errorf("got %q, %v; want a 50-byte \"sha256:\" key", key, err)
		}
		r.Pattern = "sha256:abc" // a raw key can never equal a hash
		if key, _ := route(r); key == r.Pattern {
			t.Errorf("got the pattern %q itself, want its hash", key)
		}
	})
	t.Run("reads the pattern net/http's ServeMux sets inside a registered handler", func(t *testing.T) {
		var key string
		var err error
		mux := http.NewServeMux()
		mux.HandleFunc("GET /users/{id}", func(_ http.ResponseWriter, r *http.Request) { key, err = route(r) })
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/users/42", nil))
		if key != "GET /users/{id}" || err != nil {
			t.Errorf("got %q, %v; want %q, nil", key, err, "GET /users/{id}")
		}
	})
	t.Run("sees no pattern in a middleware wrapping the whole mux", func(t *testing.T) {
		var key string
		var err error
		mux := http.NewServeMux()
		mux.HandleFunc("GET /users/{id}", func(http.ResponseWriter, *http.Request) {})
		outer := func(w http.ResponseWriter, r *http.Request) { key, err = route(r); mux.ServeHTTP(w, r) }
		outer(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/users/42", nil))
		wantNoKey(t, key, err)
	})
	t.Run("fails with ErrNoKey without a pattern, never using the raw path", func(t *testing.T) {
		key, err := route(httptest.NewRequest(http.MethodGet, "/users/42", nil))
		wantNoKey(t, key, err)
	})
	t.Run("allocates nothing", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, "/users/42", nil)
		r.Pattern = "GET /users/{id}"
		if allocs := testing.AllocsPerRun(100, func() { _, _ = route(r) }); allocs != 0 {
			t.Errorf("got %v allocations, want 0", allocs)
		}
	})
}
