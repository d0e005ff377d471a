// Package keyfunc turns an HTTP request into the key a rate limit counts it
// under: the client's IP address, an API key, the matched route, or a
// combination of these. The middleware of package
// [github.com/go-ratelimit/ratelimit/nethttp] and the router adapters call a
// [Func] on every request and pass the key to the limiter.
//
//	perIP := keyfunc.IP()                              // the TCP peer, headers ignored
//	perKey := keyfunc.Header("X-API-Key")              // one bucket per API key
//	perRouteIP := keyfunc.Join(keyfunc.Route(), perIP) // per route per client
//
// A request with nothing to count it under gives an error wrapping
// [ErrNoKey], which the middleware answers by its key-error policy, never by
// skipping the limit. The constructors panic on invalid configuration, as a
// mistake in the program; proxy prefixes read from configuration are parsed
// with [ParseTrustedProxies], which returns the error instead.
//
// [PeerIP], [JoinKeys] and [BoundKey] are the same keys for transports other than HTTP
// (package grpcmw keys gRPC calls with them).
//
// # Client IP: the peer, unless you say otherwise
//
// [IP] keys on the TCP peer, http.Request.RemoteAddr, which a client cannot
// choose. X-Forwarded-For, Forwarded, X-Real-IP, True-Client-IP and every
// other header are ignored: any client can send them with any value.
//
// Behind reverse proxies, name them with [TrustProxies], and IP reads the
// forwarding headers, but only on requests whose peer is inside a trusted
// prefix:
//
//	keyfunc.IP(keyfunc.TrustProxies("10.0.0.0/8", "2001:db8::/32"))
//
// Each proxy appends the address it received the request from to the right
// of the chain, so only the right end is written by your proxies; the left
// end is whatever the client sent. IP walks the chain from the right, past
// every address inside a trusted prefix, and the first address outside them
// is the client. If every hop is trusted, the leftmost hop is the client. A
// trusted proxy's address is never the answer while an untrusted address can
// be reached.
//
// With a trusted peer, IP reads the first of these headers that is present,
// and only that one, even if it is malformed:
//
//  1. X-Forwarded-For: all header lines, in order, as one comma-separated
//     list. Entries may carry a port ("203.0.113.7:4711", "[2001:db8::1]:4711").
//  2. Forwarded (RFC 7239): the for= parameter of each element, across all
//     lines, with quoting, IPv6 brackets and ports as the RFC writes them.
//  3. X-Real-IP: read like X-Forwarded-For.
//
// [FromHeaders] names another header. Entries to the left of the first
// untrusted address are never parsed. When the walk reaches an entry that is
// not an address (empty, "unknown", an obfuscated "_name", an unquoted IPv6
// in Forwarded, a syntax error), the key is the peer address: such requests
// share the proxy's bucket. Malformed headers never give "no key".
//
// # Keys
//
// One client is one key, however its address is spelled: IPv4-mapped IPv6
// (::ffff:192.0.2.1) is folded to IPv4 and zones (fe80::1%eth0) are dropped,
// so an alias cannot slip past the trust check; a trusted prefix is matched
// the same way, and one written with a zone is refused as an error. IPv4
// keys are the dotted quad ("192.0.2.1"): two IPv4 addresses never share a
// key. IPv6 keys are the client's /64 ("2001:db8:1:2::/64"); [IPv6Prefix]
// changes the length. An IPv6 address that is not one subscriber's network
// is keyed whole, whatever IPv6Prefix says: the loopback ("::1", not
// "::/64"), link-local addresses ("fe80::1", where every neighbour on the
// link shares fe80::/64), other addresses that are not global unicast, and
// the NAT64 prefix 64:ff9b::/96, whose addresses are IPv4 clients
// ("64:ff9b::c000:201"). A RemoteAddr that is not an IP address (empty in a
// hand-built request, "@" for a Unix socket listener) gives an error
// wrapping ErrNoKey.
//
// Keys from different functions are not namespaced: a client can send an API
// key equal to someone's IP key. When one limiter counts keys from several
// functions (an adapter falling back from Header to IP), give each its own
// namespace: Join(Static("key"), apiKey) and Join(Static("ip"), perIP).
//
// Keys longer than 256 bytes, and keys that start with "sha256:", are
// replaced by "sha256:" and the unpadded base64url SHA-256 of the key: a
// huge header cannot become a huge map or Redis key, nor equal another key's
// hash.
//
// # Verify before going live
//
//  1. Through your real proxy chain, log the key of a request from an
//     address you know: it must be that address. A proxy's address means
//     that proxy is not trusted; 127.0.0.1 means your proxy connects over
//     loopback: trust 127.0.0.1/32 (and ::1).
//  2. Repeat with spoofed headers (curl -H "X-Forwarded-For: 1.2.3.4", and
//     likewise X-Real-IP and Forwarded: for=1.2.3.4): the key must not
//     change. If it does, your proxy passes the header through instead of
//     appending to it: fix the proxy, or name its header with FromHeaders.
//  3. Trust only your own proxies. A prefix shared with others (a cloud
//     region, a CDN you do not use), or 0.0.0.0/0 and ::/0 on a server the
//     internet reaches, lets a client choose its key.
//  4. Make the application reachable only through the proxy, or keep direct
//     clients outside the trusted prefixes.
//  5. Behind several proxies (CDN, load balancer, ingress), trust every one:
//     the walk stops at the first untrusted one, and every client behind it
//     shares its key.
//  6. With IPv6 clients, check IPv6Prefix against how your users' networks
//     are assigned (/64 is common; some ISPs hand out /56 or /48).
//  7. Decide what the adapter does on ErrNoKey (missing API key, no route,
//     Unix socket peer): fall back to another key or reject.
package keyfunc
