package echomw_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/echomw"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/nethttp/adaptertest"
)

func TestMain(m *testing.M) { adaptertest.VerifyTestMain(m) }

// ok is the suite's handler, which answers "ok".
var ok = echo.WrapHandler(adaptertest.Handler)

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
		if got == nil {
			t.Fatal("the error handler got no *nethttp.Rejection")
		}
		if got.Status != http.StatusTooManyRequests || got.Decision.Limit != 1 {
			t.Errorf("rejection: got status %d, limit %d; want %d, 1", got.Status, got.Decision.Limit, http.StatusTooManyRequests)
		}
		wantCode(t, w, http.StatusTooManyRequests)
		if got := w.Header().Get("Content-Type"); got != "application/problem+json" {
			t.Errorf("Content-Type: got %q, want %q", got, "application/problem+json")
		}
		if got := w.Header().Get("Retry-After"); got != "6" {
			t.Errorf("Retry-After: got %q, want %q", got, "6")
		}
		if got := w.Header().Get("X-RateLimit-Remaining"); got != "0" {
			t.Errorf("X-RateLimit-Remaining: got %q, want %q", got, "0")
		}
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
		wantCode(t, w, http.StatusTooManyRequests)
		if got := w.Header().Get("Content-Type"); got != "application/problem+json" {
			t.Errorf("Content-Type: got %q, want %q", got, "application/problem+json")
		}
		if body := w.Body.String(); !strings.Contains(body, `"status":429`) {
			t.Errorf("body: got %q, want the problem JSON of a 429", body)
		}
		if len(errs) != 2 || errs[0] != nil {
			t.Fatalf("errors returned: got %v, want nil and then the denial", errs)
		}
		var he *echo.HTTPError
		if !errors.As(errs[1], &he) || he.Code != http.StatusTooManyRequests {
			t.Errorf("got %v, want an *echo.HTTPError 429: the denial still reaches echo's error path, for loggers", errs[1])
		}
	})
	t.Run("never writes the limiter's error text, even in Debug mode", func(t *testing.T) {
		e := echo.New()
		e.Debug = true
		secret := errors.New("secret-store-detail")
		e.GET("/", ok, limit(t, coretest.Failing{Err: secret, P: core.FixedWindow(1, time.Second)}, nethttp.WithFailClosed()))
		w := send(e, http.MethodGet, "/")
		wantCode(t, w, http.StatusServiceUnavailable)
		var body map[string]string
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("body %q: %v", w.Body.String(), err)
		}
		want := map[string]string{"message": "Service Unavailable", "error": "code=503, message=Service Unavailable, internal=echomw: Service Unavailable"}
		if !reflect.DeepEqual(body, want) {
			t.Errorf("body: got %q, want %q (no secret)", body, want)
		}
	})
	t.Run("unwraps to the cause for logs", func(t *testing.T) {
		e := echo.New()
		secret := errors.New("secret-store-detail")
		var got error
		e.HTTPErrorHandler = func(err error, _ echo.Context) { got = err }
		e.GET("/", ok, limit(t, coretest.Failing{Err: secret, P: core.FixedWindow(1, time.Second)}, nethttp.WithFailClosed()))
		send(e, http.MethodGet, "/")
		if !errors.Is(got, secret) {
			t.Errorf("got %v, want it to wrap %v", got, secret)
		}
	})
	t.Run("answers a denied HEAD request without a body", func(t *testing.T) {
		e := echo.New()
		e.HEAD("/", ok, limit(t, newLim(t, 1)))
		send(e, http.MethodHead, "/")
		w := send(e, http.MethodHead, "/")
		wantCode(t, w, http.StatusTooManyRequests)
		if w.Body.Len() != 0 {
			t.Errorf("body: got %q, want none", w.Body.String())
		}
		if got := w.Header().Get("Retry-After"); got != "6" {
			t.Errorf("Retry-After: got %q, want %q", got, "6")
		}
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
		if want := []string{"/users/:id", "/users/:id"}; !reflect.DeepEqual(keys, want) {
			t.Errorf("keys: got %q, want %q", keys, want)
		}
	})
	t.Run("has no route in e.Pre, which runs before routing", func(t *testing.T) {
		e := echo.New()
		e.Pre(limit(t, newLim(t, 10), nethttp.WithKeyFunc(keyfunc.Route())))
		e.GET("/users/:id", ok)
		wantCode(t, send(e, http.MethodGet, "/users/1"), http.StatusBadRequest)
	})
	t.Run("leaves c.Request() as it was for later handlers", func(t *testing.T) {
		e := echo.New()
		var pattern string
		e.GET("/users/:id", func(c echo.Context) error { pattern = c.Request().Pattern; return nil }, limit(t, newLim(t, 10)))
		send(e, http.MethodGet, "/users/1")
		if pattern != "" {
			t.Errorf("c.Request().Pattern: got %q, want it empty", pattern)
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
			e := echo.New()
			e.GET("/users/:id", ok, limit(t, newLim(t, 1), opts...))
			wantCode(t, send(e, http.MethodGet, "/users/1"), http.StatusOK)
			wantCode(t, send(e, http.MethodGet, "/users/2"), http.StatusTooManyRequests)
			if want := []string{"/users/:id"}; !reflect.DeepEqual(patterns, want) {
				t.Errorf("patterns: got %q, want %q", patterns, want)
			}
		})
	}
}

