package keyfunc_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/keyfunc"
)

func TestIPKeysOnThePeer(t *testing.T) {
	ip := keyfunc.IP()
	tests := []struct {
		name, remote, want string
	}{
		{"keys an IPv4 peer on its address without the port", "192.0.2.1:1234", "192.0.2.1"},
		{"accepts a RemoteAddr without a port", "192.0.2.1", "192.0.2.1"},
		{"folds an IPv4-mapped IPv6 peer to IPv4", "[::ffff:192.0.2.1]:1234", "192.0.2.1"},
		{"folds a bare IPv4-mapped IPv6 peer to IPv4", "::ffff:192.0.2.1", "192.0.2.1"},
		{"keys an IPv6 peer on its /64", "[2001:db8:1:2:3:4:5:6]:1234", "2001:db8:1:2::/64"},
		{"keys a link-local peer on its address, without the zone", "[fe80::1%eth0]:1234", "fe80::1"},
		{"keys IPv6 loopback on its address", "[::1]:1234", "::1"},
		{"keys a NAT64 peer on its address: an IPv4 client each", "[64:ff9b::c000:201]:1234", "64:ff9b::c000:201"},
		{"keys a unique local IPv6 peer on its /64", "[fd00:1:2:3::4]:1234", "fd00:1:2:3::/64"},
		{"keys IPv4 loopback on its address", "127.0.0.1:1234", "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantKey(t, ip, request(tt.remote), tt.want)
		})
	}
}

func TestIPIgnoresHeadersByDefault(t *testing.T) {
	ip := keyfunc.IP()
	r := request("192.0.2.1:1234",
		"X-Forwarded-For", "198.51.100.1",
		"Forwarded", "for=198.51.100.2",
		"X-Real-IP", "198.51.100.3",
		"True-Client-IP", "198.51.100.4",
		"CF-Connecting-IP", "198.51.100.5",
	)
	wantKey(t, ip, r, "192.0.2.1")
}

func TestIPKeysAreCanonical(t *testing.T) {
	t.Run("an IPv4 address and its IPv4-mapped form are one key", func(t *testing.T) {
		ip := keyfunc.IP()
		wantKey(t, ip, request("[::ffff:1.2.3.4]:2"), mustKey(t, ip, request("1.2.3.4:1")))
	})
	t.Run("two IPv4 addresses never share a key, even with a short IPv6 prefix", func(t *testing.T) {
		ip := keyfunc.IP(keyfunc.IPv6Prefix(1))
		for _, pair := range [][2]string{{"1.2.3.4:1", "1.2.3.5:1"}, {"0.0.0.0:1", "255.255.255.255:1"}} {
			if a, b := mustKey(t, ip, request(pair[0])), mustKey(t, ip, request(pair[1])); a == b {
				t.Errorf("%s and %s share the key %q", pair[0], pair[1], a)
			}
		}
	})
	t.Run("addresses in one IPv6 /64 share a key", func(t *testing.T) {
		ip := keyfunc.IP()
		key := mustKey(t, ip, request("[2001:db8::1]:1"))
		wantKey(t, ip, request("[2001:db8::ffff:ffff:ffff:ffff]:1"), key)
		if other := mustKey(t, ip, request("[2001:db8:0:1::1]:1")); other == key {
			t.Errorf("two /64s share the key %q", key)
		}
	})
	t.Run("IPv6Prefix sets the mask", func(t *testing.T) {
		tests := []struct {
			bits int
			want string
		}{
			{1, "::/1"},
			{48, "2001:db8:1::/48"},
			{56, "2001:db8:1:200::/56"},
			{128, "2001:db8:1:2ff::7/128"},
		}
		for _, tt := range tests {
			ip := keyfunc.IP(keyfunc.IPv6Prefix(tt.bits))
			wantKey(t, ip, request("[2001:db8:1:2ff::7]:1"), tt.want)
		}
	})
	t.Run("IPv6Prefix leaves addresses keyed whole as they are", func(t *testing.T) {
		ip := keyfunc.IP(keyfunc.IPv6Prefix(48))
		wantKey(t, ip, request("[::1]:1"), "::1")
		wantKey(t, ip, request("[fe80::1:2]:1"), "fe80::1:2")
		wantKey(t, ip, request("[64:ff9b::c000:201]:1"), "64:ff9b::c000:201")
		wantKey(t, ip, request("[2001:db8:1:2::1]:1"), "2001:db8:1::/48")
	})
	t.Run("link-local neighbours and NAT64 clients do not share a key", func(t *testing.T) {
		ip := keyfunc.IP()
		for _, pair := range [][2]string{{"[fe80::1]:1", "[fe80::2]:1"}, {"[64:ff9b::c000:201]:1", "[64:ff9b::c000:202]:1"}, {"[::1]:1", "[::]:1"}} {
			if a, b := mustKey(t, ip, request(pair[0])), mustKey(t, ip, request(pair[1])); a == b {
				t.Errorf("%s and %s share the key %q", pair[0], pair[1], a)
			}
		}
	})
	t.Run("an IPv4-mapped address is folded before masking", func(t *testing.T) {
		ip := keyfunc.IP(keyfunc.IPv6Prefix(8))
		wantKey(t, ip, request("[::ffff:192.0.2.1]:1"), "192.0.2.1")
	})
}

