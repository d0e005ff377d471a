package nethttp_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/nethttp/adaptertest"
)

// TestAdapterSuite runs the suite every adapter passes, on a ServeMux with
// the middleware around one registered handler (where Request.Pattern, and so
// keyfunc.Route, is set).
func TestAdapterSuite(t *testing.T) {
	adaptertest.Run(t, adaptertest.Adapter{
		Mount: func(t testing.TB, lim core.Limiter, opts ...nethttp.Option) http.Handler {
			mw, err := nethttp.Middleware(lim, opts...)
			require.NoError(t, err)
			mux := http.NewServeMux()
			mux.Handle("GET /items/{id}", mw(ok))
			return mux
		},
	})
}
