package keyfunc_test

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/keyfunc"
)

// checkCanonical checks that key is an IP key in canonical form: the dotted
// quad of an IPv4 address, a masked IPv6 /64, or an IPv6 address that is
// keyed whole, and that feeding the key's address back in as the peer gives
// the same key.
func checkCanonical(t *testing.T, key string) {
	t.Helper()
	var a netip.Addr
	if p, err := netip.ParsePrefix(key); err == nil {
		a = p.Addr()
		if !a.Is6() || a.Is4In6() || p.Bits() != keyfunc.DefaultIPv6Prefix || p.Masked() != p {
			t.Fatalf("key %q: a prefix key must be a masked IPv6 /%d", key, keyfunc.DefaultIPv6Prefix)
		}
	} else if a, err = netip.ParseAddr(key); err != nil || a.Is4In6() || canonicalKey(a) != key {
		t.Fatalf("key %q is neither an IPv4 address, an IPv6 prefix nor an IPv6 address keyed whole", key)
	}
	if a.Zone() != "" {
		t.Fatalf("key %q has a zone", key)
	}
	// A prefix's own address may not be a client's: "::2" is keyed
	// "::/64", whose address "::" is keyed whole (not global unicast).
	if again := mustKey(t, keyfunc.IP(), request(netip.AddrPortFrom(a, 1).String())); again != key && a.IsGlobalUnicast() {
		t.Fatalf("key %q: its address as the peer gives %q", key, again)
	}
}

var fuzzSeeds = []string{
	"", " ", ",", ",,", "garbage", "unknown", "_hidden", client, client + ":4711", client + ":", "::2",
	"::ffff:" + client, "[::ffff:" + client + "]", "2001:db8::1", "[2001:db8::1]", "[2001:db8::1]:80",
	"fe80::1%eth0", "[fe80::1%25eth0]:80", "10.0.0.2", "1.1.1.1, " + client, client + ", 10.0.0.2",
	client + ",,10.0.0.2", "1.2.3.4.5", "01.2.3.4", "[" + client + "]", "[2001:db8::1", "\"" + client + "\"",
	"for=" + client, "for=\"" + client + ":80\"", "for=\"[2001:db8::1]:80\"", "for=unknown", "for=_x",
	"for=\"1.1.1.1, for=2.2.2.2\", for=" + client, "for=\"unterminated", "proto=https;for=" + client,
	"for=" + client + ";for=1.1.1.1", "For=" + client + " ; by=10.0.0.1", "for=\"\\1.2.3.4\"", "=;,\"\\",
}

// FuzzXForwardedFor feeds arbitrary RemoteAddr and X-Forwarded-For values.
// IP must never panic, must give canonical keys, must ignore the header from
// an untrusted peer, and must return an untrusted address a trusted proxy
// appended on the right, whatever the client put to its left.
func FuzzXForwardedFor(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(proxyPeer, s)
		f.Add(s, client)
	}
	f.Add("", "")
	f.Add("@", client)
	f.Add("[::ffff:10.0.0.1]:80", "1.1.1.1")
	ip := keyfunc.IP(trustedProxies)
	f.Fuzz(func(t *testing.T, remote, xff string) {
		key, err := ip(request(remote, "X-Forwarded-For", xff))
		peer, perr := netip.ParseAddrPort(remote)
		if err != nil {
			if !errors.Is(err, keyfunc.ErrNoKey) {
				t.Fatalf("RemoteAddr %q: got %v, want an error wrapping ErrNoKey", remote, err)
			}
			if _, aerr := netip.ParseAddr(remote); perr == nil || aerr == nil {
				t.Fatalf("RemoteAddr %q is an address but gave %v", remote, err)
			}
			return
		}
		checkCanonical(t, key)
		if perr == nil && !isTrustedProxy(peer.Addr()) {
			if want := canonicalKey(peer.Addr()); key != want {
				t.Fatalf("untrusted peer %q: got %q, want %q: its headers must be ignored", remote, key, want)
			}
		}

		// A trusted proxy appended the real client, on a line of its own or
		// on the client's line: the client's text cannot matter.
		for _, lines := range [][]string{
			{xff, client},
			{xff, client + ", 10.0.0.2"},
			{xff + ", " + client},
			{xff + "," + client + ",fd00::2"},
		} {
			r := request(proxyPeer)
			r.Header["X-Forwarded-For"] = lines
			wantKey(t, ip, r, client)
		}
	})
}