func TestIPRemoteAddrThatIsNotAnAddress(t *testing.T) {
	ip := keyfunc.IP(trustedProxies)
	for _, remote := range []string{"", "@", "/run/app.sock", "localhost:80", "192.0.2.1:port", "192.0.2.1:", "[192.0.2.1]:80", "1.2.3.4.5"} {
		t.Run("fails with ErrNoKey for "+quote(remote), func(t *testing.T) {
			key, err := ip(request(remote, "X-Forwarded-For", client))
			wantNoKey(t, key, err)
			if err != nil && !strings.HasPrefix(err.Error(), "keyfunc: ") {
				t.Errorf("got %v, want an error starting keyfunc: ", err)
			}
		})
	}
}

func quote(s string) string { return `"` + s + `"` }

func TestIPOptionErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func()   // constructs IP with invalid configuration
		want  []string // substrings of the error it panics with
	}{
		{"rejects a prefix longer than the address", func() { keyfunc.TrustProxies("10.0.0.0/33") }, []string{`"10.0.0.0/33"`}},
		{"rejects a host name", func() { keyfunc.TrustProxies("proxy.internal") }, []string{`"proxy.internal"`}},
		{"rejects an empty entry", func() { keyfunc.TrustProxies("") }, []string{`""`}},
		{"names every bad entry", func() { keyfunc.TrustProxies("10.0.0.0/8", "nope", "fd00::/129") }, []string{`"nope"`, `"fd00::/129"`}},
		{"rejects a zone in an address", func() { keyfunc.TrustProxies("fe80::1%eth0") }, []string{`"fe80::1%eth0"`}},
		{"rejects a zone in a prefix", func() { keyfunc.TrustProxies("fe80::%eth0/64") }, []string{`"fe80::%eth0/64"`}},
		{"rejects a short prefix mixing mapped and other IPv6", func() { keyfunc.TrustProxies("::ffff:0:0/80") }, []string{`"::ffff:0:0/80"`}},
		{"rejects a prefix with host bits set, naming both readings", func() { keyfunc.TrustProxies("10.1.2.3/8") },
			[]string{`"10.1.2.3/8" has host bits set: write "10.0.0.0/8" for the network or "10.1.2.3" for the one address`}},
		{"rejects an IPv6 prefix with host bits set", func() { keyfunc.TrustProxies("2001:db8::1/32") },
			[]string{`write "2001:db8::/32" for the network or "2001:db8::1" for the one address`}},
		{"rejects an IPv4-mapped prefix with host bits set, in IPv4", func() { keyfunc.TrustProxies("::ffff:10.1.2.3/104") },
			[]string{`"::ffff:10.1.2.3/104" has host bits set: write "10.0.0.0/8" for the network or "10.1.2.3" for the one address`}},
		{"rejects an IPv6 prefix of 0 bits", func() { keyfunc.IPv6Prefix(0) }, []string{"IPv6Prefix(0)"}},
		{"rejects an IPv6 prefix of 129 bits", func() { keyfunc.IPv6Prefix(129) }, []string{"IPv6Prefix(129)"}},
		{"rejects FromHeaders without TrustProxies", func() { keyfunc.IP(keyfunc.FromHeaders("X-Real-IP")) }, []string{"FromHeaders without TrustProxies"}},
		{"rejects FromHeaders with no names", func() { keyfunc.FromHeaders() }, []string{"no header names"}},
		{"rejects an invalid header name", func() { keyfunc.FromHeaders("X Real IP") }, []string{`"X Real IP"`}},
		{"rejects a header listed twice", func() { keyfunc.FromHeaders("x-real-ip", "X-Real-IP") }, []string{`"X-Real-Ip" is listed twice`}},
		{"stops at the first bad option", func() { keyfunc.IP(keyfunc.TrustProxies("x"), keyfunc.IPv6Prefix(-1)) }, []string{`"x"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := panicError(t, tt.build)
			if errors.Is(err, keyfunc.ErrNoKey) {
				t.Errorf("got %v: a configuration error is not a missing key", err)
			}
			for _, w := range append(tt.want, "keyfunc: ") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %v, want an error containing %s", err, w)
				}
			}
		})
	}
}

func TestParseTrustedProxies(t *testing.T) {
	// Each case trusts 10.0.0.0/8 and 192.0.2.7, or nobody.
	trusting := []struct {
		name    string
		entries []string
		trusts  bool
	}{
		{"returns an option that trusts the prefixes", []string{"10.0.0.0/8", "192.0.2.7"}, true},
		{"trims spaces and ignores empty entries, as strings.Split of a variable gives them",
			strings.Split("10.0.0.0/8, 192.0.2.7 ,,", ","), true},
		{"trusts nobody for an unset variable", strings.Split("", ","), false},
		{"trusts nobody with no entries", nil, false},
	}
	for _, tt := range trusting {
		t.Run(tt.name, func(t *testing.T) {
			trusted, err := keyfunc.ParseTrustedProxies(tt.entries...)
			if err != nil {
				t.Fatal(err)
			}
			ip := keyfunc.IP(trusted)
			want, want7 := proxyKey, "192.0.2.7"
			if tt.trusts {
				want, want7 = client, client
			}
			wantKey(t, ip, request(proxyPeer, "X-Forwarded-For", client), want)
			wantKey(t, ip, request("192.0.2.7:1", "X-Forwarded-For", client), want7)
			wantKey(t, ip, request("192.0.2.8:1", "X-Forwarded-For", client), "192.0.2.8")
		})
	}

	t.Run("returns the error TrustProxies panics with, naming every bad entry", func(t *testing.T) {
		opt, err := keyfunc.ParseTrustedProxies("10.0.0.0/8", "nope", "fd00::/129")
		if opt != nil {
			t.Errorf("got a non-nil IPOption with the error %v", err)
		}
		const want = "keyfunc: ParseTrustedProxies: \"nope\" is not a CIDR prefix or IP address\n" +
			"keyfunc: ParseTrustedProxies: \"fd00::/129\" is not a CIDR prefix or IP address"
		if err == nil || err.Error() != want {
			t.Errorf("got %v, want %s", err, want)
		}
		panicked := panicError(t, func() { keyfunc.TrustProxies("10.0.0.0/8", "nope", "fd00::/129") })
		if want := strings.ReplaceAll(want, "ParseTrustedProxies", "TrustProxies"); panicked.Error() != want {
			t.Errorf("TrustProxies panicked with %v, want %s", panicked, want)
		}
	})
	t.Run("returns an error for a prefix with host bits set", func(t *testing.T) {
		opt, err := keyfunc.ParseTrustedProxies("10.1.2.3/8")
		const want = `keyfunc: ParseTrustedProxies: "10.1.2.3/8" has host bits set: write "10.0.0.0/8" for the network or "10.1.2.3" for the one address`
		if opt != nil || err == nil || err.Error() != want {
			t.Errorf("got %v, want no option and %s", err, want)
		}
	})
	t.Run("still names an entry that is not a prefix once trimmed", func(t *testing.T) {
		_, err := keyfunc.ParseTrustedProxies(" 10.0.0.0/8", " 10.0.0.0 /8")
		const want = "keyfunc: ParseTrustedProxies: \"10.0.0.0 /8\" is not a CIDR prefix or IP address"
		if err == nil || err.Error() != want {
			t.Errorf("got %v, want %s", err, want)
		}
	})
}

func TestIPOptionsThatAreValid(t *testing.T) {
	t.Run("accepts a single address as a one-host prefix", func(t *testing.T) {
		ip := keyfunc.IP(keyfunc.TrustProxies("10.0.0.1"))
		wantKey(t, ip, request(proxyPeer, "X-Forwarded-For", client), client)
		wantKey(t, ip, request("10.0.0.2:1", "X-Forwarded-For", client), "10.0.0.2")
	})
	t.Run("folds an IPv4-mapped prefix to IPv4", func(t *testing.T) {
		ip := keyfunc.IP(keyfunc.TrustProxies("::ffff:10.0.0.0/104"))
		wantKey(t, ip, request(proxyPeer, "X-Forwarded-For", client), client)
	})
	t.Run("adds up several TrustProxies options", func(t *testing.T) {
		ip := keyfunc.IP(keyfunc.TrustProxies("10.0.0.0/8"), keyfunc.TrustProxies("192.168.0.0/16"))
		wantKey(t, ip, request("192.168.1.1:1", "X-Forwarded-For", client+", 10.0.0.9"), client)
	})
	t.Run("ignores a nil IPOption", func(t *testing.T) {
		ip := keyfunc.IP(nil)
		wantKey(t, ip, request("192.0.2.1:1"), "192.0.2.1")
	})
	t.Run("trusts nobody with an empty TrustProxies", func(t *testing.T) {
		ip := keyfunc.IP(keyfunc.TrustProxies())
		wantKey(t, ip, request(proxyPeer, "X-Forwarded-For", client), proxyKey)
	})
}

func TestIPPanicsAtConstruction(t *testing.T) {
	t.Run("returns the Func for valid options", func(t *testing.T) {
		ip := keyfunc.IP(keyfunc.IPv6Prefix(48))
		wantKey(t, ip, request("[2001:db8:1:2::1]:1"), "2001:db8:1::/48")
	})
	t.Run("panics with the error for an invalid CIDR", func(t *testing.T) {
		err := panicError(t, func() { keyfunc.IP(keyfunc.TrustProxies("10.0.0.0/40")) })
		if want := `keyfunc: TrustProxies: "10.0.0.0/40" is not a CIDR prefix or IP address`; err.Error() != want {
			t.Errorf("got %v, want %s", err, want)
		}
	})
}

func TestIPTrustedPeerXForwardedFor(t *testing.T) {
	ip := keyfunc.IP(trustedProxies)
	tests := []struct {
		name  string
		lines []string
		want  string
	}{
		{"reads a single address", []string{client}, client},
		{"skips trusted hops on the right", []string{client + ", 10.0.0.3, 10.0.0.2"}, client},
		{"ignores what the client wrote to the left", []string{"1.1.1.1, " + client}, client},
		{"ignores spoofed hops left of trusted ones", []string{"1.1.1.1, 8.8.8.8, " + client + ", 10.0.0.2"}, client},
		{"merges header lines in order", []string{"1.1.1.1", client, "10.0.0.2"}, client},
		{"merges lines holding lists", []string{"1.1.1.1, 2.2.2.2", client + ", 10.0.0.2"}, client},
		{"needs no space after commas", []string{"1.1.1.1," + client + ",10.0.0.2"}, client},
		{"trims spaces and tabs", []string{" \t1.1.1.1 ,\t" + client + " ,  10.0.0.2\t"}, client},
		{"drops an IPv4 port", []string{client + ":4711"}, client},
		{"keys a bare IPv6 client on its /64", []string{"2001:db8:1:2::7"}, "2001:db8:1:2::/64"},
		{"reads a bracketed IPv6 client", []string{"[2001:db8:1:2::7]"}, "2001:db8:1:2::/64"},
		{"reads a bracketed IPv6 client with a port", []string{"[2001:db8:1:2::7]:4711"}, "2001:db8:1:2::/64"},
		{"drops an IPv6 zone", []string{"fe80::1%eth0"}, "fe80::1"},
		{"folds an IPv4-mapped client", []string{"::ffff:" + client}, client},
		{"treats an IPv4-mapped alias of a proxy as that proxy", []string{client + ", ::ffff:10.0.0.2"}, client},
		{"treats a zoned alias of a proxy as that proxy", []string{client + ", fd00::2%eth0"}, client},
		{"answers the leftmost hop when all hops are trusted", []string{"10.0.0.5, 10.0.0.3, 10.0.0.2"}, "10.0.0.5"},
		{"skips garbage left of the client", []string{"garbage, " + client}, client},
		{"skips a garbage line left of the client", []string{"<script>", client}, client},
		{"skips an unknown left of the client", []string{"unknown, " + client + ", 10.0.0.2"}, client},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request(proxyPeer)
			r.Header["X-Forwarded-For"] = tt.lines
			wantKey(t, ip, r, tt.want)
		})
	}
}

func TestIPFailsClosedOnGarbageItMustRead(t *testing.T) {
	ip := keyfunc.IP(trustedProxies)
	tests := []struct {
		name  string
		lines []string
	}{
		{"a word", []string{"garbage"}},
		{"an empty header", []string{""}},
		{"an entry that is only spaces", []string{"   "}},
		{"a trailing comma", []string{client + ","}},
		{"an empty entry among trusted hops", []string{client + ",,10.0.0.2"}},
		{"garbage between the client and a trusted hop", []string{client + ", garbage, 10.0.0.2"}},
		{"an empty last line", []string{client, ""}},
		{"unknown", []string{"unknown"}},
		{"an obfuscated identifier", []string{"_hidden"}},
		{"five octets", []string{"1.2.3.4.5"}},
		{"a leading zero", []string{"010.0.0.1"}},
		{"a port out of range", []string{client + ":65536"}},
		{"an empty port", []string{client + ":"}},
		{"a bracketed IPv4 address", []string{"[" + client + "]"}},
		{"an unterminated bracket", []string{"[2001:db8::1"}},
		{"text after the bracket", []string{"[2001:db8::1]x"}},
		{"a quoted address", []string{`"` + client + `"`}},
		{"two addresses without a comma", []string{client + " 198.51.100.1"}},
		{"a CIDR", []string{"203.0.113.0/24"}},
		{"a host name", []string{"example.com"}},
	}
	for _, tt := range tests {
		t.Run("answers the peer for "+tt.name, func(t *testing.T) {
			r := request(proxyPeer)
			r.Header["X-Forwarded-For"] = tt.lines
			wantKey(t, ip, r, proxyKey) // malformed headers never mean no key
		})
	}
}

func TestIPTrustedPeerForwarded(t *testing.T) {
	ip := keyfunc.IP(trustedProxies)
	tests := []struct {
		name  string
		lines []string
		want  string
	}{
		{"reads for=", []string{"for=" + client}, client},
		{"reads for= among other parameters", []string{"for=" + client + ";proto=https;by=10.0.0.1"}, client},
		{"reads for= after other parameters", []string{"proto=https;for=" + client}, client},
		{"matches the parameter name case-insensitively", []string{"For=" + client}, client},
		{"reads a quoted address", []string{`for="` + client + `"`}, client},
		{"drops a quoted port", []string{`for="` + client + `:4711"`}, client},
		{"drops an obfuscated port", []string{`for="` + client + `:_abc"`}, client},
		{"reads a quoted bracketed IPv6 address", []string{`for="[2001:db8:1:2::7]"`}, "2001:db8:1:2::/64"},
		{"reads a quoted bracketed IPv6 address with a port", []string{`for="[2001:db8:1:2::7]:4711"`}, "2001:db8:1:2::/64"},
		{"folds a quoted IPv4-mapped address", []string{`for="[::ffff:` + client + `]"`}, client},
		{"walks elements right to left", []string{"for=1.1.1.1, for=" + client + ", for=10.0.0.2"}, client},
		{"walks lines right to left", []string{"for=1.1.1.1", "for=" + client, "for=10.0.0.2"}, client},
		{"ignores commas inside quotes", []string{`for="1.1.1.1, for=2.2.2.2", for=` + client}, client},
		{"allows spaces around semicolons", []string{"for=" + client + " ; proto=http"}, client},
		{"allows a trailing semicolon", []string{"for=" + client + ";"}, client},
		{"skips an unknown left of the client", []string{"for=unknown, for=" + client}, client},
		{"skips garbage left of the client", []string{`for="unterminated`, "for=" + client}, client},
		{"answers the leftmost hop when all hops are trusted", []string{"for=10.0.0.5, for=10.0.0.2"}, "10.0.0.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request(proxyPeer)
			r.Header["Forwarded"] = tt.lines
			wantKey(t, ip, r, tt.want)
		})
	}
}

