package keyfunc_test

import (
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/go-ratelimit/ratelimit/keyfunc"
)

// The default key is the TCP peer, in canonical form.
func ExampleIP() {
	ip := keyfunc.IP()
	for _, peer := range []string{"192.0.2.1:52000", "[::ffff:192.0.2.1]:52001", "[2001:db8:1:2::7]:52002"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = peer
		key, _ := ip(r)
		fmt.Println(key)
	}
	// Output:
	// 192.0.2.1
	// 192.0.2.1
	// 2001:db8:1:2::/64
}

// A client that makes up forwarding headers is still counted under its own
// address: without TrustProxies no header is read, and with it only headers
// from the trusted proxies are.
func ExampleIP_spoofedHeaderIgnored() {
	ip := keyfunc.IP(keyfunc.TrustProxies("10.0.0.0/8"))
	r := httptest.NewRequest(http.MethodGet, "/login", nil)
	r.RemoteAddr = "203.0.113.7:52000" // connects directly, not through a proxy
	r.Header.Set("X-Forwarded-For", "1.2.3.4")
	r.Header.Set("X-Real-IP", "1.2.3.4")
	r.Header.Set("True-Client-IP", "1.2.3.4")
	key, _ := ip(r)
	fmt.Println(key)
	// Output: 203.0.113.7
}

// Behind proxies, trust them by prefix. The chain is walked from the right:
// the proxies' own hops are skipped, and what the client wrote to the left
// of its real address is never read.
func ExampleTrustProxies() {
	ip := keyfunc.IP(keyfunc.TrustProxies("10.0.0.0/8", "fd00::/8"))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.1:443" // the load balancer
	// The client sent "X-Forwarded-For: 1.2.3.4"; an edge proxy appended the
	// client's real address, then an inner proxy (10.0.0.2) appended the edge's.
	r.Header.Set("X-Forwarded-For", "1.2.3.4, 203.0.113.7, 10.0.0.2")
	key, _ := ip(r)
	fmt.Println(key)

	// Output:
	// 203.0.113.7
}

// Prefixes read from configuration are parsed with ParseTrustedProxies,
// which returns an error where TrustProxies, for literals, panics.
func ExampleParseTrustedProxies() {
	trusted, err := keyfunc.ParseTrustedProxies("10.0.0.0/8", "fd00::/8")
	if err != nil {
		log.Fatal(err)
	}
	ip := keyfunc.IP(trusted)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.1:443"
	r.Header.Set("X-Forwarded-For", "203.0.113.7")
	key, _ := ip(r)
	fmt.Println(key)

	_, err = keyfunc.ParseTrustedProxies("10.0.0.0/33")
	fmt.Println(err)
	// Output:
	// 203.0.113.7
	// keyfunc: ParseTrustedProxies: "10.0.0.0/33" is not a CIDR prefix or IP address
}

// When the proxy maintains a header other than X-Forwarded-For, name it, so
// that an X-Forwarded-For the client sends through the proxy is not read.
func ExampleFromHeaders() {
	ip := keyfunc.IP(keyfunc.TrustProxies("10.0.0.0/8"), keyfunc.FromHeaders("X-Real-IP"))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.1:443"
	r.Header.Set("X-Forwarded-For", "1.2.3.4") // from the client, passed through
	r.Header.Set("X-Real-IP", "203.0.113.7")   // set by the proxy
	key, _ := ip(r)
	fmt.Println(key)
	// Output: 203.0.113.7
}

// An IPv6 client is counted by its prefix, /64 unless IPv6Prefix says
// otherwise.
func ExampleIPv6Prefix() {
	ip := keyfunc.IP(keyfunc.IPv6Prefix(56))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "[2001:db8:1:2ff::7]:52000"
	key, _ := ip(r)
	fmt.Println(key)
	// Output: 2001:db8:1:200::/56
}

// Per API key; a request without one is an ErrNoKey for the adapter's
// key-error policy.
func ExampleHeader() {
	apiKey := keyfunc.Header("X-API-Key")
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-API-Key", "k-123")
	key, _ := apiKey(r)
	fmt.Println(key)

	_, err := apiKey(httptest.NewRequest(http.MethodGet, "/", nil))
	fmt.Println(errors.Is(err, keyfunc.ErrNoKey), err)
	// Output:
	// k-123
	// true keyfunc: no key in request: header X-Api-Key is missing or empty
}

// Route keys on the pattern, never the path, so /users/1 and /users/2 share
// a limit. Under net/http the pattern is set inside handlers registered on a
// ServeMux; router adapters set Request.Pattern to their router's pattern.
func ExampleRoute() {
	route := keyfunc.Route()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /users/{id}", func(w http.ResponseWriter, r *http.Request) {
		key, _ := route(r)
		fmt.Println(key)
	})
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/users/1", nil))
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/users/2", nil))
	// Output:
	// GET /users/{id}
	// GET /users/{id}
}

// Join combines keys with length-prefixed parts: one limit per route per
// client. Static namespaces keys when one limiter counts several kinds.
func ExampleJoin() {
	perRouteIP := keyfunc.Join(keyfunc.Route(), keyfunc.IP())
	r := httptest.NewRequest(http.MethodPost, "/login", nil)
	r.Pattern = "/login" // as a router sets it
	r.RemoteAddr = "203.0.113.7:52000"
	key, _ := perRouteIP(r)
	fmt.Println(key)

	ipOnly := keyfunc.Join(keyfunc.Static("ip"), keyfunc.IP())
	key, _ = ipOnly(r)
	fmt.Println(key)
	// Output:
	// 6:/login11:203.0.113.7
	// 2:ip11:203.0.113.7
}

// A framework that has already found the client's address (here as gin's
// c.ClientIP() would report it) is keyed exactly as IP keys a peer.
func ExampleCanonicalIP() {
	for _, addr := range []string{"192.0.2.1", "::ffff:192.0.2.1", "2001:db8:1:2::7", "not-an-ip"} {
		key, err := keyfunc.CanonicalIP(addr)
		fmt.Printf("%q %v\n", key, err)
	}
	// Output:
	// "192.0.2.1" <nil>
	// "192.0.2.1" <nil>
	// "2001:db8:1:2::/64" <nil>
	// "" keyfunc: no key in request: "not-an-ip" is not an IP address
}