func TestWithSkipper(t *testing.T) {
	var probe middleware.Skipper = func(c echo.Context) bool { return c.Request().Header.Get("X-Probe") == "1" }
	e := echo.New()
	e.GET("/", ok, limit(t, newLim(t, 1), echomw.WithSkipper(probe)))
	for range 3 {
		w := send(e, http.MethodGet, "/", "X-Probe", "1")
		wantCode(t, w, http.StatusOK)
		if got := w.Header().Get("X-RateLimit-Limit"); got != "" {
			t.Errorf("X-RateLimit-Limit: got %q, want none", got)
		}
	}
	wantCode(t, send(e, http.MethodGet, "/"), http.StatusOK)
	wantCode(t, send(e, http.MethodGet, "/"), http.StatusTooManyRequests)
}

func TestLimitPanicsAtConstruction(t *testing.T) {
	wantPanic(t, "echomw: Limit: nil limiter", func() { echomw.Limit(nil) })
	wantPanic(t, "echomw: WithSkipper: nil function", func() { echomw.WithSkipper(nil) })
	wantPanic(t, "nethttp: NewEngine: nil Option", func() { echomw.Limit(newLim(t, 1), nil) })
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

// TestFinalCostGetsTheStatusOfAnError: echo's HTTPErrorHandler answers a
// handler's error after the middleware has returned, so the status the
// function of WithFinalCost gets is the one it will answer with.
func TestFinalCostGetsTheStatusOfAnError(t *testing.T) {
	for _, c := range []struct {
		name string
		h    echo.HandlerFunc
		want int
	}{
		{"an HTTPError's code", func(echo.Context) error { return echo.NewHTTPError(http.StatusServiceUnavailable) }, 503},
		{"500 for another error", func(echo.Context) error { return errors.New("boom") }, 500},
		{"the status written", func(c echo.Context) error { return c.NoContent(http.StatusTeapot) }, 418},
		{"the status written before an error", func(c echo.Context) error { _ = c.NoContent(204); return errors.New("late") }, 204},
		{"200 when nothing is written", func(echo.Context) error { return nil }, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []int
			e := echo.New()
			e.GET("/", c.h, limit(t, newLim(t, 10), nethttp.WithFinalCost(func(status int, _ http.Header, charged int64) int64 {
				got = append(got, status)
				return charged
			})))
			send(e, http.MethodGet, "/")
			if !reflect.DeepEqual(got, []int{c.want}) {
				t.Errorf("statuses: got %v, want [%d]", got, c.want)
			}
		})
	}
}

// TestFinalCostGetsTheAnswerToAnError: an error the handler returns is
// answered after the middleware has returned, by whoever answers it: the
// function of WithFinalCost gets that answer's status and header, once,
// and the error is answered once. An error nobody answers is not settled.
func TestFinalCostGetsTheAnswerToAnError(t *testing.T) {
	errFailed := errors.New("failed")
	for _, c := range []struct {
		name    string
		outer   echo.MiddlewareFunc // before Limit, or nil
		handler func(err error, c echo.Context)
		want    []int
	}{
		{"a middleware before Limit answers", func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				if err := next(c); errors.Is(err, errFailed) {
					c.Response().Header().Set("X-Failed", "1")
					return c.NoContent(http.StatusConflict)
				}
				return nil
			}
		}, nil, []int{http.StatusConflict}},
		{"the HTTPErrorHandler answers without a body", nil, func(_ error, c echo.Context) {
			c.Response().Header().Set("X-Failed", "1")
			_ = c.NoContent(http.StatusUnauthorized)
		}, []int{http.StatusUnauthorized}},
		{"nobody answers", nil, func(error, echo.Context) {}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []int
			answers := 0
			e := echo.New()
			if c.handler != nil {
				e.HTTPErrorHandler = func(err error, ec echo.Context) { answers++; c.handler(err, ec) }
			}
			mws := []echo.MiddlewareFunc{limit(t, newLim(t, 10), nethttp.WithFinalCost(func(status int, h http.Header, charged int64) int64 {
				if h.Get("X-Failed") != "1" {
					t.Errorf("the function got the header %v, not the answer's", h)
				}
				got = append(got, status)
				return charged
			}))}
			if c.outer != nil {
				mws = append([]echo.MiddlewareFunc{c.outer}, mws...)
			}
			e.GET("/", func(echo.Context) error { return errFailed }, mws...)
			send(e, http.MethodGet, "/")
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("statuses given to the function: %v, want %v", got, c.want)
			}
			if c.handler != nil && answers != 1 {
				t.Errorf("the HTTPErrorHandler ran %d times, want 1", answers)
			}
		})
	}
}
