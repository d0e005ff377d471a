package ginmw_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/ginmw"
	"github.com/go-ratelimit/ratelimit/internal/httpbench"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/nethttp/adaptertest"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	adaptertest.VerifyTestMain(m)
}

// ok is the suite's handler, which answers "ok".
var ok = gin.WrapH(adaptertest.Handler)

func limit(_ testing.TB, lim core.Limiter, opts ...nethttp.Option) gin.HandlerFunc {
	return ginmw.Limit(lim, opts...)
}

// onRoute mounts the limit on the route (none for a nil lim).
func onRoute(t testing.TB, lim core.Limiter, opts ...nethttp.Option) http.Handler {
	r := gin.New()
	if lim == nil {
		r.GET("/items/:id", ok)
		return r
	}
	r.GET("/items/:id", limit(t, lim, opts...), ok)
	return r
}

func BenchmarkLimit(b *testing.B) { adaptertest.Benchmark(b, adaptertest.Adapter{Mount: onRoute}) }

// BenchmarkClientIP measures the opt-in key on gin's ClientIP behind a
// trusted proxy.
func BenchmarkClientIP(b *testing.B) {
	lim, err := core.New(httpbench.Policy)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = lim.Close() })
	r := gin.New()
	if err := r.SetTrustedProxies([]string{"10.0.0.0/8"}); err != nil {
		b.Fatal(err)
	}
	r.GET("/items/:id", ginmw.Limit(lim, nethttp.WithKeyFunc(ginmw.ClientIP())), ok)
	for _, bc := range []struct{ name, xff string }{{"client=ipv4", "203.0.113.7"}, {"client=ipv6", "2001:db8::7"}} {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/items/1", nil)
			req.RemoteAddr = "10.0.0.1:1234"
			req.Header.Set("X-Forwarded-For", bc.xff)
			w := httpbench.NewDiscardWriter()
			b.ReportAllocs()
			for b.Loop() {
				w.Reset()
				r.ServeHTTP(w, req)
			}
			w.Check(b)
		})
	}
}

func TestAdapterSuite(t *testing.T) {
	t.Run("on the route", func(t *testing.T) {
		adaptertest.Run(t, adaptertest.Adapter{Mount: onRoute})
	})
	t.Run("with r.Use", func(t *testing.T) {
		adaptertest.Run(t, adaptertest.Adapter{
			Mount: func(t testing.TB, lim core.Limiter, opts ...nethttp.Option) http.Handler {
				r := gin.New()
				r.Use(limit(t, lim, opts...))
				r.GET("/items/:id", ok)
				return r
			},
		})
	})
}

func newLim(t *testing.T, limit int64) core.Limiter {
	lim, err := core.New(core.FixedWindow(limit, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lim.Close() })
	return lim
}

func wantCode(t *testing.T, w *httptest.ResponseRecorder, want int) {
	t.Helper()
	if w.Code != want {
		t.Errorf("status: got %d, want %d (body %q)", w.Code, want, w.Body.String())
	}
}