func TestIPFailsClosedOnForwardedGarbageItMustRead(t *testing.T) {
	ip := keyfunc.IP(trustedProxies)
	tests := []struct {
		name  string
		lines []string
	}{
		{"for=unknown", []string{"for=unknown"}},
		{"an obfuscated identifier", []string{"for=_gazonk"}},
		{"a quoted obfuscated identifier", []string{`for="_gazonk"`}},
		{"an unknown right of the client", []string{"for=" + client + ", for=unknown"}},
		{"an element without for=", []string{"proto=https;by=10.0.0.1"}},
		{"two for= in one element", []string{"for=" + client + ";for=198.51.100.1"}},
		{"an unquoted port", []string{"for=" + client + ":4711"}},
		{"an unquoted IPv6 address", []string{"for=[2001:db8::7]"}},
		{"an unterminated quote", []string{`for="` + client}},
		{"a quoted-pair escape", []string{`for="\` + client + `"`}},
		{"text after a quoted value", []string{`for="` + client + `"x`}},
		{"a space before the equals sign", []string{"for =" + client}},
		{"a missing value", []string{"for="}},
		{"a missing parameter name", []string{"=" + client}},
		{"a bare word", []string{client}},
		{"an empty element among trusted hops", []string{"for=" + client + ",,for=10.0.0.2"}},
		{"an empty line", []string{""}},
		{"a quoted IPv6 address with a bad port", []string{`for="[2001:db8::7]:x"`}},
	}
	for _, tt := range tests {
		t.Run("answers the peer for "+tt.name, func(t *testing.T) {
			r := request(proxyPeer)
			r.Header["Forwarded"] = tt.lines
			wantKey(t, ip, r, proxyKey)
		})
	}
}

func TestIPTrustedPeerXRealIP(t *testing.T) {
	ip := keyfunc.IP(trustedProxies)
	tests := []struct {
		name, value, want string
	}{
		{"reads the address", client, client},
		{"reads an IPv6 address with a port", "[2001:db8:1:2::7]:80", "2001:db8:1:2::/64"},
		{"answers a trusted address as the leftmost hop", "10.0.0.9", "10.0.0.9"},
		{"answers the peer for garbage", "garbage", proxyKey},
		{"answers the peer for an empty value", "", proxyKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantKey(t, ip, request(proxyPeer, "X-Real-IP", tt.value), tt.want)
		})
	}
}

func TestIPHeaderPrecedence(t *testing.T) {
	ip := keyfunc.IP(trustedProxies)
	const (
		xff  = "198.51.100.1"
		fwd  = "198.51.100.2"
		real = "198.51.100.3"
	)
	tests := []struct {
		name   string
		header []string
		want   string
	}{
		{"X-Forwarded-For wins over Forwarded and X-Real-IP",
			[]string{"X-Real-IP", real, "Forwarded", "for=" + fwd, "X-Forwarded-For", xff}, xff},
		{"Forwarded wins over X-Real-IP",
			[]string{"X-Real-IP", real, "Forwarded", "for=" + fwd}, fwd},
		{"X-Real-IP is read when it is the only one",
			[]string{"X-Real-IP", real}, real},
		{"a malformed X-Forwarded-For does not fall through to X-Real-IP",
			[]string{"X-Forwarded-For", "garbage", "X-Real-IP", real}, proxyKey},
		{"a malformed Forwarded does not fall through to X-Real-IP",
			[]string{"Forwarded", "for=unknown", "X-Real-IP", real}, proxyKey},
		{"True-Client-IP is never read",
			[]string{"True-Client-IP", real}, proxyKey},
		{"CF-Connecting-IP is not read by default",
			[]string{"CF-Connecting-IP", real}, proxyKey},
		{"no forwarding header means the peer",
			nil, proxyKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantKey(t, ip, request(proxyPeer, tt.header...), tt.want)
		})
	}
}

