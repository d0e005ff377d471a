package grpcmw_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/grpcmw"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// callFrom is the context of a call from addr with the metadata pairs md.
func callFrom(addr net.Addr, md ...string) context.Context {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: addr})
	return metadata.NewIncomingContext(ctx, metadata.Pairs(md...))
}

func TestPeerKeys(t *testing.T) {
	plain, trusting := grpcmw.Peer(), grpcmw.Peer(keyfunc.TrustProxies("10.0.0.0/8"))
	for _, tt := range []struct {
		name string
		f    grpcmw.KeyFunc
		ctx  context.Context
		want string
	}{
		{"an IPv4 peer in 16-byte form is its dotted quad", plain, callFrom(&net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 1}), "192.0.2.1"},
		{"an IPv4-mapped peer is folded", plain, callFrom(&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.1"), Port: 1}), "192.0.2.1"},
		{"an IPv6 peer is its /64", plain, callFrom(&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::7"), Port: 1}), "2001:db8:1:2::/64"},
		{"a zoned IPv6 peer drops its zone (link-local: keyed whole, as keyfunc.IP)", plain, callFrom(&net.TCPAddr{IP: net.ParseIP("fe80::1"), Zone: "eth0", Port: 1}), "fe80::1"},
		{"x-forwarded-for is ignored without trusted proxies", plain, callFrom(&net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 1}, "x-forwarded-for", "203.0.113.7"), "10.0.0.1"},
		{"a trusted proxy's x-forwarded-for is walked", trusting, callFrom(&net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 1}, "x-forwarded-for", "1.1.1.1, 203.0.113.7, 10.0.0.2"), "203.0.113.7"},
		{"an untrusted peer's x-forwarded-for is ignored", trusting, callFrom(&net.TCPAddr{IP: net.ParseIP("198.51.100.9"), Port: 1}, "x-forwarded-for", "203.0.113.7"), "198.51.100.9"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := tt.f(tt.ctx, unaryCall); err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	for name, ctx := range map[string]context.Context{
		"a Unix socket peer": callFrom(&net.UnixAddr{Name: "@", Net: "unix"}),
		"no peer":            context.Background(),
	} {
		t.Run("fails with ErrNoKey for "+name, func(t *testing.T) {
			if key, err := plain(ctx, unaryCall); !errors.Is(err, keyfunc.ErrNoKey) || key != "" {
				t.Errorf("got %q, %v; want no key and ErrNoKey", key, err)
			}
		})
	}
}

func TestMetadataMethodJoin(t *testing.T) {
	ctx := callFrom(&net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 1}, "x-api-key", "k1")
	long := strings.Repeat("k", 300)
	for _, tt := range []struct {
		name string
		f    grpcmw.KeyFunc
		ctx  context.Context
		want string
	}{
		{"Metadata takes the value", grpcmw.Metadata("x-api-key"), ctx, "k1"},
		{"Metadata hashes a long value as keyfunc.Header does", grpcmw.Metadata("x-api-key"), callFrom(nil, "x-api-key", long), keyfunc.BoundKey(long)},
		{"Method is the full method", grpcmw.Method(), ctx, unaryCall},
		{"Join writes keyfunc.Join's encoding", grpcmw.Join(grpcmw.Method(), grpcmw.Peer()), ctx, keyfunc.JoinKeys(unaryCall, "192.0.2.1")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := tt.f(tt.ctx, unaryCall); err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	t.Run("Join returns the first error", func(t *testing.T) {
		if _, err := grpcmw.Join(grpcmw.Method(), grpcmw.Metadata("x-tenant"))(ctx, unaryCall); !errors.Is(err, keyfunc.ErrNoKey) {
			t.Errorf("got %v, want ErrNoKey", err)
		}
	})
	for _, tt := range []struct {
		build func()
		want  string
	}{
		{func() { grpcmw.Metadata("") }, "grpcmw: Metadata: empty metadata name"},
		{func() { grpcmw.Metadata("x api key") }, `grpcmw: Metadata: "x api key" is not a valid metadata name`},
		{func() { grpcmw.Metadata("grpc-timeout") }, `grpcmw: Metadata: "grpc-timeout" is reserved by gRPC`},
		{func() { grpcmw.Metadata("x-key-bin") }, `grpcmw: Metadata: "x-key-bin" is binary metadata; a key is text`},
		{func() { grpcmw.Join() }, "grpcmw: Join: no functions"},
		{func() { grpcmw.Join(grpcmw.Method(), nil) }, "grpcmw: Join: function 2 of 2 is nil"},
		{func() { grpcmw.Peer(keyfunc.FromHeaders("Forwarded")) }, "keyfunc: PeerIP: FromHeaders does not apply: PeerIP reads the X-Forwarded-For values it is given"},
		{func() { grpcmw.WithKey(nil) }, "grpcmw: WithKey: nil function"},
	} {
		if got := panicText(tt.build); got != tt.want {
			t.Errorf("got panic %q, want %q", got, tt.want)
		}
	}
}
