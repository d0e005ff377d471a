package keyfunc_test

import (
	"testing"

	"github.com/go-ratelimit/ratelimit/keyfunc"
)

// TestPeerIPIsIPWithoutHTTP: PeerIP gives every connection and
// X-Forwarded-For the key IP gives the same request, trusted or not.
func TestPeerIPIsIPWithoutHTTP(t *testing.T) {
	for _, opts := range [][]keyfunc.IPOption{
		nil,
		{trustedProxies},
		{trustedProxies, keyfunc.IPv6Prefix(48)},
	} {
		ip, peerIP := keyfunc.IP(opts...), keyfunc.PeerIP(opts...)
		for _, peer := range []string{proxyPeer, "[fd00::1]:1", "[::ffff:10.0.0.1]:1", "198.51.100.9:1", "192.0.2.7", "[2001:db8:1:2::7]:1", "", "@"} {
			for _, lines := range [][]string{
				nil,
				{client},
				{"1.1.1.1, " + client + ", 10.0.0.2"},
				{"1.1.1.1", client, "10.0.0.2"},
				{"[2001:db8:1:2::7]:4711"},
				{"unknown, " + client},
				{client + ", unknown"},
				{"10.0.0.5, 10.0.0.3"},
			} {
				r := request(peer)
				if lines != nil {
					r.Header["X-Forwarded-For"] = lines
				}
				want, wantErr := ip(r)
				got, err := peerIP(peer, lines)
				if got != want || (err == nil) != (wantErr == nil) {
					t.Errorf("PeerIP(%d options)(%q, %q) = %q, %v; IP gives %q, %v", len(opts), peer, lines, got, err, want, wantErr)
				}
			}
		}
	}
}

func TestPeerIP(t *testing.T) {
	peerIP := keyfunc.PeerIP(trustedProxies)
	t.Run("ignores X-Forwarded-For from a peer outside the trusted prefixes", func(t *testing.T) {
		if got, _ := peerIP("198.51.100.9:1", []string{client}); got != "198.51.100.9" {
			t.Errorf("got %q, want the peer 198.51.100.9", got)
		}
	})
	t.Run("walks X-Forwarded-For from a trusted peer", func(t *testing.T) {
		if got, _ := peerIP(proxyPeer, []string{"1.1.1.1, " + client + ", 10.0.0.2"}); got != client {
			t.Errorf("got %q, want %q", got, client)
		}
	})
	t.Run("keys a trusted peer without X-Forwarded-For on itself", func(t *testing.T) {
		if got, _ := peerIP(proxyPeer, nil); got != "10.0.0.1" {
			t.Errorf("got %q, want 10.0.0.1", got)
		}
	})
	t.Run("fails with ErrNoKey for a peer that is not an IP address", func(t *testing.T) {
		key, err := peerIP("@", []string{client})
		wantNoKey(t, key, err)
	})
	t.Run("allocates nothing for an IPv4 peer", func(t *testing.T) {
		xff := []string{client}
		allocs := testing.AllocsPerRun(100, func() {
			if k, err := peerIP("192.0.2.7:51234", xff); err != nil || k != "192.0.2.7" {
				t.Fatalf("key %q, %v", k, err)
			}
		})
		if allocs != 0 {
			t.Errorf("got %v allocations, want 0", allocs)
		}
	})
	t.Run("panics with FromHeaders", func(t *testing.T) {
		err := panicError(t, func() { keyfunc.PeerIP(trustedProxies, keyfunc.FromHeaders("Forwarded")) })
		if want := "keyfunc: PeerIP: FromHeaders does not apply: PeerIP reads the X-Forwarded-For values it is given"; err.Error() != want {
			t.Errorf("got %v, want %s", err, want)
		}
	})
}