func TestIPFromHeaders(t *testing.T) {
	t.Run("reads only the named header, ignoring a client's X-Forwarded-For", func(t *testing.T) {
		ip := keyfunc.IP(trustedProxies, keyfunc.FromHeaders("X-Real-IP"))
		r := request(proxyPeer, "X-Forwarded-For", "6.6.6.6", "X-Real-IP", client)
		wantKey(t, ip, r, client)
	})
	t.Run("matches header names case-insensitively", func(t *testing.T) {
		ip := keyfunc.IP(trustedProxies, keyfunc.FromHeaders("cf-connecting-ip"))
		wantKey(t, ip, request(proxyPeer, "CF-Connecting-IP", client), client)
	})
	t.Run("keeps the given precedence", func(t *testing.T) {
		ip := keyfunc.IP(trustedProxies, keyfunc.FromHeaders("Forwarded", "X-Forwarded-For"))
		r := request(proxyPeer, "X-Forwarded-For", "198.51.100.1", "Forwarded", "for="+client)
		wantKey(t, ip, r, client)
	})
	t.Run("answers the peer when none of the named headers is present", func(t *testing.T) {
		ip := keyfunc.IP(trustedProxies, keyfunc.FromHeaders("X-Real-IP"))
		wantKey(t, ip, request(proxyPeer, "X-Forwarded-For", client), proxyKey)
	})
}

