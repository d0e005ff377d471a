package chimw_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/go-ratelimit/ratelimit/chimw"
	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/nethttp/adaptertest"
)

func TestMain(m *testing.M) { adaptertest.VerifyTestMain(m) }

// ok is the suite's handler, which answers "ok".
var ok = adaptertest.Handler.ServeHTTP

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

// onUse mounts the limit with r.Use, which runs before chi routes (none for
// a nil lim).
func onUse(t testing.TB, lim core.Limiter, opts ...nethttp.Option) http.Handler {
	r := chi.NewRouter()
	if lim != nil {
		r.Use(limit(t, lim, opts...))
	}
	r.Get("/items/{id}", ok)
	return r
}

func BenchmarkLimit(b *testing.B) { adaptertest.Benchmark(b, adaptertest.Adapter{Mount: onWith}) }

// BenchmarkLimitInUse is the r.Use of most programs, where a route key
// costs Limit a lookup of its own.
func BenchmarkLimitInUse(b *testing.B) { adaptertest.Benchmark(b, adaptertest.Adapter{Mount: onUse}) }

func TestAdapterSuite(t *testing.T) {
	t.Run("on r.With", func(t *testing.T) {
		adaptertest.Run(t, adaptertest.Adapter{Mount: onWith})
	})
	t.Run("with r.Use, before chi routes", func(t *testing.T) {
		adaptertest.Run(t, adaptertest.Adapter{Mount: onUse})
	})
	t.Run("with r.Use of a mounted sub-router", func(t *testing.T) {
		adaptertest.Run(t, adaptertest.Adapter{
			Mount: func(t testing.TB, lim core.Limiter, opts ...nethttp.Option) http.Handler {
				r := chi.NewRouter()
				r.Route("/items", func(r chi.Router) {
					r.Use(limit(t, lim, opts...))
					r.Get("/{id}", ok)
				})
				return r
			},
		})
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

func newLim(t *testing.T, limit int64) core.Limiter {
	t.Helper()
	lim, err := core.New(core.FixedWindow(limit, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lim.Close() })
	return lim
}

func send(h http.Handler, method, path string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = "192.0.2.1:1234"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func get(h http.Handler, path string) *httptest.ResponseRecorder {
	return send(h, http.MethodGet, path)
}

func wantCode(t *testing.T, w *httptest.ResponseRecorder, want int) {
	t.Helper()
	if w.Code != want {
		t.Errorf("status: got %d, want %d (body %q)", w.Code, want, w.Body.String())
	}
}

// recordKeys returns a key option that keys on keyfunc.Route and appends
// each key to *keys ("-" for an error).
func recordKeys(keys *[]string) nethttp.Option {
	return nethttp.WithKeyFunc(func(r *http.Request) (string, error) {
		k, err := keyfunc.Route()(r)
		if err != nil {
			*keys = append(*keys, "-")
		} else {
			*keys = append(*keys, k)
		}
		return k, err
	})
}

// routes registers the same routes on r, at the top and under /api, each
// served by h.
func routes(r chi.Router, h http.HandlerFunc) {
	r.Get("/", h)
	r.Get("/items/{id}", h)
	r.Get("/static/*", h)
	r.Route("/api", func(r chi.Router) {
		r.Get("/", h)
		r.Get("/users/{id}", h)
		r.Route("/v2", func(r chi.Router) { r.Get("/users/{id}/posts/{post}", h) })
	})
}

var routedPaths = []string{"/", "/items/1", "/static/css/site.css", "/api", "/api/", "/api/users/7", "/api/v2/users/7/posts/9"}

func TestRouteKeys(t *testing.T) {
	// What chi itself says once it has routed: the key of the limit on
	// r.With, where the route is matched before the middleware runs.
	var want []string
	r := chi.NewRouter()
	routes(r, func(_ http.ResponseWriter, r *http.Request) {
		want = append(want, chi.RouteContext(r.Context()).RoutePattern())
	})
	for _, p := range routedPaths {
		get(r, p)
	}
	if len(want) != len(routedPaths) {
		t.Fatalf("chi routed %d of %d paths: %v", len(want), len(routedPaths), want)
	}

	t.Run("keys an r.Use limit on the pattern chi then matches", func(t *testing.T) {
		var keys []string
		r := chi.NewRouter()
		r.Use(limit(t, newLim(t, 100), recordKeys(&keys)))
		routes(r, ok)
		for _, p := range routedPaths {
			wantCode(t, get(r, p), http.StatusOK)
		}
		if !reflect.DeepEqual(keys, want) {
			t.Errorf("keys: got %q, want %q", keys, want)
		}
	})
	t.Run("keys a sub-router's r.Use limit on the full pattern", func(t *testing.T) {
		var keys []string
		r := chi.NewRouter()
		r.Route("/api", func(r chi.Router) {
			r.Use(limit(t, newLim(t, 100), recordKeys(&keys)))
			r.Get("/", ok)
			r.Get("/users/{id}", ok)
			r.Route("/v2", func(r chi.Router) { r.Get("/users/{id}/posts/{post}", ok) })
		})
		for _, p := range routedPaths[3:] {
			wantCode(t, get(r, p), http.StatusOK)
		}
		if !reflect.DeepEqual(keys, want[3:]) {
			t.Errorf("keys: got %q, want %q", keys, want[3:])
		}
	})
	t.Run("keys a mounted route on r.With on its full pattern", func(t *testing.T) {
		var keys []string
		r := chi.NewRouter()
		r.Route("/api", func(r chi.Router) {
			r.With(limit(t, newLim(t, 1), recordKeys(&keys))).Get("/users/{id}", ok)
		})
		wantCode(t, get(r, "/api/users/1"), http.StatusOK)
		wantCode(t, get(r, "/api/users/2"), http.StatusTooManyRequests)
		if want := []string{"/api/users/{id}", "/api/users/{id}"}; !reflect.DeepEqual(keys, want) {
			t.Errorf("keys: got %q, want %q", keys, want)
		}
	})
	t.Run("gives each route its own quota per client in r.Use", func(t *testing.T) {
		r := chi.NewRouter()
		r.Use(limit(t, newLim(t, 1), nethttp.WithKeyFunc(keyfunc.Join(keyfunc.Route(), keyfunc.IP()))))
		routes(r, ok)
		wantCode(t, get(r, "/items/1"), http.StatusOK)
		wantCode(t, get(r, "/api/users/1"), http.StatusOK)
		wantCode(t, get(r, "/items/2"), http.StatusTooManyRequests)
		wantCode(t, get(r, "/api/users/2"), http.StatusTooManyRequests)
	})
	t.Run("keys on the route chi matches after StripSlashes rewrote its path", func(t *testing.T) {
		var keys []string
		r := chi.NewRouter()
		r.Use(middleware.StripSlashes, limit(t, newLim(t, 100), recordKeys(&keys)))
		r.Get("/items/{id}", ok)
		wantCode(t, get(r, "/items/1/"), http.StatusOK)
		if want := []string{"/items/{id}"}; !reflect.DeepEqual(keys, want) {
			t.Errorf("keys: got %q, want %q", keys, want)
		}
	})
}

func TestUnmatchedRoutes(t *testing.T) {
	t.Run("answers a path no route matches by the key-error policy, with a route key", func(t *testing.T) {
		var keys []string
		r := chi.NewRouter()
		r.Use(limit(t, newLim(t, 100), recordKeys(&keys)))
		routes(r, ok)
		wantCode(t, get(r, "/nowhere"), http.StatusBadRequest)
		wantCode(t, send(r, http.MethodPost, "/items/1"), http.StatusBadRequest)
		if want := []string{"-", "-"}; !reflect.DeepEqual(keys, want) {
			t.Errorf("keys: got %q, want %q", keys, want)
		}
	})
	t.Run("limits unmatched paths per client with a fallback key, and chi answers them", func(t *testing.T) {
		r := chi.NewRouter()
		r.Use(limit(t, newLim(t, 2), nethttp.WithKeyFunc(keyfunc.Route()), nethttp.WithKeyFallback(keyfunc.IP())))
		routes(r, ok)
		wantCode(t, get(r, "/nowhere"), http.StatusNotFound)
		wantCode(t, send(r, http.MethodPost, "/items/1"), http.StatusMethodNotAllowed)
		wantCode(t, get(r, "/elsewhere"), http.StatusTooManyRequests)
		wantCode(t, get(r, "/items/1"), http.StatusOK)
	})
	t.Run("limits unmatched paths with the default key", func(t *testing.T) {
		r := chi.NewRouter()
		r.Use(limit(t, newLim(t, 1)))
		routes(r, ok)
		wantCode(t, get(r, "/nowhere"), http.StatusNotFound)
		wantCode(t, get(r, "/items/1"), http.StatusTooManyRequests)
	})
}

func TestRequests(t *testing.T) {
	t.Run("passes the request on unchanged", func(t *testing.T) {
		var seen *http.Request
		r := chi.NewRouter()
		r.With(limit(t, newLim(t, 1), nethttp.WithKeyFunc(keyfunc.Route()))).Get("/items/{id}",
			func(_ http.ResponseWriter, r *http.Request) { seen = r })
		req := httptest.NewRequest(http.MethodGet, "/items/1", nil)
		r.ServeHTTP(httptest.NewRecorder(), req)
		if seen == nil {
			t.Fatal("the handler did not run")
		}
		if got := chi.URLParam(seen, "id"); got != "1" {
			t.Errorf("URLParam: got %q, want %q", got, "1")
		}
		if _, err := keyfunc.Route()(req); !errors.Is(err, keyfunc.ErrNoKey) {
			t.Errorf("the caller's request: got %v, want no route (ErrNoKey)", err)
		}
	})
	t.Run("passes chi's own request on in r.Use, though it decided on the route", func(t *testing.T) {
		var keys []string
		var seen []*http.Request
		r := chi.NewRouter()
		r.Use(func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen = append(seen, r) // what chi hands the limit
				next.ServeHTTP(w, r)
			})
		}, limit(t, newLim(t, 1), recordKeys(&keys)))
		r.Get("/items/{id}", func(_ http.ResponseWriter, r *http.Request) { seen = append(seen, r) })
		wantCode(t, get(r, "/items/1"), http.StatusOK)
		if want := []string{"/items/{id}"}; !reflect.DeepEqual(keys, want) {
			t.Errorf("keys: got %q, want %q", keys, want)
		}
		if len(seen) != 2 || seen[0] != seen[1] {
			t.Fatalf("the handler gets the request chi gave the limit: got %d requests %p", len(seen), seen)
		}
		if got := seen[1].Pattern; got != "/items/{id}" {
			t.Errorf("Pattern in the handler: got %q, want chi's own %q", got, "/items/{id}")
		}
	})
	for _, hooked := range []bool{false, true} {
		// Without a hook Limit finds the route for the denial handler only.
		name := map[bool]string{false: "without a hook", true: "with a hook"}[hooked]
		t.Run("gives a denial handler in r.Use the route, "+name, func(t *testing.T) {
			var patterns []string
			opts := []nethttp.Option{nethttp.WithDenyHandler(func(w http.ResponseWriter, r *http.Request, _ core.Decision) {
				patterns = append(patterns, r.Pattern)
				w.WriteHeader(http.StatusTooManyRequests)
			})}
			if hooked {
				opts = append(opts, nethttp.WithHook(func(nethttp.Event) {}))
			}
			r := chi.NewRouter()
			r.Use(limit(t, newLim(t, 1), opts...))
			r.Get("/users/{id}", ok)
			wantCode(t, get(r, "/users/1"), http.StatusOK)
			wantCode(t, get(r, "/users/2"), http.StatusTooManyRequests)
			if want := []string{"/users/{id}"}; !reflect.DeepEqual(patterns, want) {
				t.Errorf("patterns: got %q, want %q", patterns, want)
			}
		})
	}
	t.Run("works outside chi, with the request's own Pattern", func(t *testing.T) {
		mux := http.NewServeMux()
		mux.Handle("GET /items/{id}", limit(t, newLim(t, 1), nethttp.WithKeyFunc(keyfunc.Route()))(http.HandlerFunc(ok)))
		wantCode(t, get(mux, "/items/1"), http.StatusOK)
		wantCode(t, get(mux, "/items/2"), http.StatusTooManyRequests)
	})
}

func TestLimitPanicsAtConstruction(t *testing.T) {
	wantPanic := func(want string, f func()) {
		t.Helper()
		defer func() {
			t.Helper()
			err, _ := recover().(error)
			if err == nil || err.Error() != want {
				t.Errorf("panic: got %v, want %q", err, want)
			}
		}()
		f()
	}
	wantPanic("chimw: Limit: nil limiter", func() { chimw.Limit(nil) })
	wantPanic("nethttp: NewEngine: nil Option", func() { chimw.Limit(newLim(t, 1), nil) })
}
