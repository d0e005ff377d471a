package echo5mw

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

// Store is a [middleware.RateLimiterStore] over a [core.Limiter], for
// programs that keep echo's own rate limiter (middleware.RateLimiter,
// middleware.RateLimiterWithConfig) and its IdentifierExtractor, Skipper and
// handlers:
//
//	store := echo5mw.NewStore(lim)
//	e.Use(middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{Store: store}))
//
// echo calls [Store.AllowContext], which decides the request as [Limit]
// does, with the identifier as its key, and sets the same rate-limit header
// fields (X-RateLimit-*, Retry-After on a denial) on the response.
//
// AllowContext returns (true, nil) when the request is to be served, and
// otherwise false with the error Limit would return: an *echo.HTTPError
// with the status nethttp would answer (429 denied, 503 limiter failure
// under nethttp.WithFailClosed or after lim.Close, 503 request canceled,
// 500 cost error, 400 for an empty identifier) that unwraps to the
// *[nethttp.Rejection] and never carries the limiter's error text. echo
// passes it to RateLimiterConfig.DenyHandler. echo's default DenyHandler
// answers every refusal 429 {"message":"rate limit exceeded"}, a store
// failure under WithFailClosed included; a DenyHandler that returns err
// answers as Limit does (see the example). RateLimiterConfig.ErrorHandler
// sees only IdentifierExtractor's errors, never the store's.
//
// A limiter failure fails open by default: (true, nil), the request is
// served with X-RateLimit-Limit only, and echo drops any error returned with
// true, so a failure reaches a program only through nethttp.WithHook (such
// as nethttp/sloghook).
//
// opts are nethttp's options. The identifier is the key, as given: with
// echo's default IdentifierExtractor, c.RealIP(), an IPv6 client is counted
// per address, not per /64 as [keyfunc.IP] counts it. A key function given
// with nethttp.WithKeyFunc is not used, and nethttp.WithKeyFallback gives
// the key of a request whose identifier is empty. Echo's DenyHandler
// answers in place of nethttp.WithDenyHandler and WithKeyErrorHandler, which
// are not called. nethttp.WithFinalCost settles nothing here (echo's rate
// limiter gives the store no response): settle costs with [Limit]. A Store
// is safe for concurrent use.
type Store struct{ e *nethttp.Engine }

var (
	_ middleware.RateLimiterStore        = (*Store)(nil)
	_ middleware.RateLimiterStoreContext = (*Store)(nil)
)

// NewStore returns a Store deciding with lim. It panics as [Limit] does.
func NewStore(lim core.Limiter, opts ...nethttp.Option) *Store {
	if lim == nil {
		panic(errors.New("echo5mw: NewStore: nil limiter"))
	}
	// The identifier's key function goes last, so that it is the one used.
	opts = append(opts[:len(opts):len(opts)], nethttp.WithKeyFunc(identifierKey))
	return &Store{e: nethttp.NewEngine(lim, opts...)}
}

// AllowContext decides the request of c under identifier and sets its
// rate-limit header fields on c.Response(), as [Store] describes: it
// implements [middleware.RateLimiterStoreContext], which echo's rate
// limiter calls.
func (s *Store) AllowContext(c *echo.Context, identifier string) (bool, error) {
	return s.allow(c.Response(), engineRequest(c, identifier))
}

// Allow decides a request of identifier as AllowContext does, for a caller
// without an echo context (echo's rate limiter calls AllowContext): the
// functions of the options see a GET / request with no header fields, and
// the rate-limit fields are written nowhere.
func (s *Store) Allow(identifier string) (bool, error) {
	r, err := http.NewRequestWithContext(&requestContext{Context: context.Background(), id: identifier}, http.MethodGet, "/", nil)
	if err != nil { // cannot happen: a valid method and URL
		return false, err
	}
	return s.allow(noResponse{http.Header{}}, r)
}

func (s *Store) allow(w http.ResponseWriter, r *http.Request) (bool, error) {
	if rej := s.e.Check(w, r, nil); rej != nil {
		return false, httpError(rej)
	}
	return true, nil
}

var errEmptyIdentifier = fmt.Errorf("%w: echo's rate limiter gave an empty identifier", keyfunc.ErrNoKey)

// identifierKey is a Store's key function: the identifier echo gave.
func identifierKey(r *http.Request) (string, error) {
	rc := fromRequest(r)
	if rc == nil || rc.id == "" {
		return "", errEmptyIdentifier
	}
	return rc.id, nil
}

// noResponse is the writer of Allow, which has no response to write to.
type noResponse struct{ h http.Header }

func (n noResponse) Header() http.Header       { return n.h }
func (noResponse) Write(b []byte) (int, error) { return len(b), nil }
func (noResponse) WriteHeader(int)             {}