func get(h http.Handler, path, remote string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestAbort(t *testing.T) {
	t.Run("runs no later handler for a denied request", func(t *testing.T) {
		later := 0
		r := gin.New()
		r.Use(limit(t, newLim(t, 1)))
		r.Use(func(*gin.Context) { later++ })
		r.GET("/", ok)
		wantCode(t, get(r, "/", "192.0.2.1:1"), http.StatusOK)
		w := get(r, "/", "192.0.2.1:1")
		wantCode(t, w, http.StatusTooManyRequests)
		if got := w.Header().Get("X-RateLimit-Remaining"); got != "0" {
			t.Errorf("X-RateLimit-Remaining: got %q, want %q: the headers survive the abort", got, "0")
		}
		if later != 1 {
			t.Errorf("later handlers ran %d times, want 1", later)
		}
	})
	t.Run("keys a r.Use limit on the matched route", func(t *testing.T) {
		var keys []string
		r := gin.New()
		r.Use(limit(t, newLim(t, 10), nethttp.WithKeyFunc(func(r *http.Request) (string, error) {
			k, err := keyfunc.Route()(r)
			keys = append(keys, k)
			return k, err
		})))
		r.GET("/users/:id", ok)
		get(r, "/users/1", "192.0.2.1:1")
		get(r, "/users/2", "192.0.2.1:1")
		if want := []string{"/users/:id", "/users/:id"}; !reflect.DeepEqual(keys, want) {
			t.Errorf("keys: got %q, want %q", keys, want)
		}
	})
	t.Run("answers an unmatched route by the key-error policy when keyed on routes", func(t *testing.T) {
		r := gin.New()
		r.Use(limit(t, newLim(t, 10), nethttp.WithKeyFunc(keyfunc.Route())))
		r.GET("/users/:id", ok)
		wantCode(t, get(r, "/nowhere", "192.0.2.1:1"), http.StatusBadRequest)
	})
	t.Run("leaves c.Request as it was for later handlers", func(t *testing.T) {
		r := gin.New()
		var pattern string
		r.GET("/users/:id", limit(t, newLim(t, 10)), func(c *gin.Context) { pattern = c.Request.Pattern })
		get(r, "/users/1", "192.0.2.1:1")
		if pattern != "" {
			t.Errorf("c.Request.Pattern: got %q, want it empty", pattern)
		}
	})
	for _, hooked := range []bool{false, true} {
		// Without a hook the request is copied for the denial handler only.
		t.Run(fmt.Sprintf("gives a denial handler the route, hook=%v", hooked), func(t *testing.T) {
			var patterns []string
			opts := []nethttp.Option{nethttp.WithDenyHandler(func(w http.ResponseWriter, r *http.Request, _ core.Decision) {
				patterns = append(patterns, r.Pattern)
				w.WriteHeader(http.StatusTooManyRequests)
			})}
			if hooked {
				opts = append(opts, nethttp.WithHook(func(nethttp.Event) {}))
			}
			r := gin.New()
			r.GET("/users/:id", limit(t, newLim(t, 1), opts...), ok)
			wantCode(t, get(r, "/users/1", "192.0.2.1:1"), http.StatusOK)
			wantCode(t, get(r, "/users/2", "192.0.2.1:1"), http.StatusTooManyRequests)
			if want := []string{"/users/:id"}; !reflect.DeepEqual(patterns, want) {
				t.Errorf("patterns: got %q, want %q", patterns, want)
			}
		})
	}
}

func TestClientIP(t *testing.T) {
	spoofed := func(i int) []string {
		return []string{"X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i), "X-Real-IP", fmt.Sprintf("198.51.100.%d", i)}
	}
	t.Run("the default key ignores forwarding headers even though gin trusts every proxy", func(t *testing.T) {
		r := gin.New() // gin's default: every peer is a trusted proxy
		r.GET("/", limit(t, newLim(t, 10)), ok)
		codes := map[int]int{}
		for i := range 100 {
			codes[get(r, "/", "192.0.2.1:1", spoofed(i)...).Code]++
		}
		if want := (map[int]int{http.StatusOK: 10, http.StatusTooManyRequests: 90}); !reflect.DeepEqual(codes, want) {
			t.Errorf("codes: got %v, want %v", codes, want)
		}
	})
	t.Run("ClientIP keys on the forwarded client behind a trusted proxy", func(t *testing.T) {
		r := gin.New()
		if err := r.SetTrustedProxies([]string{"10.0.0.0/8"}); err != nil {
			t.Fatal(err)
		}
		r.GET("/", limit(t, newLim(t, 1), nethttp.WithKeyFunc(ginmw.ClientIP())), ok)
		wantCode(t, get(r, "/", "10.0.0.1:1", "X-Forwarded-For", "203.0.113.1"), http.StatusOK)
		wantCode(t, get(r, "/", "10.0.0.1:1", "X-Forwarded-For", "203.0.113.2"), http.StatusOK)
		wantCode(t, get(r, "/", "10.0.0.2:1", "X-Forwarded-For", "203.0.113.1"), http.StatusTooManyRequests)
	})
	t.Run("ClientIP ignores forwarding headers from an untrusted peer", func(t *testing.T) {
		r := gin.New()
		if err := r.SetTrustedProxies([]string{"10.0.0.0/8"}); err != nil {
			t.Fatal(err)
		}
		r.GET("/", limit(t, newLim(t, 1), nethttp.WithKeyFunc(ginmw.ClientIP())), ok)
		wantCode(t, get(r, "/", "192.0.2.1:1", spoofed(1)...), http.StatusOK)
		wantCode(t, get(r, "/", "192.0.2.1:1", spoofed(2)...), http.StatusTooManyRequests)
	})
	t.Run("ClientIP keys are canonical", func(t *testing.T) {
		r := gin.New()
		if err := r.SetTrustedProxies(nil); err != nil {
			t.Fatal(err)
		}
		r.GET("/", limit(t, newLim(t, 1), nethttp.WithKeyFunc(ginmw.ClientIP())), ok)
		wantCode(t, get(r, "/", "[::ffff:192.0.2.1]:1"), http.StatusOK)
		wantCode(t, get(r, "/", "192.0.2.1:1"), http.StatusTooManyRequests) // IPv4-mapped is the same client
		wantCode(t, get(r, "/", "[2001:db8::1]:1"), http.StatusOK)
		wantCode(t, get(r, "/", "[2001:db8::2]:1"), http.StatusTooManyRequests) // one /64
	})
	t.Run("ClientIP outside Limit is a key error", func(t *testing.T) {
		_, err := ginmw.ClientIP()(httptest.NewRequest(http.MethodGet, "/", nil))
		if !errors.Is(err, keyfunc.ErrNoKey) {
			t.Errorf("got %v, want ErrNoKey", err)
		}
	})
}

// Skipping is nethttp.WithSkip's (ginmw.WithSkipper is gone: one skip
// option).
func TestSkip(t *testing.T) {
	r := gin.New()
	r.GET("/", limit(t, newLim(t, 1), nethttp.WithSkip(func(r *http.Request) bool {
		return r.Header.Get("X-Probe") == "1"
	})), ok)
	for range 3 {
		w := get(r, "/", "192.0.2.1:1", "X-Probe", "1")
		wantCode(t, w, http.StatusOK)
		if got := w.Header().Get("X-RateLimit-Limit"); got != "" {
			t.Errorf("X-RateLimit-Limit: got %q, want none", got)
		}
	}
	wantCode(t, get(r, "/", "192.0.2.1:1"), http.StatusOK)
	wantCode(t, get(r, "/", "192.0.2.1:1"), http.StatusTooManyRequests)
}

func TestLimitPanicsAtConstruction(t *testing.T) {
	wantPanic(t, "ginmw: Limit: nil limiter", func() { ginmw.Limit(nil) })
	wantPanic(t, "nethttp: NewEngine: nil Option", func() { ginmw.Limit(newLim(t, 1), nil) })
}

// wantPanic checks that f panics with an error whose text is want.
func wantPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		if err, _ := recover().(error); err == nil || err.Error() != want {
			t.Errorf("panic: got %v, want %q", err, want)
		}
	}()
	f()
}
