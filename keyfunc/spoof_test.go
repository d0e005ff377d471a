package keyfunc_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/keyfunc"
)

// spoofer makes up forwarding-header values the way an attacker would:
// addresses in every spelling (including our own proxies' and the victim's),
// lists, quoting tricks and plain garbage.
type spoofer struct{ rng *rand.Rand }

func (s spoofer) addr() string {
	switch s.rng.IntN(8) {
	case 0:
		return "10.0.0." + fmt.Sprint(s.rng.IntN(256)) // claims to be a trusted proxy
	case 1:
		return fmt.Sprintf("fd00::%x", s.rng.Uint32()) // a trusted IPv6 proxy
	case 2:
		return "::ffff:" + s.v4()
	case 3:
		return fmt.Sprintf("2001:db8:%x:%x::%x", s.rng.Uint32N(1<<16), s.rng.Uint32N(1<<16), s.rng.Uint32N(1<<16))
	case 4:
		return s.v4() + ":" + fmt.Sprint(s.rng.IntN(70000))
	default:
		return s.v4()
	}
}

func (s spoofer) v4() string {
	return netip.AddrFrom4([4]byte{byte(s.rng.IntN(256)), byte(s.rng.IntN(256)), byte(s.rng.IntN(256)), byte(s.rng.IntN(256))}).String()
}

var garbage = []string{"", " ", "unknown", "_hidden", "garbage", `"`, `"1.2.3.4`, "[", "]", ",", ";", "=",
	"1.2.3.4.5", "::ffff:", "%", "fe80::1%", "[::1]x", "for=", "\t", "203.0.113.7/24", "\x00", "é"}

func (s spoofer) item() string {
	if s.rng.IntN(5) == 0 {
		return garbage[s.rng.IntN(len(garbage))]
	}
	return s.addr()
}

// list is an X-Forwarded-For-style value.
func (s spoofer) list() string {
	n := 1 + s.rng.IntN(4)
	items := make([]string, n)
	for i := range items {
		items[i] = s.item()
	}
	return strings.Join(items, []string{",", ", ", " ,\t"}[s.rng.IntN(3)])
}

// forwarded is a Forwarded-style value.
func (s spoofer) forwarded() string {
	n := 1 + s.rng.IntN(3)
	elems := make([]string, n)
	for i := range elems {
		switch s.rng.IntN(5) {
		case 0:
			elems[i] = `for="[` + s.item() + `]:` + fmt.Sprint(s.rng.IntN(9999)) + `"`
		case 1:
			elems[i] = "proto=https;for=" + s.item()
		case 2:
			elems[i] = s.item()
		default:
			elems[i] = `for="` + s.item() + `"`
		}
	}
	return strings.Join(elems, ", ")
}

// request starts a request from remote carrying a random selection of
// spoofed forwarding headers.
func (s spoofer) request(remote string) (r *requestBuilder) {
	r = &requestBuilder{remote: remote}
	for range s.rng.IntN(3) {
		r.add("X-Forwarded-For", s.list())
	}
	for range s.rng.IntN(2) {
		r.add("Forwarded", s.forwarded())
	}
	if s.rng.IntN(2) == 0 {
		r.add("X-Real-IP", s.item())
	}
	if s.rng.IntN(2) == 0 {
		r.add("True-Client-IP", s.item())
	}
	return r
}

type requestBuilder struct {
	remote string
	header []string
}

func (b *requestBuilder) add(name, value string) { b.header = append(b.header, name, value) }

// appendTo does what nginx's $proxy_add_x_forwarded_for does: it replaces
// the client's lines of name with one line, those lines joined, then value.
func (b *requestBuilder) appendTo(name, value string) {
	var lines, rest []string
	for i := 0; i < len(b.header); i += 2 {
		if b.header[i] == name {
			lines = append(lines, b.header[i+1])
		} else {
			rest = append(rest, b.header[i], b.header[i+1])
		}
	}
	b.header = append(rest, name, strings.Join(append(lines, value), ", "))
}

