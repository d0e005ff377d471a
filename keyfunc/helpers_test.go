package keyfunc_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-ratelimit/ratelimit/internal/testkit/require"

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

// mustKey calls f and requires it to succeed.
func mustKey(t testing.TB, f keyfunc.Func, r *http.Request) string {
	t.Helper()
	key, err := f(r)
	require.NoError(t, err)
	return key
}

// newIP builds an IP Func; invalid options panic.
func newIP(_ testing.TB, opts ...keyfunc.IPOption) keyfunc.Func {
	return keyfunc.IP(opts...)
}

// panicError calls f, requires it to panic with an error, and returns that
// error: configuration mistakes panic at construction.
func panicError(t testing.TB, f func()) (err error) {
	t.Helper()
	defer func() {
		t.Helper()
		v := recover()
		require.NotNil(t, v, "no panic")
		var ok bool
		err, ok = v.(error)
		require.True(t, ok, "panicked with %T %v, not an error", v, v)
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
