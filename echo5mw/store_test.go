package echo5mw_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/core/coretest"
	"github.com/go-ratelimit/ratelimit/echo5mw"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// echoLimited serves GET / through echo's own rate limiter over store,
// configured by cfg (whose Store it sets).
func echoLimited(store middleware.RateLimiterStore, cfg middleware.RateLimiterConfig) *echo.Echo {
	cfg.Store = store
	e := echo.New()
	e.GET("/", ok, middleware.RateLimiterWithConfig(cfg))
	return e
}

// passErr is the DenyHandler that answers a refusal as Limit does.
func passErr(_ *echo.Context, _ string, err error) error { return err }

// rateHeaders returns the rate-limit fields of w, "" for those not set.
func rateHeaders(w *httptest.ResponseRecorder) [4]string {
	h := w.Header()
	return [4]string{h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset"), h.Get("Retry-After")}
}

func TestStoreWithEchosRateLimiter(t *testing.T) {
	t.Run("admits exactly the limit per identifier, with our headers", func(t *testing.T) {
		e := echoLimited(echo5mw.NewStore(newLim(t, 3)), middleware.RateLimiterConfig{})
		for i, want := range [][4]string{{"3", "2", "6", ""}, {"3", "1", "6", ""}, {"3", "0", "6", ""}} {
			w := send(e, http.MethodGet, "/")
			if w.Code != http.StatusOK || rateHeaders(w) != want {
				t.Fatalf("request %d: got %d %q, want 200 %q", i+1, w.Code, rateHeaders(w), want)
			}
		}
		w := send(e, http.MethodGet, "/")
		want(t, "status", w.Code, http.StatusTooManyRequests)
		want(t, "body (echo's DenyHandler)", w.Body.String(), `{"message":"rate limit exceeded"}`+"\n")
		want(t, "headers", rateHeaders(w), [4]string{"3", "0", "6", "6"})

		// echo's default IdentifierExtractor, c.RealIP(), is the peer.
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "192.0.2.2:1234"
		r.Header.Set("X-Forwarded-For", "192.0.2.1")
		w = httptest.NewRecorder()
		e.ServeHTTP(w, r)
		want(t, "another peer's status", w.Code, http.StatusOK)
		want(t, "another peer's headers", rateHeaders(w), [4]string{"3", "2", "6", ""})
	})
	t.Run("writes the header style of the options", func(t *testing.T) {
		lim := core.MustNew(core.FixedWindow(1, time.Minute).WithName("per-ip"), core.WithClock(fixedClock))
		t.Cleanup(func() { _ = lim.Close() })
		e := echoLimited(echo5mw.NewStore(lim, nethttp.WithHeaderStyle(nethttp.HeadersIETF)), middleware.RateLimiterConfig{})
		send(e, http.MethodGet, "/")
		w := send(e, http.MethodGet, "/")
		want(t, "status", w.Code, http.StatusTooManyRequests)
		want(t, "RateLimit-Policy", w.Header().Get("RateLimit-Policy"), `"per-ip";q=1;w=60`)
		want(t, "RateLimit", w.Header().Get("RateLimit"), `"per-ip";r=0;t=6`)
		want(t, "X-RateLimit-Limit", w.Header().Get("X-RateLimit-Limit"), "")
	})
	t.Run("gives the DenyHandler the identifier and an error that answers as Limit", func(t *testing.T) {
		var ids []string
		var rej *nethttp.Rejection
		deny := func(c *echo.Context, id string, err error) error {
			ids = append(ids, id)
			if !errors.As(err, &rej) {
				t.Errorf("DenyHandler: got %v, want an error unwrapping to a *nethttp.Rejection", err)
			}
			return err
		}
		e := echoLimited(echo5mw.NewStore(newLim(t, 1)), middleware.RateLimiterConfig{DenyHandler: deny})
		send(e, http.MethodGet, "/")
		w := send(e, http.MethodGet, "/")
		want(t, "status", w.Code, http.StatusTooManyRequests)
		want(t, "body", w.Body.String(), `{"message":"Too Many Requests"}`+"\n")
		if !reflect.DeepEqual(ids, []string{"192.0.2.1"}) || rej == nil {
			t.Fatalf("DenyHandler calls: got %q, want one for 192.0.2.1", ids)
		}
		want(t, "Rejection.Status", rej.Status, http.StatusTooManyRequests)
		want(t, "Rejection.Decision.Remaining", rej.Decision.Remaining, 0)
		want(t, "Rejection.Decision.RetryAfter", rej.Decision.RetryAfter, 6*time.Second)
	})
	t.Run("leaves IdentifierExtractor's errors to the ErrorHandler, uncounted", func(t *testing.T) {
		lim := newLim(t, 1)
		e := echoLimited(echo5mw.NewStore(lim), middleware.RateLimiterConfig{
			IdentifierExtractor: func(c *echo.Context) (string, error) {
				if k := c.Request().Header.Get("X-API-Key"); k != "" {
					return k, nil
				}
				return "", errors.New("no key")
			},
		})
		want(t, "status without a key", send(e, http.MethodGet, "/").Code, http.StatusForbidden) // echo's ErrExtractorError
		want(t, "status", send(e, http.MethodGet, "/", "X-API-Key", "a").Code, http.StatusOK)
		want(t, "status", send(e, http.MethodGet, "/", "X-API-Key", "a").Code, http.StatusTooManyRequests)
		want(t, "status of another key", send(e, http.MethodGet, "/", "X-API-Key", "b").Code, http.StatusOK)
	})
	t.Run("refuses an empty identifier unless a key fallback is given", func(t *testing.T) {
		empty := middleware.RateLimiterConfig{
			IdentifierExtractor: func(*echo.Context) (string, error) { return "", nil },
			DenyHandler:         passErr,
		}
		e := echoLimited(echo5mw.NewStore(newLim(t, 1)), empty)
		want(t, "status", send(e, http.MethodGet, "/").Code, http.StatusBadRequest)

		e = echoLimited(echo5mw.NewStore(newLim(t, 1), nethttp.WithKeyFallback(keyfunc.IP())), empty)
		want(t, "status with the fallback", send(e, http.MethodGet, "/").Code, http.StatusOK)
		want(t, "status with the fallback", send(e, http.MethodGet, "/").Code, http.StatusTooManyRequests)
	})
	t.Run("keys on the identifier, whatever key function the options give", func(t *testing.T) {
		store := echo5mw.NewStore(newLim(t, 1), nethttp.WithKeyFunc(keyfunc.Header("X-API-Key")))
		e := echoLimited(store, middleware.RateLimiterConfig{})
		want(t, "status", send(e, http.MethodGet, "/", "X-API-Key", "a").Code, http.StatusOK)
		want(t, "status of another API key, same peer", send(e, http.MethodGet, "/", "X-API-Key", "b").Code, http.StatusTooManyRequests)
	})
	t.Run("passes the identifier to hooks as the key", func(t *testing.T) {
		var events []nethttp.Event
		hook := nethttp.WithHook(func(ev nethttp.Event) { events = append(events, ev) })
		e := echoLimited(echo5mw.NewStore(newLim(t, 1), hook), middleware.RateLimiterConfig{})
		send(e, http.MethodGet, "/")
		send(e, http.MethodGet, "/")
		if len(events) != 2 {
			t.Fatalf("events: got %d, want 2", len(events))
		}
		for i, o := range []nethttp.Outcome{nethttp.OutcomeAllowed, nethttp.OutcomeDenied} {
			want(t, "outcome", events[i].Outcome, o)
			want(t, "key", events[i].Key, "192.0.2.1")
			want(t, "route", events[i].Request.Pattern, "/")
		}
	})
}

func TestStoreFailures(t *testing.T) {
	secret := errors.New("secret-store-detail")
	broken := coretest.Failing{Err: secret, P: core.FixedWindow(7, time.Second)}
	// extractorErrs counts the ErrorHandler's calls, which a store failure
	// never makes.
	extractorErrs := 0
	cfg := func(deny func(*echo.Context, string, error) error) middleware.RateLimiterConfig {
		return middleware.RateLimiterConfig{
			DenyHandler:  deny,
			ErrorHandler: func(*echo.Context, error) error { extractorErrs++; return nil },
		}
	}

	t.Run("serves by default, with the known limit only", func(t *testing.T) {
		var events []nethttp.Event
		hook := nethttp.WithHook(func(ev nethttp.Event) { events = append(events, ev) })
		w := send(echoLimited(echo5mw.NewStore(broken, hook), cfg(nil)), http.MethodGet, "/")
		want(t, "status", w.Code, http.StatusOK)
		want(t, "headers", rateHeaders(w), [4]string{"7", "", "", ""})
		if len(events) != 1 || events[0].Outcome != nethttp.OutcomeFailedOpen || !errors.Is(events[0].Err, secret) {
			t.Errorf("events: got %v, want one failed-open event with the cause", events)
		}
	})
	t.Run("is refused under WithFailClosed, 429 by echo's DenyHandler", func(t *testing.T) {
		w := send(echoLimited(echo5mw.NewStore(broken, nethttp.WithFailClosed()), cfg(nil)), http.MethodGet, "/")
		want(t, "status", w.Code, http.StatusTooManyRequests)
		want(t, "body", w.Body.String(), `{"message":"rate limit exceeded"}`+"\n")
		want(t, "headers", rateHeaders(w), [4]string{"7", "", "", ""})
	})
	t.Run("is refused under WithFailClosed, 503 by a DenyHandler returning err", func(t *testing.T) {
		e := echoLimited(echo5mw.NewStore(broken, nethttp.WithFailClosed()), cfg(passErr))
		e.HTTPErrorHandler = echo.DefaultHTTPErrorHandler(true)
		w := send(e, http.MethodGet, "/")
		want(t, "status", w.Code, http.StatusServiceUnavailable)
		want(t, "body", w.Body.String(), `{"error":"echo5mw: Service Unavailable","message":"Service Unavailable"}`+"\n")
	})
	t.Run("is refused after the limiter's Close, whatever the failure policy", func(t *testing.T) {
		lim := core.MustNew(core.FixedWindow(1, time.Minute))
		_ = lim.Close()
		w := send(echoLimited(echo5mw.NewStore(lim), cfg(passErr)), http.MethodGet, "/")
		want(t, "status", w.Code, http.StatusServiceUnavailable)
	})
	want(t, "ErrorHandler calls", extractorErrs, 0)
}

func TestStoreAllow(t *testing.T) {
	store := echo5mw.NewStore(newLim(t, 2))
	for i, id := range []string{"a", "a", "b"} {
		if ok, err := store.Allow(id); !ok || err != nil {
			t.Fatalf("Allow %d (%q): got %v, %v, want true, nil", i+1, id, ok, err)
		}
	}
	ok, err := store.Allow("a")
	var rej *nethttp.Rejection
	if ok || !errors.As(err, &rej) || rej.Status != http.StatusTooManyRequests {
		t.Fatalf("the third Allow of a: got %v, %v, want false and a 429 rejection", ok, err)
	}
	want(t, "status of the error", echo.StatusCode(err), http.StatusTooManyRequests)
	want(t, "error text", err.Error(), "code=429, message=Too Many Requests, err=echo5mw: Too Many Requests")
	if ok, err := store.Allow(""); ok || echo.StatusCode(err) != http.StatusBadRequest || !errors.Is(err, keyfunc.ErrNoKey) {
		t.Errorf(`Allow(""): got %v, %v, want false and a 400 wrapping keyfunc.ErrNoKey`, ok, err)
	}
}

// TestStoreOverLoopback runs echo's rate limiter over a Store behind a real
// TCP server: concurrent clients get exactly the limit.
func TestStoreOverLoopback(t *testing.T) {
	const limit, clients, perClient = 50, 10, 10
	srv := httptest.NewServer(echoLimited(echo5mw.NewStore(newLim(t, limit)), middleware.RateLimiterConfig{}))
	defer srv.Close()
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for range perClient {
				resp, err := srv.Client().Get(srv.URL + "/")
				if err != nil {
					t.Error(err)
					return
				}
				_ = resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				if h := resp.Header.Get("X-RateLimit-Limit"); h != "50" {
					t.Errorf("X-RateLimit-Limit: got %q, want 50", h)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if want := map[int]int{http.StatusOK: limit, http.StatusTooManyRequests: clients*perClient - limit}; !reflect.DeepEqual(codes, want) {
		t.Errorf("codes: got %v, want %v", codes, want)
	}
}

func TestNewStorePanics(t *testing.T) {
	wantPanic(t, "echo5mw: NewStore: nil limiter", func() { echo5mw.NewStore(nil) })
	wantPanic(t, "nethttp: NewEngine: nil Option", func() { echo5mw.NewStore(newLim(t, 1), nil) })
}