func TestIPUntrustedPeer(t *testing.T) {
	ip := keyfunc.IP(trustedProxies)
	t.Run("ignores every header from a peer outside the trusted prefixes", func(t *testing.T) {
		r := request("198.51.100.9:1", "X-Forwarded-For", client, "Forwarded", "for="+client, "X-Real-IP", client)
		wantKey(t, ip, r, "198.51.100.9")
	})
	t.Run("ignores headers from an untrusted peer that claims a trusted address in them", func(t *testing.T) {
		r := request("198.51.100.9:1", "X-Forwarded-For", "10.0.0.1")
		wantKey(t, ip, r, "198.51.100.9")
	})
	t.Run("trusts an IPv4-mapped spelling of a trusted peer", func(t *testing.T) {
		r := request("[::ffff:10.0.0.1]:1", "X-Forwarded-For", client)
		wantKey(t, ip, r, client)
	})
	t.Run("trusts a zoned spelling of a trusted peer", func(t *testing.T) {
		r := request("[fd00::1%eth0]:1", "X-Forwarded-For", client)
		wantKey(t, ip, r, client)
	})
}

// TestIPv4PeerKeyAllocatesNothing: the common key, a plain IPv4 peer, is a
// substring of RemoteAddr; other spellings of the same address still give
// the canonical text.
func TestIPv4PeerKeyAllocatesNothing(t *testing.T) {
	ip := keyfunc.IP()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.7:51234"
	allocs := testing.AllocsPerRun(100, func() {
		k, err := ip(r)
		if err != nil || k != "192.0.2.7" {
			t.Fatalf("key %q, %v", k, err)
		}
	})
	if allocs != 0 {
		t.Errorf("got %v allocations, want 0", allocs)
	}
	for _, remote := range []string{"[::ffff:192.0.2.7]:1", "[::ffff:c000:207]:1", "192.0.2.7"} {
		wantKey(t, ip, request(remote), "192.0.2.7")
	}
}

