package ginmw_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/ginmw"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/nethttp/adaptertest"
)

func BenchmarkClientIP(b *testing.B) {
	lim, err := core.New(adaptertest.BenchmarkPolicy)
	require.NoError(b, err)
	b.Cleanup(func() { _ = lim.Close() })
	r := gin.New()
	require.NoError(b, r.SetTrustedProxies([]string{"10.0.0.0/8"}))
	mw, err := ginmw.Limit(lim, nethttp.WithKeyFunc(ginmw.ClientIP()))
	require.NoError(b, err)
	r.GET("/items/:id", mw, ok)
	for _, bc := range []struct{ name, xff string }{{"client=ipv4", "203.0.113.7"}, {"client=ipv6", "2001:db8::7"}} {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/items/1", nil)
			req.RemoteAddr = "10.0.0.1:1234"
			req.Header.Set("X-Forwarded-For", bc.xff)
			w := adaptertest.NewDiscardWriter()
			b.ReportAllocs()
			for b.Loop() {
				w.Reset()
				r.ServeHTTP(w, req)
			}
			w.Check(b)
		})
	}
}
