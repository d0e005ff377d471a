package keyfunc_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-ratelimit/ratelimit/keyfunc"
)

// request builds a GET request from remote (its RemoteAddr) with the given
// header lines, as name, value pairs; a repeated name adds another line.
func request(remote string, header ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	return r
}

// mustKey calls f and stops the test if it fails.
func mustKey(t testing.TB, f keyfunc.Func, r *http.Request) string {
	t.Helper()
	key, err := f(r)
	if err != nil {
		t.Fatalf("key of %s %q: %v", r.RemoteAddr, r.Header, err)
	}
	return key
}

// wantKey checks that f keys r as want.
func wantKey(t testing.TB, f keyfunc.Func, r *http.Request, want string) {
	t.Helper()
	if got := mustKey(t, f, r); got != want {
		t.Errorf("key of %s %q: got %q, want %q", r.RemoteAddr, r.Header, got, want)
	}
}

// wantNoKey checks that a Func's answer is no key: an empty key and an
// error wrapping ErrNoKey.
func wantNoKey(t testing.TB, key string, err error) {
	t.Helper()
	if !errors.Is(err, keyfunc.ErrNoKey) {
		t.Errorf("error: got %v, want one wrapping ErrNoKey", err)
	}
	if key != "" {
		t.Errorf("key: got %q, want none", key)
	}
}

// panicError calls f and returns the error it panics with: configuration
// mistakes panic at construction. It stops the test if f does not panic
// with an error.
func panicError(t testing.TB, f func()) (err error) {
	t.Helper()
	defer func() {
		t.Helper()
		v := recover()
		if v == nil {
			t.Fatal("no panic")
		}
		var ok bool
		if err, ok = v.(error); !ok {
			t.Fatalf("panicked with %T %v, not an error", v, v)
		}
	}()
	f()
	return nil
}

// The trust set most tests use: proxies live in 10.0.0.0/8 and fd00::/8,
// clients in the documentation ranges.
var trustedProxies = keyfunc.TrustProxies("10.0.0.0/8", "fd00::/8")

const (
	proxyPeer = "10.0.0.1:34567" // a trusted proxy as the TCP peer
	proxyKey  = "10.0.0.1"
	client    = "203.0.113.7"
)
