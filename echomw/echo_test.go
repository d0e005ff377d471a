package echomw_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/echomw"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/nethttp/adaptertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ok(c echo.Context) error { return c.String(http.StatusOK, "ok") }

func limit(_ testing.TB, lim core.Limiter, opts ...nethttp.Option) echo.MiddlewareFunc {
	return echomw.Limit(lim, opts...)
}

// echoBody is what echo's default HTTPErrorHandler answers an HTTPError with.
func echoBody(status int) (string, string) {
	return `{"message":"` + http.StatusText(status) + `"}` + "\n", echo.MIMEApplicationJSON
}

// onRoute mounts the limit on the route (none for a nil lim).
func onRoute(t testing.TB, lim core.Limiter, opts ...nethttp.Option) http.Handler {
	e := echo.New()
	if lim == nil {
		e.GET("/items/:id", ok)
		return e
	}
	e.GET("/items/:id", ok, limit(t, lim, opts...))
	return e
}

func BenchmarkLimit(b *testing.B) { adaptertest.Benchmark(b, adaptertest.Adapter{Mount: onRoute}) }

func TestAdapterSuite(t *testing.T) {
	t.Run("on the route", func(t *testing.T) {
		adaptertest.Run(t, adaptertest.Adapter{Mount: onRoute, Body: echoBody})
	})
	t.Run("with e.Use", func(t *testing.T) {
		adaptertest.Run(t, adaptertest.Adapter{
			Mount: func(t testing.TB, lim core.Limiter, opts ...nethttp.Option) http.Handler {
				e := echo.New()
				e.Use(limit(t, lim, opts...))
				e.GET("/items/:id", ok)
				return e
			},
			Body: echoBody,
		})
	})
}

func newLim(t *testing.T, limit int64) core.Limiter {
	clk := func() time.Time { return time.Unix(1_700_000_034, 0) } // 6 s before a minute ends
	lim, err := core.New(core.FixedWindow(limit, time.Minute), core.WithClock(clk))
	require.NoError(t, err)
	t.Cleanup(func() { _ = lim.Close() })
	return lim
}

func send(h http.Handler, method, path string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = "192.0.2.1:1234"
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestErrorHandling(t *testing.T) {
	t.Run("gives a custom HTTPErrorHandler the rejection and its decision", func(t *testing.T) {
		e := echo.New()
		var got *nethttp.Rejection
		e.HTTPErrorHandler = func(err error, c echo.Context) {
			if errors.As(err, &got) {
				nethttp.ProblemJSON(c.Response(), c.Request(), got.Decision)
			}
		}
		e.GET("/", ok, limit(t, newLim(t, 1)))
		send(e, http.MethodGet, "/")
		w := send(e, http.MethodGet, "/")
		require.NotNil(t, got)
		assert.Equal(t, http.StatusTooManyRequests, got.Status)
		assert.Equal(t, int64(1), got.Decision.Limit)
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
		assert.Equal(t, "6", w.Header().Get("Retry-After"))
		assert.Equal(t, "0", w.Header().Get("X-RateLimit-Remaining"))
	})
	t.Run("writes the answer of WithDenyHandler, which echo then leaves alone", func(t *testing.T) {
		e := echo.New()
		var errs []error
		e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				err := next(c)
				errs = append(errs, err)
				return err
			}
		})
		e.GET("/", ok, limit(t, newLim(t, 1), nethttp.WithDenyHandler(nethttp.ProblemJSON)))
		send(e, http.MethodGet, "/")
		w := send(e, http.MethodGet, "/")
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
		assert.Contains(t, w.Body.String(), `"status":429`)
		require.Len(t, errs, 2)
		assert.NoError(t, errs[0])
		var he *echo.HTTPError
		require.ErrorAs(t, errs[1], &he, "the denial still reaches echo's error path, for loggers")
		assert.Equal(t, http.StatusTooManyRequests, he.Code)
	})
	t.Run("never writes the limiter's error text, even in Debug mode", func(t *testing.T) {
		e := echo.New()
		e.Debug = true
		secret := errors.New("secret-store-detail")
		e.GET("/", ok, limit(t, coretest.Failing{Err: secret, P: core.FixedWindow(1, time.Second)}, nethttp.WithFailClosed()))
		w := send(e, http.MethodGet, "/")
		assert.Equal(t, http.StatusServiceUnavailable, w.Code)
		assert.NotContains(t, w.Body.String(), "secret")
		assert.JSONEq(t, `{"message":"Service Unavailable","error":"code=503, message=Service Unavailable, internal=echomw: Service Unavailable"}`,
			w.Body.String())
	})
	t.Run("unwraps to the cause for logs", func(t *testing.T) {
		e := echo.New()
		secret := errors.New("secret-store-detail")
		var got error
		e.HTTPErrorHandler = func(err error, _ echo.Context) { got = err }
		e.GET("/", ok, limit(t, coretest.Failing{Err: secret, P: core.FixedWindow(1, time.Second)}, nethttp.WithFailClosed()))
		send(e, http.MethodGet, "/")
		assert.ErrorIs(t, got, secret)
	})
	t.Run("answers a denied HEAD request without a body", func(t *testing.T) {
		e := echo.New()
		e.HEAD("/", ok, limit(t, newLim(t, 1)))
		send(e, http.MethodHead, "/")
		w := send(e, http.MethodHead, "/")
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Empty(t, w.Body.String())
		assert.Equal(t, "6", w.Header().Get("Retry-After"))
	})
}

