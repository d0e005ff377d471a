package keyfunc_test

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/keyfunc"
)

func TestJoin(t *testing.T) {
	r := request("192.0.2.1:1")
	r.Pattern = "/users/{id}"
	static := keyfunc.Static

	keys := []struct {
		name string
		f    keyfunc.Func
		want string
	}{
		{"length-prefixes each part", keyfunc.Join(keyfunc.Route(), keyfunc.IP()), "11:/users/{id}9:192.0.2.1"},
		// No two lists of parts share a key, whatever bytes they contain.
		{"a colon in the first part", keyfunc.Join(static("a:b"), static("c")), "3:a:b1:c"},
		{"a colon in the second part", keyfunc.Join(static("a"), static("b:c")), "1:a3:b:c"},
		{"a part that looks length-prefixed", keyfunc.Join(static("1:a")), "3:1:a"},
		{"an empty last part", keyfunc.Join(static("a"), static("")), "1:a0:"},
		{"one part", keyfunc.Join(static("a")), "1:a"},
	}
	for _, tt := range keys {
		t.Run(tt.name, func(t *testing.T) { wantKey(t, tt.f, r, tt.want) })
	}

	panics := []struct {
		name  string
		build func()
		want  string
	}{
		{"panics with no parts: Static is the one shared key", func() { keyfunc.Join() },
			"keyfunc: Join: no functions (Static gives every request one key)"},
		{"panics when a part is nil", func() { keyfunc.Join(keyfunc.Route(), nil) },
			"keyfunc: Join: function 2 of 2 is nil"},
	}
	for _, tt := range panics {
		t.Run(tt.name, func(t *testing.T) {
			if err := panicError(t, tt.build); err.Error() != tt.want {
				t.Errorf("got %v, want %s", err, tt.want)
			}
		})
	}

	t.Run("hashes a key longer than MaxKeyLen", func(t *testing.T) {
		f := keyfunc.Join(static(strings.Repeat("a", 200)), static(strings.Repeat("b", 60)))
		key := mustKey(t, f, r)
		if !strings.HasPrefix(key, keyfunc.HashedKeyPrefix) || len(key) != 50 {
			t.Errorf("got %q, want %s and 43 more bytes", key, keyfunc.HashedKeyPrefix)
		}
	})
	t.Run("returns the first error and calls no later part", func(t *testing.T) {
		first := errors.New("first")
		calledLater := false
		f := keyfunc.Join(
			static("x"),
			func(*http.Request) (string, error) { return "", first },
			func(*http.Request) (string, error) { calledLater = true; return "", errors.New("second") },
		)
		key, err := f(r)
		if key != "" || err != first {
			t.Errorf("got %q, %v; want no key and the first error itself", key, err)
		}
		if calledLater {
			t.Error("the part after the failing one was called")
		}
	})
	t.Run("passes ErrNoKey through", func(t *testing.T) {
		key, err := keyfunc.Join(keyfunc.IP(), keyfunc.Route())(request("192.0.2.1:1"))
		wantNoKey(t, key, err)
	})
	t.Run("is not affected by later changes to the caller's slice", func(t *testing.T) {
		parts := []keyfunc.Func{static("a")}
		f := keyfunc.Join(parts...)
		parts[0] = static("b")
		wantKey(t, f, r, "1:a")
	})
}

func TestStatic(t *testing.T) {
	t.Run("returns the same key for every request", func(t *testing.T) {
		f := keyfunc.Static("global")
		wantKey(t, f, request("192.0.2.1:1"), "global")
		wantKey(t, f, request("198.51.100.1:1"), "global")
	})
	t.Run("keeps an empty key", func(t *testing.T) {
		wantKey(t, keyfunc.Static(""), request("192.0.2.1:1"), "")
	})
	t.Run("hashes a key longer than MaxKeyLen", func(t *testing.T) {
		key := mustKey(t, keyfunc.Static(strings.Repeat("s", 300)), request("192.0.2.1:1"))
		if !strings.HasPrefix(key, keyfunc.HashedKeyPrefix) {
			t.Errorf("got %q, want a key starting %s", key, keyfunc.HashedKeyPrefix)
		}
	})
}

func TestHashedKeysNeverCollideWithRawKeys(t *testing.T) {
	apiKey := keyfunc.Header("X-API-Key")
	long := strings.Repeat("x", keyfunc.MaxKeyLen+1)
	hashed := mustKey(t, apiKey, request("192.0.2.1:1", "X-API-Key", long))

	t.Run("a client sending another key's hash gets a different key", func(t *testing.T) {
		forged := mustKey(t, apiKey, request("192.0.2.1:1", "X-API-Key", hashed))
		if forged == hashed {
			t.Errorf("a raw key equal to a hash kept the key %q", forged)
		}
		if !strings.HasPrefix(forged, keyfunc.HashedKeyPrefix) {
			t.Errorf("got %q: a raw key with the prefix must be hashed too", forged)
		}
	})
	t.Run("hashing is stable", func(t *testing.T) {
		wantKey(t, apiKey, request("198.51.100.1:1", "X-API-Key", long), hashed)
	})
	t.Run("a hash is the prefix and the unpadded base64url SHA-256", func(t *testing.T) {
		sum := sha256.Sum256([]byte(long))
		if want := "sha256:" + base64.RawURLEncoding.EncodeToString(sum[:]); hashed != want {
			t.Errorf("got %q, want %q", hashed, want)
		}
	})
}

func TestJoinKeysIsJoinsEncoding(t *testing.T) {
	r := request("192.0.2.1:1")
	static := keyfunc.Static
	for _, parts := range [][]string{
		{"a"},
		{"a:b", "c"},
		{"a", "b:c"},
		{"1:a"},
		{"a", ""},
		{"/pkg.Service/Method", "192.0.2.1"},
		{strings.Repeat("a", 200), strings.Repeat("b", 60)}, // hashed
	} {
		fs := make([]keyfunc.Func, len(parts))
		for i, p := range parts {
			fs[i] = static(p)
		}
		if got, want := keyfunc.JoinKeys(parts...), mustKey(t, keyfunc.Join(fs...), r); got != want {
			t.Errorf("JoinKeys(%q) = %q, want Join's %q", parts, got, want)
		}
	}
	if got, want := keyfunc.JoinKeys("/pkg.Service/Method", "192.0.2.1"), "19:/pkg.Service/Method9:192.0.2.1"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestBoundKeyIsHeadersBound(t *testing.T) {
	apiKey := keyfunc.Header("X-API-Key")
	for _, v := range []string{"k-1", strings.Repeat("k", 256), strings.Repeat("k", 257), keyfunc.HashedKeyPrefix + "x"} {
		if got, want := keyfunc.BoundKey(v), mustKey(t, apiKey, request("192.0.2.1:1", "X-API-Key", v)); got != want {
			t.Errorf("BoundKey(%.20q...) = %q, want Header's %q", v, got, want)
		}
	}
	if got := keyfunc.BoundKey(strings.Repeat("k", 257)); len(got) != 50 {
		t.Errorf("a 257-byte key gives %q, want a hash", got)
	}
}
