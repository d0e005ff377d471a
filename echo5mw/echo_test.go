package echo5mw_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/echo5mw"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/nethttp/adaptertest"
)

// ok is the suite's handler, which answers "ok".
var ok = echo.WrapHandler(adaptertest.Handler)

// echoBody is what echo's default HTTPErrorHandler answers an HTTPError with.
func echoBody(status int) (string, string) {
	return `{"message":"` + http.StatusText(status) + `"}` + "\n", echo.MIMEApplicationJSON
}

// onRoute mounts the limit on the route (none for a nil lim).
func onRoute(_ testing.TB, lim core.Limiter, opts ...nethttp.Option) http.Handler {
	e := echo.New()
	if lim == nil {
		e.GET("/items/:id", ok)
		return e
	}
	e.GET("/items/:id", ok, echo5mw.Limit(lim, opts...))
	return e
}

// withUse mounts the limit with e.Use.
func withUse(_ testing.TB, lim core.Limiter, opts ...nethttp.Option) http.Handler {
	e := echo.New()
	if lim != nil {
		e.Use(echo5mw.Limit(lim, opts...))
	}
	e.GET("/items/:id", ok)
	return e
}

func BenchmarkLimit(b *testing.B) { adaptertest.Benchmark(b, adaptertest.Adapter{Mount: onRoute}) }

// TestAdapterSuite runs the shared suite, which sends requests through
// httptest and, in its loopback test, through a real TCP server.
func TestAdapterSuite(t *testing.T) {
	t.Run("on the route", func(t *testing.T) {
		adaptertest.Run(t, adaptertest.Adapter{Mount: onRoute, Body: echoBody})
	})
	t.Run("with e.Use", func(t *testing.T) {
		adaptertest.Run(t, adaptertest.Adapter{Mount: withUse, Body: echoBody})
	})
}

// fixedClock is 54 s into a minute: a fixed window resets in 6 s.
func fixedClock() time.Time { return time.Unix(1_700_000_034, 0) }

func newLim(t *testing.T, limit int64) core.Limiter {
	t.Helper()
	lim, err := core.New(core.FixedWindow(limit, time.Minute), core.WithClock(fixedClock))
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	t.Cleanup(func() { _ = lim.Close() })
	return lim
}

// send sends method path from the peer 192.0.2.1 with header pairs.
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

// want reports an error unless got equals want.
func want[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

func TestErrorHandling(t *testing.T) {
	t.Run("gives a custom HTTPErrorHandler the rejection and its decision", func(t *testing.T) {
		e := echo.New()
		var got *nethttp.Rejection
		e.HTTPErrorHandler = func(c *echo.Context, err error) {
			if errors.As(err, &got) {
				nethttp.ProblemJSON(c.Response(), c.Request(), got.Decision)
			}
		}
		e.GET("/", ok, echo5mw.Limit(newLim(t, 1)))
		send(e, http.MethodGet, "/")
		w := send(e, http.MethodGet, "/")
		if got == nil {
			t.Fatal("the HTTPErrorHandler got no *nethttp.Rejection")
		}
		want(t, "rejection status", got.Status, http.StatusTooManyRequests)
		want(t, "decision limit", got.Decision.Limit, 1)
		want(t, "status", w.Code, http.StatusTooManyRequests)
		want(t, "Content-Type", w.Header().Get("Content-Type"), "application/problem+json")
		want(t, "Retry-After", w.Header().Get("Retry-After"), "6")
		want(t, "X-RateLimit-Remaining", w.Header().Get("X-RateLimit-Remaining"), "0")
	})
	t.Run("writes the answer of WithDenyHandler, which echo then leaves alone", func(t *testing.T) {
		e := echo.New()
		var errs []error
		e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c *echo.Context) error {
				err := next(c)
				errs = append(errs, err)
				return err
			}
		})
		e.GET("/", ok, echo5mw.Limit(newLim(t, 1), nethttp.WithDenyHandler(nethttp.ProblemJSON)))
		send(e, http.MethodGet, "/")
		w := send(e, http.MethodGet, "/")
		want(t, "status", w.Code, http.StatusTooManyRequests)
		want(t, "Content-Type", w.Header().Get("Content-Type"), "application/problem+json")
		if !strings.Contains(w.Body.String(), `"status":429`) || strings.Contains(w.Body.String(), "message") {
			t.Errorf("body: got %q, want ProblemJSON's alone", w.Body.String())
		}
		if len(errs) != 2 {
			t.Fatalf("errors: got %v, want 2", errs)
		}
		want(t, "the admitted request's error", errs[0], nil)
		want(t, "status of the denial's error (loggers still see it)", echo.StatusCode(errs[1]), http.StatusTooManyRequests)
	})
	t.Run("never writes the limiter's error text, even with exposeError", func(t *testing.T) {
		e := echo.New()
		e.HTTPErrorHandler = echo.DefaultHTTPErrorHandler(true)
		secret := errors.New("secret-store-detail")
		e.GET("/", ok, echo5mw.Limit(coretest.Failing{Err: secret, P: core.FixedWindow(1, time.Second)}, nethttp.WithFailClosed()))
		w := send(e, http.MethodGet, "/")
		want(t, "status", w.Code, http.StatusServiceUnavailable)
		want(t, "body", w.Body.String(), `{"error":"echo5mw: Service Unavailable","message":"Service Unavailable"}`+"\n")
	})
	t.Run("unwraps to the cause for logs", func(t *testing.T) {
		e := echo.New()
		secret := errors.New("secret-store-detail")
		var got error
		e.HTTPErrorHandler = func(_ *echo.Context, err error) { got = err }
		e.GET("/", ok, echo5mw.Limit(coretest.Failing{Err: secret, P: core.FixedWindow(1, time.Second)}, nethttp.WithFailClosed()))
		send(e, http.MethodGet, "/")
		if !errors.Is(got, secret) {
			t.Errorf("error: got %v, want one wrapping %v", got, secret)
		}
	})
	t.Run("answers a denied HEAD request without a body", func(t *testing.T) {
		e := echo.New()
		e.HEAD("/", ok, echo5mw.Limit(newLim(t, 1)))
		send(e, http.MethodHead, "/")
		w := send(e, http.MethodHead, "/")
		want(t, "status", w.Code, http.StatusTooManyRequests)
		want(t, "body", w.Body.String(), "")
		want(t, "Retry-After", w.Header().Get("Retry-After"), "6")
	})
}

