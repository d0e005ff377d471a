package keyfunc

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
)

// PeerIP is [IP] for transports other than HTTP (grpcmw keys gRPC calls
// with it): the returned function gives the key IP(opts...) gives a request
// whose connection comes from peer ("ip:port" as net.Addr.String writes it,
// or a bare IP) and whose X-Forwarded-For field holds the lines
// forwardedFor, in order. The lines are read only when peer is inside a
// [TrustProxies] prefix, walked as IP walks them; from any other peer they
// are ignored, whoever wrote them. A peer that is not an IP address (a Unix
// socket) gives an error wrapping [ErrNoKey]. PeerIP panics when given
// [FromHeaders]: it reads only the values it is given.
func PeerIP(opts ...IPOption) func(peer string, forwardedFor []string) (string, error) {
	c := newIPConfig(opts)
	if c.setHeaders {
		panic(errors.New("keyfunc: PeerIP: FromHeaders does not apply: PeerIP reads the X-Forwarded-For values it is given"))
	}
	return func(peer string, forwardedFor []string) (string, error) {
		return c.clientKey(peer, func() (string, []string) { return headerXForwardedFor, forwardedFor })
	}
}

// newIPConfig applies opts to the defaults of IP and PeerIP.
func newIPConfig(opts []IPOption) *ipConfig {
	c := &ipConfig{
		ipv6Bits: defaultIPv6Prefix,
		headers:  []string{headerXForwardedFor, headerForwarded, headerXRealIP},
	}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

// key is the Func of IP.
func (c *ipConfig) key(r *http.Request) (string, error) {
	return c.clientKey(r.RemoteAddr, func() (string, []string) { return c.forwarding(r.Header) })
}

// forwarding returns the first forwarding header of c present in h, and
// its lines.
func (c *ipConfig) forwarding(h http.Header) (name string, lines []string) {
	for _, name := range c.headers {
		if lines := h[name]; len(lines) > 0 {
			// The first header present decides, even when it turns out
			// malformed: falling through to the next one would let a client
			// choose which header is believed by spoiling the others.
			return name, lines
		}
	}
	return "", nil
}

// clientKey is the key of the client whose connection comes from remote,
// for IP and PeerIP alike. forwarded returns the forwarding field to walk
// (its name, which says its syntax, and its lines); it is called only when
// remote is a trusted proxy, so that other peers cost no field lookup. (A
// function that does not escape: it costs no allocation either.)
func (c *ipConfig) clientKey(remote string, forwarded func() (string, []string)) (string, error) {
	// The common case first: an IPv4 peer that is not a trusted proxy. netip
	// accepts only the canonical dotted quad for IPv4 (no leading zeros, no
	// short forms), so the host part of remote is the key as it stands: no
	// formatting and no allocation.
	if host, ok := splitIPv4Port(remote); ok {
		if a, err := netip.ParseAddr(host); err == nil && a.Is4() && !c.isTrusted(a) {
			return host, nil
		}
	}
	ap, err := netip.ParseAddrPort(remote) // "ip:port", as net/http sets it
	peer := ap.Addr()
	if err != nil {
		// A bare IP, as some middlewares leave it.
		if peer, err = netip.ParseAddr(remote); err != nil {
			return "", fmt.Errorf("%w: RemoteAddr %q is not an IP address", ErrNoKey, remote)
		}
	}
	peer = canonicalAddr(peer)
	if c.isTrusted(peer) {
		if name, lines := forwarded(); len(lines) > 0 {
			peer = c.walk(name, lines, peer)
		}
	}
	return formatKey(peer, c.ipv6Bits), nil
}
