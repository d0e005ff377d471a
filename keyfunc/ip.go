package keyfunc

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// The forwarding headers read from trusted proxies by default, in order of
// precedence, as canonical header keys.
const (
	headerXForwardedFor = "X-Forwarded-For"
	headerForwarded     = "Forwarded"
	headerXRealIP       = "X-Real-Ip"
)

// defaultIPv6Prefix is the prefix length IPv6 clients are counted under when
// IPv6Prefix is not given: one /64 is what a single subscriber or host is
// normally assigned, and it holds 2^64 addresses to rotate through.
const defaultIPv6Prefix = 64

// IPOption configures [IP]. A nil IPOption does nothing.
type IPOption func(*ipConfig)

// ipConfig is what IP resolves a request with. It is immutable once built.
type ipConfig struct {
	trusted    []netip.Prefix // canonical: IPv4 as IPv4, masked, no zones
	ipv6Bits   int
	headers    []string // canonical names, in precedence order
	setHeaders bool
}

// TrustProxies names the proxies whose forwarding headers [IP] believes, as
// CIDR prefixes ("10.0.0.0/8", "2001:db8::/32") or single addresses
// ("192.0.2.7"), without a zone. A prefix with host bits set ("10.1.2.3/8")
// is invalid: it could mean the network or the one address. Several
// TrustProxies options add up; without any, the key is always the peer. It
// is for prefixes written in the program: it panics, naming every invalid
// entry.
func TrustProxies(cidrs ...string) IPOption {
	opt, err := parseTrustedProxies("TrustProxies", cidrs)
	if err != nil {
		panic(err)
	}
	return opt
}

// ParseTrustedProxies is [TrustProxies] for prefixes that come from
// configuration: it trims spaces around each entry and ignores empty ones
// (an unset variable trusts nothing), and returns an error naming every
// other invalid entry instead of panicking.
//
//	// TRUSTED_PROXIES="10.0.0.0/8, 192.168.0.0/16"
//	trusted, err := keyfunc.ParseTrustedProxies(strings.Split(os.Getenv("TRUSTED_PROXIES"), ",")...)
func ParseTrustedProxies(cidrs ...string) (IPOption, error) {
	kept := make([]string, 0, len(cidrs))
	for _, s := range cidrs {
		if s = strings.TrimSpace(s); s != "" {
			kept = append(kept, s)
		}
	}
	return parseTrustedProxies("ParseTrustedProxies", kept)
}

