// Package keyfunc turns an HTTP request into the key a rate limit counts it
// under: the client's IP address, an API key, the matched route, or a
// combination of these. It knows HTTP and nothing of limits: the middleware
// of package nethttp and the router adapters call a [Func] on every request
// and pass the key to a core.Limiter.
//
//	perIP := keyfunc.IP()                              // the TCP peer, headers ignored
//	perKey := keyfunc.Header("X-API-Key")              // one bucket per API key
//	perRouteIP := keyfunc.Join(keyfunc.Route(), perIP) // per route per client
//
// Every Func is safe for simultaneous use by multiple goroutines and never
// modifies the request. A request with nothing to count it under gives an
// error wrapping [ErrNoKey], which the middleware answers by its key-error
// policy, never by skipping the limit. The constructors panic on invalid
// configuration, as a mistake in the program; proxy prefixes read from
// configuration are parsed with [ParseTrustedProxies], which returns the
// error instead.
//
// # Client IP: the peer, unless you say otherwise
//
// [IP] keys on the TCP peer, http.Request.RemoteAddr, which a client cannot
// choose. X-Forwarded-For, Forwarded, X-Real-IP, True-Client-IP and every
// other header are ignored: any client can send them with any value, so a
// limiter that believed them would give each request a fresh bucket.
//
// Behind a reverse proxy or load balancer every request has the proxy as its
// peer. Name your proxies with [TrustProxies], and IP reads the forwarding
// headers, but only on requests whose peer is inside one of the trusted
// prefixes:
//
//	keyfunc.IP(keyfunc.TrustProxies("10.0.0.0/8", "2001:db8::/32"))
//
// Each proxy appends the address it received the request from to the right
// of the chain, so only the right end is written by your own proxies; the
// left end is whatever the client sent. IP therefore walks the chain from
// the right, past every address inside a trusted prefix, and the first
// address outside them is the client. If every hop is trusted (a client
// inside your own network), the leftmost hop is the client. A trusted
// proxy's address is never the answer while an untrusted address can be
// reached.
//
// # Which forwarding header
//
// With a trusted peer, IP reads the first of these headers that is present,
// and only that one:
//
//  1. X-Forwarded-For: all header lines, in order, as one comma-separated
//     list ("203.0.113.7, 10.0.0.2"). Entries may carry a port
//     ("203.0.113.7:4711", "[2001:db8::1]:4711").
//  2. Forwarded (RFC 7239): the for= parameter of each element, across all
//     lines; quoted values, IPv6 in brackets and ports as the RFC writes
//     them (for="[2001:db8::1]:4711").
//  3. X-Real-IP: read like X-Forwarded-For (usually a single address).
//
// X-Forwarded-For comes first because practically every proxy and load
// balancer appends to it, while a header the proxy does not maintain passes
// through from the client untouched. Once a header is present the others are
// not consulted, even if it is malformed. If your proxy maintains a different
// header and passes X-Forwarded-For through, say so with [FromHeaders]
// (FromHeaders("X-Real-IP"), FromHeaders("CF-Connecting-IP")), or the
// client's own X-Forwarded-For wins.
//
// # Malformed headers fail closed
//
// Entries to the left of the first untrusted address are never parsed, so
// garbage a client puts there does no harm. When the walk does reach an
// entry that is not an address (an empty entry, "unknown", an obfuscated
// "_name", an unquoted IPv6 in Forwarded, a syntax error), the key is the
// peer address: the one answer no client chose. Requests with such headers
// then share the proxy's bucket, which hurts only the clients that send
// them. Malformed headers never produce "no key".
//
// # Canonical addresses
//
// One client is one key, however its address is spelled: IPv4-mapped IPv6
// (::ffff:192.0.2.1) is folded to IPv4 before anything else, zones
// (fe80::1%eth0) are dropped, and the same rules apply to trusted prefixes,
// so an alias cannot slip past the trust check. IPv4 keys are the dotted
// quad ("192.0.2.1"); two IPv4 addresses never share a key. IPv6 keys are the
// client's /64 ("2001:db8:1:2::/64"), because one host usually controls a
// whole /64 and could otherwise rotate through 2^64 buckets; [IPv6Prefix]
// changes the length. [CanonicalIP] gives the same key for an address a
// framework has already found (gin's c.ClientIP()), so adapters never
// rebuild a request around it.
//
// A RemoteAddr that is not an IP address (empty in a hand-built request,
// "@" for a Unix socket listener) gives an error wrapping ErrNoKey: such
// traffic cannot be told apart by address, so choose the key-error policy
// (or another key function) for it deliberately.
//
// # API keys, routes and combined keys
//
// [Header] keys on a request header such as X-API-Key; a missing or blank
// header is ErrNoKey, never a silent shared bucket. [Route] keys on the
// matched route pattern, http.Request.Pattern ("/users/{id}"), never the raw
// path. net/http's ServeMux sets Pattern only inside the handlers registered
// on it, not in a middleware wrapping the whole mux; the chi, gin and echo
// adapters set it to their router's pattern. [Join] combines keys with
// length-prefixed parts, so ("a:b", "c") and ("a", "b:c") stay apart, and
// [Static] counts every request under one key.
//
// Keys from different functions are not namespaced: a client can send an
// API key equal to someone's IP key. When one limiter counts keys from
// several functions (an adapter falling back from Header to IP), give each
// its own namespace with Static, as in Join(Static("key"), apiKey) and
// Join(Static("ip"), perIP).
//
// Keys longer than 256 bytes are replaced by "sha256:" and the base64url
// SHA-256 of the key, so a huge header cannot become a huge map or Redis
// key; a raw key that starts with "sha256:" is hashed too, so it can never
// equal another key's hash.
//
// # VERIFY BEFORE GOING LIVE
//
//  1. Send a request from a machine whose public address you know, through
//     your real proxy chain, and log the key (or the client address your
//     handler derives from it). It must be that address, not your proxy's,
//     and not 127.0.0.1. If it is your proxy's, add the proxy to
//     TrustProxies; if it is 127.0.0.1, your proxy connects over loopback:
//     trust 127.0.0.1/32 (and ::1) explicitly.
//  2. Repeat with a spoofed header: curl -H "X-Forwarded-For: 1.2.3.4"
//     -H "X-Real-IP: 1.2.3.4" -H "Forwarded: for=1.2.3.4". The key must not
//     change. If it does, your proxy passes the header through instead of
//     appending to it: fix the proxy, or pick the header it does maintain
//     with FromHeaders.
//  3. Trust only your own proxies. A prefix shared with other customers (a
//     whole cloud region, a CDN you do not use) lets anyone in it choose
//     their key. Never trust 0.0.0.0/0 or ::/0 on a server the internet can
//     reach directly: the key is then whatever the client writes.
//  4. Make sure the application is reachable only through the proxy, or
//     that direct clients are not inside a trusted prefix.
//  5. Behind several proxies (CDN, then load balancer, then ingress), trust
//     every one of them: the walk stops at the first proxy you did not
//     trust, and every client behind it shares that proxy's key.
//  6. With IPv6 clients, check that IPv6Prefix matches how your users'
//     networks are assigned (/64 per subscriber is common; some ISPs hand out
//     /56 or /48).
//  7. Decide what the adapter does on ErrNoKey (missing API key, no route
//     pattern, Unix socket peer): fall back to another key or reject. Never
//     let it skip limiting by accident.
package keyfunc