func TestRoutes(t *testing.T) {
	t.Run("keys on the registered path", func(t *testing.T) {
		var keys []string
		e := echo.New()
		e.Use(echo5mw.Limit(newLim(t, 10), nethttp.WithKeyFunc(func(r *http.Request) (string, error) {
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
		e.Pre(echo5mw.Limit(newLim(t, 10), nethttp.WithKeyFunc(keyfunc.Route())))
		e.GET("/users/:id", ok)
		want(t, "status", send(e, http.MethodGet, "/users/1").Code, http.StatusBadRequest)

		// Nor the pattern of a ServeMux that echo is mounted on.
		mux := http.NewServeMux()
		mux.Handle("/users/", e)
		want(t, "status under a ServeMux", send(mux, http.MethodGet, "/users/1").Code, http.StatusBadRequest)
	})
	t.Run("leaves c.Request() as it was for later handlers", func(t *testing.T) {
		// WithSkipper makes the engine see a copy carrying the echo context.
		e := echo.New()
		var before, after *http.Request
		e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c *echo.Context) error { before = c.Request(); return next(c) }
		})
		h := func(c *echo.Context) error { after = c.Request(); return nil }
		skip := echo5mw.WithSkipper(func(*echo.Context) bool { return false })
		e.GET("/users/:id", h, echo5mw.Limit(newLim(t, 10), skip, nethttp.WithKeyFunc(keyfunc.Route())))
		want(t, "status", send(e, http.MethodGet, "/users/1").Code, http.StatusOK)
		if before == nil || after != before {
			t.Errorf("c.Request(): got %p in the handler, want %p, the one before the middleware", after, before)
		}
	})
	t.Run("limits each route on its own", func(t *testing.T) {
		e := echo.New()
		e.GET("/a", ok, echo5mw.Limit(newLim(t, 2)))
		e.GET("/b", ok, echo5mw.Limit(newLim(t, 1)))
		e.GET("/free", ok)
		var got []int
		for _, path := range []string{"/a", "/a", "/a", "/b", "/b", "/free", "/free"} {
			got = append(got, send(e, http.MethodGet, path).Code)
		}
		if want := []int{200, 200, 429, 200, 429, 200, 200}; !reflect.DeepEqual(got, want) {
			t.Errorf("statuses: got %v, want %v", got, want)
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
			e.GET("/users/:id", ok, echo5mw.Limit(newLim(t, 1), opts...))
			want(t, "first status", send(e, http.MethodGet, "/users/1").Code, http.StatusOK)
			want(t, "second status", send(e, http.MethodGet, "/users/2").Code, http.StatusTooManyRequests)
			if want := []string{"/users/:id"}; !reflect.DeepEqual(patterns, want) {
				t.Errorf("patterns: got %q, want %q", patterns, want)
			}
		})
	}
}

func TestWithSkipper(t *testing.T) {
	var probe middleware.Skipper = func(c *echo.Context) bool { return c.Request().Header.Get("X-Probe") == "1" }
	e := echo.New()
	e.GET("/", ok, echo5mw.Limit(newLim(t, 1), echo5mw.WithSkipper(probe)))
	for range 3 {
		w := send(e, http.MethodGet, "/", "X-Probe", "1")
		want(t, "skipped status", w.Code, http.StatusOK)
		want(t, "skipped X-RateLimit-Limit", w.Header().Get("X-RateLimit-Limit"), "")
	}
	want(t, "status", send(e, http.MethodGet, "/").Code, http.StatusOK)
	want(t, "status", send(e, http.MethodGet, "/").Code, http.StatusTooManyRequests)
}

// wantPanic reports an error unless f panics with an error whose message is msg.
func wantPanic(t *testing.T, msg string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		err, _ := recover().(error)
		if err == nil || err.Error() != msg {
			t.Errorf("panic: got %v, want %q", err, msg)
		}
	}()
	f()
}