func parseTrustedProxies(fn string, cidrs []string) (IPOption, error) {
	prefixes := make([]netip.Prefix, 0, len(cidrs))
	var errs []error
	for _, s := range cidrs {
		p, err := parseTrusted(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("keyfunc: %s: %w", fn, err))
			continue
		}
		prefixes = append(prefixes, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return func(c *ipConfig) { c.trusted = append(c.trusted, prefixes...) }, nil
}

func parseTrusted(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		a, aerr := netip.ParseAddr(s)
		if aerr != nil || a.Zone() != "" {
			// Zones are refused, not dropped: addresses are matched without
			// theirs, so a zone here could only mislead the reader.
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR prefix or IP address", s)
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, fmt.Errorf("%q mixes IPv4-mapped and other IPv6 addresses; use an IPv4 prefix", s)
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	if m := p.Masked(); m != p {
		// "10.1.2.3/8" is a typo for one of two things, and trusting a
		// whole /8 when one proxy was meant lets its neighbours choose
		// their keys: the reader says which.
		return netip.Prefix{}, fmt.Errorf("%q has host bits set: write %q for the network or %q for the one address",
			s, m.String(), p.Addr().String())
	}
	return p, nil
}

// IPv6Prefix sets how many leading bits of an IPv6 client address form its
// key (default 64), so that one host rotating through the addresses of its
// prefix is still one client. IPv4 addresses are never masked, nor IPv6
// addresses that are keyed whole (loopback, link-local, NAT64: see the
// package documentation). It panics unless bits is between 1 and 128.
func IPv6Prefix(bits int) IPOption {
	if bits < 1 || bits > 128 {
		panic(fmt.Errorf("keyfunc: IPv6Prefix(%d): bits must be between 1 and 128", bits))
	}
	return func(c *ipConfig) { c.ipv6Bits = bits }
}

// FromHeaders replaces the forwarding headers read from trusted proxies and
// their precedence (default: X-Forwarded-For, Forwarded, X-Real-IP), for a
// proxy that maintains another header: FromHeaders("CF-Connecting-IP")
// behind Cloudflare. "Forwarded" is parsed as RFC 7239, any other header like
// X-Forwarded-For. It panics for no name, an invalid name or a repeated one.
func FromHeaders(names ...string) IPOption {
	if len(names) == 0 {
		panic(errors.New("keyfunc: FromHeaders: no header names"))
	}
	headers := make([]string, 0, len(names))
	for _, n := range names {
		n = headerKey("FromHeaders", n)
		if slices.Contains(headers, n) {
			panic(fmt.Errorf("keyfunc: FromHeaders: %q is listed twice", n))
		}
		headers = append(headers, n)
	}
	return func(c *ipConfig) { c.headers, c.setHeaders = headers, true }
}

// IP returns a Func whose key is the client's IP address, found and written
// as the package documentation describes: the TCP peer,
// http.Request.RemoteAddr, unless the peer is inside a prefix given to
// [TrustProxies]. A RemoteAddr that is not an IP address gives an error
// wrapping [ErrNoKey]. IP panics when [FromHeaders] is given without
// TrustProxies.
func IP(opts ...IPOption) Func {
	c := newIPConfig(opts)
	if c.setHeaders && len(c.trusted) == 0 {
		panic(errors.New("keyfunc: IP: FromHeaders without TrustProxies: headers are only read from trusted proxies"))
	}
	return c.key
}

// CanonicalIP returns the key IP() gives a client at address ip (IPv6 masked
// to its /64), for adapters whose framework has already found the client
// (gin's c.ClientIP()). An ip that is not an IP address (empty, a host name,
// an address with a port) gives an error wrapping [ErrNoKey].
func CanonicalIP(ip string) (string, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return "", fmt.Errorf("%w: %q is not an IP address", ErrNoKey, ip)
	}
	if a.Is4() {
		// netip accepts only the canonical dotted quad for IPv4.
		return ip, nil
	}
	return formatKey(canonicalAddr(a), defaultIPv6Prefix), nil
}

// formatKey is the key of the canonical address a: the address for IPv4,
// its prefix of ipv6Bits for a global unicast IPv6 address, and the address
// for any other IPv6 address (see wholeIPv6). Formatting into a stack buffer
// leaves the key string as the only allocation (Prefix.String would add one
// for IPv6).
func formatKey(a netip.Addr, ipv6Bits int) string {
	var buf [len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128")]byte
	if a.Is4() || wholeIPv6(a) {
		return string(a.AppendTo(buf[:0]))
	}
	return string(netip.PrefixFrom(a, ipv6Bits).Masked().AppendTo(buf[:0]))
}

// nat64 is the well-known NAT64 prefix (RFC 6052): an address in it is an
// IPv4 client translated to IPv6, its IPv4 address in the last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// wholeIPv6 reports whether the IPv6 address a is keyed as a whole rather
// than by its prefix. A prefix stands for one subscriber's network only for a
// global unicast address. Masked, the loopback ::1 would read "::/64", every
// link-local neighbour would share fe80::/64, and every IPv4 client of a
// NAT64 translator would share 64:ff9b::/64.
func wholeIPv6(a netip.Addr) bool {
	return !a.IsGlobalUnicast() || nat64.Contains(a)
}

func (c *ipConfig) isTrusted(a netip.Addr) bool {
	return slices.ContainsFunc(c.trusted, func(p netip.Prefix) bool { return p.Contains(a) })
}

// splitIPv4Port returns the host of a "host:port" RemoteAddr whose host
// has no colon (so it is not IPv6) and whose port is a number netip accepts
// (decimal, at most 65535), so that the fast path of key accepts exactly
// what netip.ParseAddrPort does.
func splitIPv4Port(remote string) (string, bool) {
	i := strings.LastIndexByte(remote, ':')
	if i <= 0 || i == len(remote)-1 || strings.IndexByte(remote[:i], ':') >= 0 {
		return "", false
	}
	port := 0
	for _, ch := range []byte(remote[i+1:]) {
		if ch < '0' || ch > '9' {
			return "", false
		}
		if port = port*10 + int(ch-'0'); port > 65535 {
			return "", false
		}
	}
	return remote[:i], true
}

// canonicalAddr folds IPv4-mapped IPv6 to IPv4 and drops the zone, so that
// every spelling of one address compares, matches prefixes and keys alike.
func canonicalAddr(a netip.Addr) netip.Addr {
	return a.Unmap().WithZone("")
}