func TestCanonicalIP(t *testing.T) {
	ip := keyfunc.IP()
	for _, addr := range []string{
		"192.0.2.1", "::ffff:192.0.2.1", "2001:db8:1:2:3:4:5:6", "fe80::1%eth0", "::ffff:192.0.2.1%eth0", "::1", "127.0.0.1",
		"64:ff9b::c000:201",
	} {
		t.Run("keys "+addr+" as IP keys a peer at that address", func(t *testing.T) {
			key, err := keyfunc.CanonicalIP(addr)
			if err != nil {
				t.Fatal(err)
			}
			a := netip.MustParseAddr(addr)
			wantKey(t, ip, request(netip.AddrPortFrom(a, 1).String()), key)
		})
	}
	for _, addr := range []string{"", " ", "example.com", "192.0.2.1:80", "[2001:db8::1]", "[2001:db8::1]:80", "010.0.0.1", "1.2.3.4.5", "192.0.2.0/24"} {
		t.Run("fails with ErrNoKey for "+quote(addr), func(t *testing.T) {
			key, err := keyfunc.CanonicalIP(addr)
			wantNoKey(t, key, err)
			if err != nil && !strings.HasPrefix(err.Error(), "keyfunc: ") {
				t.Errorf("got %v, want an error starting keyfunc: ", err)
			}
		})
	}
	t.Run("allocates nothing for IPv4", func(t *testing.T) {
		allocs := testing.AllocsPerRun(100, func() {
			if k, err := keyfunc.CanonicalIP("203.0.113.7"); err != nil || k != "203.0.113.7" {
				t.Fatalf("key %q, %v", k, err)
			}
		})
		if allocs != 0 {
			t.Errorf("got %v allocations, want 0", allocs)
		}
	})
}