func TestRoutes(t *testing.T) {
	t.Run("keys on the registered path", func(t *testing.T) {
		var keys []string
		e := echo.New()
		e.Use(limit(t, newLim(t, 10), nethttp.WithKeyFunc(func(r *http.Request) (string, error) {
			k, err := keyfunc.Route()(r)
			keys = append(keys, k)
			return k, err
		})))
		e.GET("/users/:id", ok)
		send(e, http.MethodGet, "/users/1")
		send(e, http.MethodGet, "/users/2")
		assert.Equal(t, []string{"/users/:id", "/users/:id"}, keys)
	})
	t.Run("has no route in e.Pre, which runs before routing", func(t *testing.T) {
		e := echo.New()
		e.Pre(limit(t, newLim(t, 10), nethttp.WithKeyFunc(keyfunc.Route())))
		e.GET("/users/:id", ok)
		assert.Equal(t, http.StatusBadRequest, send(e, http.MethodGet, "/users/1").Code)
	})
	t.Run("leaves c.Request() as it was for later handlers", func(t *testing.T) {
		e := echo.New()
		var pattern string
		e.GET("/users/:id", func(c echo.Context) error { pattern = c.Request().Pattern; return nil }, limit(t, newLim(t, 10)))
		send(e, http.MethodGet, "/users/1")
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
			e := echo.New()
			e.GET("/users/:id", ok, limit(t, newLim(t, 1), opts...))
			assert.Equal(t, http.StatusOK, send(e, http.MethodGet, "/users/1").Code)
			assert.Equal(t, http.StatusTooManyRequests, send(e, http.MethodGet, "/users/2").Code)
			assert.Equal(t, []string{"/users/:id"}, patterns)
		})
	}
}

func TestWithSkipper(t *testing.T) {
	var probe middleware.Skipper = func(c echo.Context) bool { return c.Request().Header.Get("X-Probe") == "1" }
	e := echo.New()
	e.GET("/", ok, limit(t, newLim(t, 1), echomw.WithSkipper(probe)))
	for range 3 {
		w := send(e, http.MethodGet, "/", "X-Probe", "1")
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Empty(t, w.Header().Get("X-RateLimit-Limit"))
	}
	assert.Equal(t, http.StatusOK, send(e, http.MethodGet, "/").Code)
	assert.Equal(t, http.StatusTooManyRequests, send(e, http.MethodGet, "/").Code)
}

func TestLimitPanicsAtConstruction(t *testing.T) {
	assert.PanicsWithError(t, "echomw: Limit: nil limiter", func() { echomw.Limit(nil) })
	assert.PanicsWithError(t, "echomw: WithSkipper: nil function", func() { echomw.WithSkipper(nil) })
	assert.PanicsWithError(t, "nethttp: NewEngine: nil Option", func() { echomw.Limit(newLim(t, 1), nil) })
}
