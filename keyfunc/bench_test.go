package keyfunc_test

import (
	"net/http"
	"testing"

	"github.com/go-ratelimit/ratelimit/keyfunc"
)

func benchKey(b *testing.B, f keyfunc.Func, r *http.Request) {
	b.Helper()
	if _, err := f(r); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := f(r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkIP(b *testing.B) {
	plain := keyfunc.IP()
	trusting := keyfunc.IP(trustedProxies)
	for _, bb := range []struct {
		name string
		f    keyfunc.Func
		r    *http.Request
	}{
		{"peer=ipv4/trust=none", plain, request("203.0.113.7:52000")},
		{"peer=ipv4/trust=none/spoofed=xff", plain, request("203.0.113.7:52000", "X-Forwarded-For", "1.2.3.4")},
		{"peer=ipv4/trust=proxies/untrusted", trusting, request("203.0.113.7:52000", "X-Forwarded-For", "1.2.3.4")},
		{"peer=ipv6/trust=none", plain, request("[2001:db8:1:2::7]:52000")},
		{"peer=proxy/header=xff/hops=1", trusting, request(proxyPeer, "X-Forwarded-For", "1.2.3.4, 203.0.113.7")},
		{"peer=proxy/header=xff/hops=3", trusting, request(proxyPeer, "X-Forwarded-For", "1.2.3.4, 203.0.113.7, 10.0.0.3, 10.0.0.2")},
		{"peer=proxy/header=forwarded/hops=2", trusting, request(proxyPeer, "Forwarded", `for=1.2.3.4, for="203.0.113.7:4711";proto=https, for=10.0.0.2`)},
		{"peer=proxy/header=xrealip", trusting, request(proxyPeer, "X-Real-IP", "203.0.113.7")},
	} {
		b.Run(bb.name, func(b *testing.B) { benchKey(b, bb.f, bb.r) })
	}
}

func BenchmarkHeader(b *testing.B) {
	apiKey := keyfunc.Header("X-API-Key")
	b.Run("present", func(b *testing.B) {
		benchKey(b, apiKey, request("203.0.113.7:52000", "X-API-Key", "k-0123456789abcdef"))
	})
	b.Run("missing", func(b *testing.B) {
		r := request("203.0.113.7:52000")
		b.ReportAllocs()
		for b.Loop() {
			if _, err := apiKey(r); err == nil {
				b.Fatal("want ErrNoKey")
			}
		}
	})
}

func BenchmarkRoute(b *testing.B) {
	r := request("203.0.113.7:52000")
	r.Pattern = "GET /users/{id}"
	benchKey(b, keyfunc.Route(), r)
}

func BenchmarkCanonicalIP(b *testing.B) {
	for _, bb := range []struct{ name, ip string }{
		{"ip=ipv4", "203.0.113.7"},
		{"ip=ipv6", "2001:db8:1:2::7"},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := keyfunc.CanonicalIP(bb.ip); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkJoin(b *testing.B) {
	f := keyfunc.Join(keyfunc.Route(), keyfunc.IP())
	r := request("203.0.113.7:52000")
	r.Pattern = "/users/{id}"
	benchKey(b, f, r)
}
