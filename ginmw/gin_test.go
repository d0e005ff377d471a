package ginmw_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/ginmw"
	"github.com/go-ratelimit/ratelimit/internal/httpbench"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/nethttp/adaptertest"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	goleak.VerifyTestMain(m)
}

func ok(c *gin.Context) { c.String(http.StatusOK, "ok") }

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
	require.NoError(b, err)
	b.Cleanup(func() { _ = lim.Close() })
	r := gin.New()
	require.NoError(b, r.SetTrustedProxies([]string{"10.0.0.0/8"}))
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
	require.NoError(t, err)
	t.Cleanup(func() { _ = lim.Close() })
	return lim
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
		assert.Equal(t, http.StatusOK, get(r, "/", "192.0.2.1:1").Code)
		w := get(r, "/", "192.0.2.1:1")
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Equal(t, "0", w.Header().Get("X-RateLimit-Remaining"), "the headers survive the abort")
		assert.Equal(t, 1, later)
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
		assert.Equal(t, []string{"/users/:id", "/users/:id"}, keys)
	})
	t.Run("answers an unmatched route by the key-error policy when keyed on routes", func(t *testing.T) {
		r := gin.New()
		r.Use(limit(t, newLim(t, 10), nethttp.WithKeyFunc(keyfunc.Route())))
		r.GET("/users/:id", ok)
		assert.Equal(t, http.StatusBadRequest, get(r, "/nowhere", "192.0.2.1:1").Code)
	})
	t.Run("leaves c.Request as it was for later handlers", func(t *testing.T) {
		r := gin.New()
		var pattern string
		r.GET("/users/:id", limit(t, newLim(t, 10)), func(c *gin.Context) { pattern = c.Request.Pattern })
		get(r, "/users/1", "192.0.2.1:1")
		assert.Empty(t, pattern)
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
			assert.Equal(t, http.StatusOK, get(r, "/users/1", "192.0.2.1:1").Code)
			assert.Equal(t, http.StatusTooManyRequests, get(r, "/users/2", "192.0.2.1:1").Code)
			assert.Equal(t, []string{"/users/:id"}, patterns)
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
		assert.Equal(t, map[int]int{http.StatusOK: 10, http.StatusTooManyRequests: 90}, codes)
	})
	t.Run("ClientIP keys on the forwarded client behind a trusted proxy", func(t *testing.T) {
		r := gin.New()
		require.NoError(t, r.SetTrustedProxies([]string{"10.0.0.0/8"}))
		r.GET("/", limit(t, newLim(t, 1), nethttp.WithKeyFunc(ginmw.ClientIP())), ok)
		assert.Equal(t, http.StatusOK, get(r, "/", "10.0.0.1:1", "X-Forwarded-For", "203.0.113.1").Code)
		assert.Equal(t, http.StatusOK, get(r, "/", "10.0.0.1:1", "X-Forwarded-For", "203.0.113.2").Code)
		assert.Equal(t, http.StatusTooManyRequests, get(r, "/", "10.0.0.2:1", "X-Forwarded-For", "203.0.113.1").Code)
	})
	t.Run("ClientIP ignores forwarding headers from an untrusted peer", func(t *testing.T) {
		r := gin.New()
		require.NoError(t, r.SetTrustedProxies([]string{"10.0.0.0/8"}))
		r.GET("/", limit(t, newLim(t, 1), nethttp.WithKeyFunc(ginmw.ClientIP())), ok)
		assert.Equal(t, http.StatusOK, get(r, "/", "192.0.2.1:1", spoofed(1)...).Code)
		assert.Equal(t, http.StatusTooManyRequests, get(r, "/", "192.0.2.1:1", spoofed(2)...).Code)
	})
	t.Run("ClientIP keys are canonical", func(t *testing.T) {
		r := gin.New()
		require.NoError(t, r.SetTrustedProxies(nil))
		r.GET("/", limit(t, newLim(t, 1), nethttp.WithKeyFunc(ginmw.ClientIP())), ok)
		assert.Equal(t, http.StatusOK, get(r, "/", "[::ffff:192.0.2.1]:1").Code)
		assert.Equal(t, http.StatusTooManyRequests, get(r, "/", "192.0.2.1:1").Code, "IPv4-mapped is the same client")
		assert.Equal(t, http.StatusOK, get(r, "/", "[2001:db8::1]:1").Code)
		assert.Equal(t, http.StatusTooManyRequests, get(r, "/", "[2001:db8::2]:1").Code, "one /64")
	})
	t.Run("ClientIP outside Limit is a key error", func(t *testing.T) {
		_, err := ginmw.ClientIP()(httptest.NewRequest(http.MethodGet, "/", nil))
		assert.ErrorIs(t, err, keyfunc.ErrNoKey)
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
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Empty(t, w.Header().Get("X-RateLimit-Limit"))
	}
	assert.Equal(t, http.StatusOK, get(r, "/", "192.0.2.1:1").Code)
	assert.Equal(t, http.StatusTooManyRequests, get(r, "/", "192.0.2.1:1").Code)
}

func TestLimitPanicsAtConstruction(t *testing.T) {
	assert.PanicsWithError(t, "ginmw: Limit: nil limiter", func() { ginmw.Limit(nil) })
	assert.PanicsWithError(t, "nethttp: NewEngine: nil Option", func() { ginmw.Limit(newLim(t, 1), nil) })
}