func TestPanicsAtConstruction(t *testing.T) {
	wantPanic(t, "echo5mw: Limit: nil limiter", func() { echo5mw.Limit(nil) })
	wantPanic(t, "echo5mw: WithSkipper: nil function", func() { echo5mw.WithSkipper(nil) })
	wantPanic(t, "nethttp: NewEngine: nil Option", func() { echo5mw.Limit(newLim(t, 1), nil) })
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
		{"an HTTPError's code", func(*echo.Context) error { return echo.NewHTTPError(http.StatusServiceUnavailable, "") }, 503},
		{"500 for another error", func(*echo.Context) error { return errors.New("boom") }, 500},
		{"the status written", func(c *echo.Context) error { return c.NoContent(http.StatusTeapot) }, 418},
		{"the status written before an error", func(c *echo.Context) error { _ = c.NoContent(204); return errors.New("late") }, 204},
		{"200 when nothing is written", func(*echo.Context) error { return nil }, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []int
			e := echo.New()
			e.GET("/", c.h, echo5mw.Limit(newLim(t, 10), nethttp.WithFinalCost(func(status int, _ http.Header, charged int64) int64 {
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
		handler func(c *echo.Context, err error)
		want    []int
	}{
		{"the application's HTTPErrorHandler answers its error", nil, func(c *echo.Context, err error) {
			if errors.Is(err, errFailed) {
				c.Response().Header().Set("X-Failed", "1")
				_ = c.String(http.StatusUnauthorized, "wrong password")
			}
		}, []int{http.StatusUnauthorized}},
		{"a middleware before Limit answers", func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c *echo.Context) error {
				if err := next(c); errors.Is(err, errFailed) {
					c.Response().Header().Set("X-Failed", "1")
					return c.NoContent(http.StatusConflict)
				}
				return nil
			}
		}, nil, []int{http.StatusConflict}},
		{"nobody answers", nil, func(*echo.Context, error) {}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []int
			answers := 0
			e := echo.New()
			if c.handler != nil {
				e.HTTPErrorHandler = func(ec *echo.Context, err error) { answers++; c.handler(ec, err) }
			}
			mws := []echo.MiddlewareFunc{echo5mw.Limit(newLim(t, 10), nethttp.WithFinalCost(func(status int, h http.Header, charged int64) int64 {
				if h.Get("X-Failed") != "1" {
					t.Errorf("the function got the header %v, not the answer's", h)
				}
				got = append(got, status)
				return charged
			}))}
			if c.outer != nil {
				mws = append([]echo.MiddlewareFunc{c.outer}, mws...)
			}
			e.GET("/", func(*echo.Context) error { return errFailed }, mws...)
			w := send(e, http.MethodGet, "/")
			if c.want != nil && w.Code != c.want[0] {
				t.Errorf("status: got %d, want %d", w.Code, c.want[0])
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("statuses given to the function: %v, want %v", got, c.want)
			}
			if c.handler != nil && answers != 1 {
				t.Errorf("the HTTPErrorHandler ran %d times, want 1", answers)
			}
		})
	}
}