// FuzzForwarded feeds arbitrary Forwarded values from a trusted proxy. A line
// the proxy adds after the client's always decides; an element the proxy
// appends to the client's own line decides unless the client's text breaks
// the line's syntax (an unterminated quote), in which case the key is the
// peer, never an address of the client's choosing.
func FuzzForwarded(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	ip := keyfunc.IP(trustedProxies, keyfunc.FromHeaders("Forwarded"))
	f.Fuzz(func(t *testing.T, fwd string) {
		checkCanonical(t, mustKey(t, ip, request(proxyPeer, "Forwarded", fwd)))

		for _, lines := range [][]string{
			{fwd, "for=" + client},
			{fwd, `for="` + client + `:4711";proto=https, for=10.0.0.2`},
		} {
			r := request(proxyPeer)
			r.Header["Forwarded"] = lines
			wantKey(t, ip, r, client)
		}

		r := request(proxyPeer)
		r.Header["Forwarded"] = []string{fwd + ", for=" + client}
		if key := mustKey(t, ip, r); key != client && key != proxyKey {
			t.Fatalf("line %q: got %q, want %s or the peer", r.Header["Forwarded"][0], key, client)
		}
	})
}

// hop is one entry of a generated proxy chain.
type hop struct {
	text    string     // as written in the header
	addr    netip.Addr // invalid for garbage
	trusted bool
}

// Garbage hops for generated chains. None of them swallows its neighbours
// (as an unterminated quote in Forwarded would), so that every hop keeps
// its place in the chain.
var (
	xffGarbage       = []string{"unknown", "_hidden", "", "x", "1.2.3", `"`}
	forwardedGarbage = []string{"for=unknown", "for=_hidden", "", "proto=http", "for=1.2.3", `for="[::1]:x"`}
)

// chainFrom turns fuzz bytes into a chain of hops in many spellings. Each
// byte picks the kind of hop and how it is written.
func chainFrom(data []byte, forwarded bool) []hop {
	var hops []hop
	for i, b := range data {
		n, style := byte(i), b/8%4
		var a netip.Addr
		switch b % 8 {
		case 0, 1:
			a = netip.AddrFrom4([4]byte{203, 0, 113, n})
		case 2:
			a = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: n, 15: b})
		case 3, 4:
			a = netip.AddrFrom4([4]byte{10, 0, n, b})
		case 5:
			a = netip.AddrFrom16([16]byte{0xfd, 14: n, 15: b})
		case 6:
			a = netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: 203, 13: 0, 14: 113, 15: n}) // IPv4-mapped
		case 7:
			garbage := xffGarbage
			if forwarded {
				garbage = forwardedGarbage
			}
			hops = append(hops, hop{text: garbage[int(b/8)%len(garbage)]})
			continue
		}
		h := hop{addr: a, trusted: isTrustedProxy(a)}
		switch {
		case style == 1:
			h.text = netip.AddrPortFrom(a, 4711).String()
		case style == 2 && a.Is6():
			h.text = "[" + a.String() + "]"
		case style == 3 && a.Is6() && !a.Is4In6():
			h.text = a.WithZone("eth0").String()
		default:
			h.text = a.String()
		}
		if forwarded {
			switch {
			case style == 1:
				h.text = `for="` + h.text + `"`
			case a.Is6():
				h.text = `for="[` + a.String() + `]"`
			default:
				h.text = "for=" + h.text
			}
		}
		hops = append(hops, h)
	}
	return hops
}

// expectedKey is the specification of the walk, written as plainly as
// possible: right to left, garbage means the peer, the first untrusted hop is
// the client, and if all hops are trusted the leftmost one is.
func expectedKey(hops []hop, peer netip.Addr) string {
	answer := peer
	for i := len(hops) - 1; i >= 0; i-- {
		h := hops[i]
		if !h.addr.IsValid() {
			return canonicalKey(peer)
		}
		answer = h.addr.Unmap()
		if !h.trusted {
			break
		}
	}
	return canonicalKey(answer)
}

func isTrustedProxy(a netip.Addr) bool {
	a = a.Unmap()
	return netip.MustParsePrefix("10.0.0.0/8").Contains(a) || netip.MustParsePrefix("fd00::/8").Contains(a)
}