// canonicalKey is the key IP() must give a client, by the package's rules:
// an IPv4 address as it is; an IPv6 address whole when it is not global
// unicast or is in the NAT64 prefix, and otherwise its /64.
func canonicalKey(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if a.Is4() || !a.IsGlobalUnicast() || netip.MustParsePrefix("64:ff9b::/96").Contains(a) {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

func TestSpoofedHeadersFromAnUntrustedPeerLandInOneBucket(t *testing.T) {
	s := spoofer{rand.New(rand.NewPCG(3, 1))}
	for _, tt := range []struct {
		name string
		opts []keyfunc.IPOption
		peer string
	}{
		{"with no proxy trusted", nil, "198.51.100.9:40000"},
		{"with no proxy trusted, even from a proxy's address", nil, proxyPeer},
		{"with proxies trusted, from a peer outside them", []keyfunc.IPOption{trustedProxies}, "198.51.100.9:40000"},
		{"with proxies trusted, from an IPv6 peer outside them", []keyfunc.IPOption{trustedProxies}, "[2001:db8:9::1]:40000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ip := keyfunc.IP(tt.opts...)
			keys := map[string]int{}
			for range 10_000 {
				b := s.request(tt.peer)
				keys[mustKey(t, ip, request(b.remote, b.header...))]++
			}
			want := canonicalKey(netip.MustParseAddrPort(tt.peer).Addr())
			if len(keys) != 1 || keys[want] != 10_000 {
				t.Errorf("got the keys %v, want %s for all 10000 requests", keys, want)
			}
		})
	}
}

func TestSpoofedHeadersBehindATrustedProxyYieldTheRealClient(t *testing.T) {
	s := spoofer{rand.New(rand.NewPCG(4, 1))}
	ip := keyfunc.IP(trustedProxies)
	realClient := func() netip.Addr {
		if s.rng.IntN(3) == 0 {
			return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0xaa, byte(s.rng.IntN(256)), 15: byte(s.rng.IntN(256))})
		}
		return netip.AddrFrom4([4]byte{203, 0, 113, byte(s.rng.IntN(256))})
	}

	fwd := keyfunc.IP(trustedProxies, keyfunc.FromHeaders("Forwarded"))
	for _, tt := range []struct {
		name  string
		ip    keyfunc.Func
		peer  string
		proxy func(b *requestBuilder, real netip.Addr) // what the proxies add
	}{
		{"one proxy appending to X-Forwarded-For", ip, proxyPeer, func(b *requestBuilder, real netip.Addr) {
			b.appendTo("X-Forwarded-For", real.String())
		}},
		{"two proxies, the outer one adding its own X-Forwarded-For line", ip, "[fd00::1]:443", func(b *requestBuilder, real netip.Addr) {
			b.add("X-Forwarded-For", real.String())   // HAProxy-style: a new line
			b.appendTo("X-Forwarded-For", "10.0.0.2") // the inner proxy, nginx-style
		}},
		{"a proxy adding a Forwarded line, with FromHeaders(\"Forwarded\")", fwd, proxyPeer, func(b *requestBuilder, real netip.Addr) {
			b.add("Forwarded", `for="`+netip.AddrPortFrom(real, 4711).String()+`";proto=https`)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for i := range 10_000 {
				real := realClient()
				b := s.request(tt.peer)
				tt.proxy(b, real)
				if got, want := mustKey(t, tt.ip, request(b.remote, b.header...)), canonicalKey(real); got != want {
					t.Fatalf("request %d %q: got %q, want %q", i, b.header, got, want)
				}
			}
		})
	}
	t.Run("a proxy appending to the client's Forwarded line never yields a spoofed address", func(t *testing.T) {
		// A client's unterminated quote can swallow the element the proxy
		// appends to the same line; the walk then fails closed to the peer.
		counts := map[string]int{}
		for i := range 10_000 {
			real := realClient()
			b := s.request(proxyPeer)
			b.appendTo("Forwarded", "for="+real.String())
			r := request(b.remote, b.header...)
			key := mustKey(t, fwd, r)
			if key == proxyKey {
				counts["peer"]++
				continue
			}
			counts["client"]++
			if want := canonicalKey(real); key != want {
				t.Fatalf("request %d %q: got %q, want %q or the peer", i, r.Header["Forwarded"], key, want)
			}
		}
		if counts["client"] == 0 {
			t.Errorf("got %v: no request keyed on its client", counts)
		}
	})
}

// The tests below each take a published client-IP spoofing advisory against a
// Go router and replay its attack against IP. Each comment says what the bug
// was and why it does not apply here.

// GHSA-3fxj-6jh8-hvhx (go-chi/chi, critical): middleware.RealIP took the
// first, leftmost entry of X-Forwarded-For and made it the request's
// RemoteAddr. The leftmost entry is the one the client writes, so any client
// could pick its own address and escape per-IP rate limits and IP ACLs.
//
// Here the leftmost entry is never read while anything to its right is
// untrusted: the walk goes right to left and stops at the first address
// outside the trusted prefixes. Without TrustProxies the header is not read at
// all. RemoteAddr is never modified.
func TestAdvisory_GHSA_3fxj_6jh8_hvhx(t *testing.T) {
	const spoofed = "127.0.0.1"
	t.Run("a direct client's leftmost X-Forwarded-For is ignored", func(t *testing.T) {
		r := request(client+":5555", "X-Forwarded-For", spoofed)
		wantKey(t, keyfunc.IP(), r, client)
		wantKey(t, keyfunc.IP(trustedProxies), r, client)
		if r.RemoteAddr != client+":5555" {
			t.Errorf("RemoteAddr: got %q, want it left alone", r.RemoteAddr)
		}
	})
	t.Run("behind a trusted proxy the leftmost entry does not win", func(t *testing.T) {
		r := request(proxyPeer, "X-Forwarded-For", spoofed+", "+client)
		wantKey(t, keyfunc.IP(trustedProxies), r, client)
	})
	t.Run("rotating the leftmost entry does not rotate the bucket", func(t *testing.T) {
		ip := keyfunc.IP(trustedProxies)
		for i := range 256 {
			r := request(proxyPeer, "X-Forwarded-For", fmt.Sprintf("192.0.2.%d, %s", i, client))
			wantKey(t, ip, r, client)
		}
	})
}

