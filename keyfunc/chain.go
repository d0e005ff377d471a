package keyfunc

import (
	"net/netip"
	"strconv"
	"strings"
)

// walk reads the proxy chain in the header lines, right to left (each proxy
// appends the address it received the request from), and returns the first
// hop outside the trusted prefixes; the leftmost hop if all are trusted; the
// peer if a hop that must be read cannot be (fail closed).
func (c *ipConfig) walk(name string, lines []string, peer netip.Addr) netip.Addr {
	client := peer // the answer so far: the leftmost trusted hop seen
	// step visits the next hop to the left and reports whether the walk is
	// over, with the answer in client.
	step := func(a netip.Addr, ok bool) (done bool) {
		if !ok {
			// A trusted proxy wrote something that is not an address
			// ("unknown", an obfuscated name, garbage). Nothing to its left
			// can be placed, and the hops to its right are our own proxies,
			// so the only answer no client chose is the peer itself.
			client = peer
			return true
		}
		client = canonicalAddr(a)
		return !c.isTrusted(client)
	}
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		if name == headerForwarded {
			var buf [8]string // enough for the usual chain without allocating
			elems := splitForwarded(buf[:0], line)
			for j := len(elems) - 1; j >= 0; j-- {
				if step(forwardedFor(elems[j])) {
					return client
				}
			}
			continue
		}
		for {
			comma := strings.LastIndexByte(line, ',')
			if step(parseNode(trimOWS(line[comma+1:]))) {
				return client
			}
			if comma < 0 {
				break
			}
			line = line[:comma]
		}
	}
	return client
}

// splitForwarded appends the comma-separated elements of a Forwarded line to
// dst, ignoring commas inside quoted strings. An unterminated quote runs to
// the end of the line, and its element then fails to parse.
func splitForwarded(dst []string, line string) []string {
	start, quoted := 0, false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quoted && c == '\\':
			i++ // quoted-pair: the next byte is literal
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			dst = append(dst, line[start:i])
			start = i + 1
		}
	}
	return append(dst, line[start:])
}

// forwardedFor returns the address in the for= parameter of one Forwarded
// element (RFC 7239 §4), strictly: ok is false when the element has no for=,
// has two, is malformed anywhere, or names no address ("unknown", an
// obfuscated "_name", an unquoted IPv6 or port, a quoted-pair escape).
func forwardedFor(elem string) (addr netip.Addr, ok bool) {
	s := trimOWS(elem)
	seen := false
	for s != "" {
		name, rest := cutToken(s)
		rest, eq := strings.CutPrefix(rest, "=")
		if name == "" || !eq {
			return netip.Addr{}, false
		}
		var value string
		if quoted, isQuoted := strings.CutPrefix(rest, `"`); isQuoted {
			var closed bool
			value, rest, closed = strings.Cut(quoted, `"`)
			// No address needs escaping; refusing escapes keeps this
			// reading identical to every other parser's.
			if !closed || strings.Contains(value, `\`) {
				return netip.Addr{}, false
			}
		} else if value, rest = cutToken(rest); value == "" {
			return netip.Addr{}, false
		}
		if strings.EqualFold(name, "for") {
			if seen {
				return netip.Addr{}, false
			}
			seen = true
			addr, ok = parseNode(value)
		}
		rest = trimOWS(rest)
		if rest == "" {
			break
		}
		if rest[0] != ';' {
			return netip.Addr{}, false
		}
		s = trimOWS(rest[1:])
	}
	return addr, ok // the zero Addr and false if no for= was seen
}

// parseNode parses one hop as proxies write it: "192.0.2.1",
// "192.0.2.1:8080", "2001:db8::1", "[2001:db8::1]", "[2001:db8::1]:8080",
// with a decimal or RFC 7239 obfuscated ("_abc") port. Nothing else is an
// address; in particular "unknown" and "_hidden" are not.
func parseNode(s string) (netip.Addr, bool) {
	// The shape picks the parser, so that a well-formed hop never goes
	// through a failed parse (each failure allocates an error).
	switch colon := strings.IndexByte(s, ':'); {
	case strings.HasPrefix(s, "["):
		host, rest, closed := strings.Cut(s[1:], "]")
		port, colonFirst := strings.CutPrefix(rest, ":")
		if !closed || rest != "" && !colonFirst {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || (port != "" && !validPort(port)) {
			return netip.Addr{}, false
		}
		return a, true
	case colon >= 0 && strings.IndexByte(s[colon+1:], ':') < 0:
		// One colon: only IPv4 with a port. (IPv6 has at least two.)
		host, port := s[:colon], s[colon+1:]
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is4() || !validPort(port) {
			return netip.Addr{}, false
		}
		return a, true
	default:
		a, err := netip.ParseAddr(s)
		return a, err == nil
	}
}

// validPort accepts a decimal port (0-65535) or an obfuscated one
// ("_" followed by ALPHA / DIGIT / "." / "_" / "-", RFC 7239 §6.3).
func validPort(p string) bool {
	if name, ok := strings.CutPrefix(p, "_"); ok {
		for i := 0; i < len(name); i++ {
			if c := name[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
				return false
			}
		}
		return name != ""
	}
	_, err := strconv.ParseUint(p, 10, 16) // digits only, at most 65535
	return len(p) <= 5 && err == nil
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// isTokenChar reports whether c is a tchar (RFC 9110 §5.6.2).
func isTokenChar(c byte) bool {
	return isAlnum(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// cutToken splits s after its leading run of token characters.
func cutToken(s string) (token, rest string) {
	i := 0
	for i < len(s) && isTokenChar(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

// trimOWS removes optional whitespace (spaces and tabs) around s.
func trimOWS(s string) string {
	return strings.Trim(s, " \t")
}