// FuzzChain generates well-formed chains of trusted, untrusted and garbage
// hops in every spelling, splits them over header lines, and compares the key
// with the plain specification in expectedKey.
func FuzzChain(f *testing.F) {
	f.Add([]byte{0}, uint8(0))
	f.Add([]byte{0, 3, 3}, uint8(1))
	f.Add([]byte{3, 4, 5}, uint8(2))
	f.Add([]byte{0, 7, 3}, uint8(3))
	f.Add([]byte{2, 10, 18, 26, 6, 14}, uint8(0b101))
	f.Add([]byte{7, 15, 23, 31, 39, 47, 0}, uint8(0b11))
	f.Add([]byte{}, uint8(0))
	xff := keyfunc.IP(trustedProxies)
	fwd := keyfunc.IP(trustedProxies, keyfunc.FromHeaders("Forwarded"))
	f.Fuzz(func(t *testing.T, data []byte, shape uint8) {
		forwarded := shape&1 == 1
		hops := chainFrom(data, forwarded)
		// Split the hops over lines: bit k of shape>>1 starts a new line
		// before hop k+1.
		var lines []string
		var line []string
		for i, h := range hops {
			line = append(line, h.text)
			if i < 7 && shape>>(i+1)&1 == 1 || i == len(hops)-1 {
				lines = append(lines, strings.Join(line, ", "))
				line = nil
			}
		}
		name, ip := "X-Forwarded-For", xff
		if forwarded {
			name, ip = "Forwarded", fwd
		}
		r := request(proxyPeer)
		if len(lines) > 0 {
			r.Header[name] = lines
		}
		want := expectedKey(hops, netip.MustParseAddrPort(proxyPeer).Addr())
		wantKey(t, ip, r, want)
	})
}

// FuzzJoin checks that joined keys are unambiguous and bounded: two lists of
// parts give the same key only if the parts are equal, and no key is longer
// than MaxKeyLen.
func FuzzJoin(f *testing.F) {
	f.Add("a:b", "c", "a", "b:c")
	f.Add("1:a", "", "1", ":a")
	f.Add(strings.Repeat("x", 300), "", "sha256:x", "")
	f.Add("", "", "", "")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		r := request(client + ":1")
		ab := mustKey(t, keyfunc.Join(keyfunc.Static(a), keyfunc.Static(b)), r)
		cd := mustKey(t, keyfunc.Join(keyfunc.Static(c), keyfunc.Static(d)), r)
		if (a == c && b == d) != (ab == cd) {
			t.Errorf("Join(%q, %q) = %q, Join(%q, %q) = %q", a, b, ab, c, d, cd)
		}
		if len(ab) > keyfunc.MaxKeyLen {
			t.Errorf("Join(%q, %q) = %q: longer than %d bytes", a, b, ab, keyfunc.MaxKeyLen)
		}

		apiKey := keyfunc.Header("X-API-Key")
		r = request(client+":1", "X-API-Key", a)
		v := strings.Trim(a, " \t")
		if v == "" {
			key, err := apiKey(r)
			wantNoKey(t, key, err)
			return
		}
		key := mustKey(t, apiKey, r)
		if len(key) > keyfunc.MaxKeyLen {
			t.Errorf("value %q: key %q longer than %d bytes", v, key, keyfunc.MaxKeyLen)
		}
		raw := len(v) <= keyfunc.MaxKeyLen && !strings.HasPrefix(v, keyfunc.HashedKeyPrefix)
		if raw != (key == v) {
			t.Errorf("value %q: got the key %q, want it as it is only if short and not starting %s", v, key, keyfunc.HashedKeyPrefix)
		}
	})
}

// FuzzRemoteAddr checks IP's fast path for plain IPv4 peers against the
// general one: for any RemoteAddr, the key (or the error) is what parsing
// with netip.ParseAddrPort / ParseAddr and formatting canonically gives.
func FuzzRemoteAddr(f *testing.F) {
	for _, s := range []string{
		"192.0.2.1:1234", "192.0.2.1", "192.0.2.1:", "192.0.2.1:65535", "192.0.2.1:65536",
		"192.0.2.1:0080", "192.0.2.1:x", "010.0.2.1:80", "1.2.3:80", "[::ffff:192.0.2.1]:80",
		"[2001:db8::1]:443", "2001:db8::1", ":80", "", "@", "256.0.0.1:1",
	} {
		f.Add(s)
	}
	key := keyfunc.IP()
	f.Fuzz(func(t *testing.T, remote string) {
		r := &http.Request{RemoteAddr: remote, Header: http.Header{}}
		got, err := key(r)
		var a netip.Addr
		if ap, perr := netip.ParseAddrPort(remote); perr == nil {
			a = ap.Addr()
		} else if pa, perr := netip.ParseAddr(remote); perr == nil {
			a = pa
		} else {
			if err == nil {
				t.Fatalf("RemoteAddr %q: key %q, want an error", remote, got)
			}
			return
		}
		if err != nil {
			t.Fatalf("RemoteAddr %q: %v", remote, err)
		}
		if want := canonicalKey(a); got != want {
			t.Fatalf("RemoteAddr %q: key %q, want %q", remote, got, want)
		}
	})
}