// GHSA-rjr7-jggh-pgcp (go-chi/chi): RealIP believed True-Client-IP, then
// X-Real-IP, then X-Forwarded-For on every request, without checking that the
// request came from a proxy at all. A client talking to the server directly
// set any of them and chose its address.
//
// Here headers are read only when the TCP peer is inside a prefix given to
// TrustProxies, and True-Client-IP is never read (FromHeaders can name it
// explicitly for a CDN that sets it).
func TestAdvisory_GHSA_rjr7_jggh_pgcp(t *testing.T) {
	ip := keyfunc.IP(trustedProxies)
	for _, h := range []string{"True-Client-IP", "X-Real-IP", "X-Forwarded-For", "Forwarded"} {
		t.Run(h+" from a peer that is not a trusted proxy is ignored", func(t *testing.T) {
			v := "192.0.2.66"
			if h == "Forwarded" {
				v = "for=" + v
			}
			wantKey(t, ip, request(client+":5555", h, v), client)
		})
	}
	t.Run("True-Client-IP is ignored even from a trusted proxy", func(t *testing.T) {
		wantKey(t, ip, request(proxyPeer, "True-Client-IP", "192.0.2.66"), proxyKey)
	})
}

// GHSA-9g5q-2w5x-hmxf (go-chi/chi): even behind a real proxy that appends the
// client's address to X-Forwarded-For, RealIP used the first entry. A client
// sending "X-Forwarded-For: 192.0.2.2" through the proxy arrived as
// "192.0.2.2, 192.0.2.1" and was taken to be 192.0.2.2, though the proxy had
// seen 192.0.2.1.
//
// Here the entry the trusted proxy appended, the rightmost, is read first,
// and it is outside the trusted prefixes, so it is the answer.
func TestAdvisory_GHSA_9g5q_2w5x_hmxf(t *testing.T) {
	ip := keyfunc.IP(trustedProxies)
	r := request(proxyPeer, "X-Forwarded-For", "192.0.2.2, 192.0.2.1")
	wantKey(t, ip, r, "192.0.2.1")
}

// CVE-2020-28483 (gin-gonic/gin before 1.7.0): Context.ClientIP read
// X-Forwarded-For (and X-Real-IP) from every peer by default, so a gin server
// reachable directly from the internet let any client spoof its IP. The
// follow-up reports (gin issues 2473 and 2862) showed that checking only the
// immediate peer against a trusted list is not enough either: the chain must
// be walked hop by hop from the right, or an address the client wrote to the
// left still wins.
//
// Here the default trusts no one, and with trusted proxies every hop is
// checked, right to left, so only addresses appended by trusted proxies are
// stepped over.
func TestAdvisory_CVE_2020_28483(t *testing.T) {
	t.Run("the default ignores X-Forwarded-For from a directly connected client", func(t *testing.T) {
		r := request(client+":5555", "X-Forwarded-For", "192.0.2.66", "X-Real-IP", "192.0.2.67")
		wantKey(t, keyfunc.IP(), r, client)
	})
	t.Run("a trusted peer does not make the client's own entries trusted", func(t *testing.T) {
		ip := keyfunc.IP(keyfunc.TrustProxies("10.0.0.1"))
		r := request("10.0.0.1:443", "X-Forwarded-For", "192.0.2.66, "+client)
		wantKey(t, ip, r, client)
	})
	t.Run("a client cannot pass as a trusted hop in the middle of the chain", func(t *testing.T) {
		ip := keyfunc.IP(keyfunc.TrustProxies("10.0.0.1", "10.0.0.2"))
		// The client wrote "192.0.2.66, 10.0.0.2"; the proxy appended the
		// client's real address. The claimed 10.0.0.2 is left of an
		// untrusted hop, so it is never reached.
		r := request("10.0.0.1:443", "X-Forwarded-For", "192.0.2.66, 10.0.0.2, "+client)
		wantKey(t, ip, r, client)
	})
}
