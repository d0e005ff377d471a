package grpcmw

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/go-ratelimit/ratelimit/keyfunc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// KeyFunc turns a call into the key it is counted under, or an error
// wrapping [keyfunc.ErrNoKey] when the call carries nothing to count it
// under. fullMethod is "/package.Service/Method". The key functions of this
// package are safe for simultaneous use and give the keys their keyfunc
// counterparts give an HTTP request, so one limiter can count a client
// across both.
type KeyFunc func(ctx context.Context, fullMethod string) (string, error)

// metadataXForwardedFor is the metadata a trusted proxy (Envoy, a gRPC
// load balancer) appends the caller's address to.
const metadataXForwardedFor = "x-forwarded-for"

// Peer returns a KeyFunc whose key is the caller's IP address, as
// [keyfunc.IP] finds and writes it: the connection's peer (IPv4-mapped
// addresses folded, IPv6 masked to its /64), unless the peer is inside a
// prefix given with [keyfunc.TrustProxies]; from such a peer only, the
// x-forwarded-for metadata is walked from the right, past every trusted
// address. Metadata from any other peer is ignored, whoever wrote it. A
// peer that is not an IP address (a Unix socket) gives an error wrapping
// keyfunc.ErrNoKey. It panics as [keyfunc.PeerIP] does, for
// [keyfunc.FromHeaders]: only x-forwarded-for is read.
func Peer(opts ...keyfunc.IPOption) KeyFunc {
	ip := keyfunc.PeerIP(opts...)
	// Without options no peer is trusted, and the metadata is never read:
	// looking for a missing name costs a walk of all the call's metadata.
	trusting := len(opts) > 0
	return func(ctx context.Context, _ string) (string, error) {
		p, ok := peer.FromContext(ctx)
		if !ok || p.Addr == nil {
			return "", errNoPeer
		}
		var xff []string
		if trusting {
			xff = metadata.ValueFromIncomingContext(ctx, metadataXForwardedFor)
		}
		return ip(addrString(p.Addr), xff)
	}
}

// addrString is a.String(), in one allocation for a TCP peer (String takes
// two), with an IPv4 address written as IPv4, so that keyfunc.PeerIP keys
// it without another.
func addrString(a net.Addr) string {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	ip, _ := netip.AddrFromSlice(t.IP)
	var buf [len("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff%") + 16 + len("]:65535")]byte
	return string(netip.AddrPortFrom(ip.Unmap().WithZone(t.Zone), uint16(t.Port)).AppendTo(buf[:0]))
}

var errNoPeer = fmt.Errorf("%w: the call has no peer address", keyfunc.ErrNoKey)

// Metadata returns a KeyFunc whose key is the value of the named request
// metadata, typically an API key: Metadata("x-api-key"). The key is the
// first value with surrounding spaces and tabs removed, as
// [keyfunc.Header] takes it (so an API key sent over HTTP and over gRPC is
// one key); a missing or blank value gives an error wrapping
// keyfunc.ErrNoKey. The value is used as sent: authenticate before
// counting, or expect one bucket per made-up key. Metadata panics for a
// name gRPC does not accept (lowercase letters, digits, "-", "_" and "."
// only; upper case is folded), a reserved "grpc-" name or a binary "-bin"
// one.
func Metadata(name string) KeyFunc {
	name = strings.ToLower(name)
	if err := checkMetadataName(name); err != nil {
		panic(fmt.Errorf("grpcmw: Metadata: %w", err))
	}
	missing := fmt.Errorf("%w: metadata %s is missing or empty", keyfunc.ErrNoKey, name)
	return func(ctx context.Context, _ string) (string, error) {
		values := metadata.ValueFromIncomingContext(ctx, name)
		if len(values) == 0 {
			return "", missing
		}
		v := strings.Trim(values[0], " \t")
		if v == "" {
			return "", missing
		}
		return keyfunc.BoundKey(v), nil
	}
}

func checkMetadataName(name string) error {
	switch {
	case name == "":
		return errors.New("empty metadata name")
	case strings.HasPrefix(name, "grpc-"):
		return fmt.Errorf("%q is reserved by gRPC", name)
	case strings.HasSuffix(name, "-bin"):
		return fmt.Errorf("%q is binary metadata; a key is text", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%q is not a valid metadata name", name)
		}
	}
	return nil
}

// Method returns a KeyFunc whose key is the full method,
// "/package.Service/Method": one limit per method, shared by every caller,
// or per method per caller with [Join]. Only registered methods reach an
// interceptor, unless the server has an UnknownServiceHandler: then the
// caller chooses the name, and long names are hashed as every key is.
func Method() KeyFunc {
	return func(_ context.Context, fullMethod string) (string, error) {
		return keyfunc.BoundKey(fullMethod), nil
	}
}

// Join returns a KeyFunc whose key combines the keys of fs, in order, as
// [keyfunc.Join] writes them (with [keyfunc.JoinKeys]): Join(Method(),
// Peer()) counts each caller separately on each method. The first error
// from fs is returned as it is. Join panics when fs is empty or holds a nil
// function.
func Join(fs ...KeyFunc) KeyFunc {
	if len(fs) == 0 {
		panic(errors.New("grpcmw: Join: no functions"))
	}
	for i, f := range fs {
		if f == nil {
			panic(fmt.Errorf("grpcmw: Join: function %d of %d is nil", i+1, len(fs)))
		}
	}
	fs = append([]KeyFunc(nil), fs...) // the caller may reuse its slice
	return func(ctx context.Context, fullMethod string) (string, error) {
		var buf [4]string // the parts stay on the stack
		parts := buf[:0]
		for _, f := range fs {
			part, err := f(ctx, fullMethod)
			if err != nil {
				return "", err
			}
			parts = append(parts, part)
		}
		return keyfunc.JoinKeys(parts...), nil
	}
}
