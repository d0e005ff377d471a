package keyfunc_test

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/internal/testkit/assert"

	"github.com/go-ratelimit/ratelimit/keyfunc"
)

func TestJoin(t *testing.T) {
	r := request("192.0.2.1:1")
	r.Pattern = "/users/{id}"

	t.Run("length-prefixes each part", func(t *testing.T) {
		f := keyfunc.Join(keyfunc.Route(), keyfunc.IP())
		assert.Equal(t, "11:/users/{id}9:192.0.2.1", mustKey(t, f, r))
	})
	t.Run("keeps parts apart whatever bytes they contain", func(t *testing.T) {
		ab := keyfunc.Join(keyfunc.Static("a:b"), keyfunc.Static("c"))
		a := keyfunc.Join(keyfunc.Static("a"), keyfunc.Static("b:c"))
		colon := keyfunc.Join(keyfunc.Static("1:a"))
		two := keyfunc.Join(keyfunc.Static("a"), keyfunc.Static(""))
		one := keyfunc.Join(keyfunc.Static("a"))
		keys := []string{mustKey(t, ab, r), mustKey(t, a, r), mustKey(t, colon, r), mustKey(t, two, r), mustKey(t, one, r)}
		assert.Equal(t, []string{"3:a:b1:c", "1:a3:b:c", "3:1:a", "1:a0:", "1:a"}, keys)
	})
	t.Run("panics with no parts: Static is the one shared key", func(t *testing.T) {
		assert.PanicsWithError(t, "keyfunc: Join: no functions (Static gives every request one key)", func() { keyfunc.Join() })
		assert.Equal(t, "", mustKey(t, keyfunc.Static(""), r))
	})
	t.Run("hashes a key longer than MaxKeyLen", func(t *testing.T) {
		f := keyfunc.Join(keyfunc.Static(strings.Repeat("a", 200)), keyfunc.Static(strings.Repeat("b", 60)))
		key := mustKey(t, f, r)
		assert.True(t, strings.HasPrefix(key, keyfunc.HashedKeyPrefix), key)
		assert.Len(t, key, 50)
	})
	t.Run("returns the first error and calls no later part", func(t *testing.T) {
		first := errors.New("first")
		calledLater := false
		f := keyfunc.Join(
			keyfunc.Static("x"),
			func(*http.Request) (string, error) { return "", first },
			func(*http.Request) (string, error) { calledLater = true; return "", errors.New("second") },
		)
		key, err := f(r)
		assert.Same(t, first, err)
		assert.Empty(t, key)
		assert.False(t, calledLater)
	})
	t.Run("passes ErrNoKey through", func(t *testing.T) {
		_, err := keyfunc.Join(keyfunc.IP(), keyfunc.Route())(request("192.0.2.1:1"))
		assert.ErrorIs(t, err, keyfunc.ErrNoKey)
	})
	t.Run("panics when a part is nil", func(t *testing.T) {
		assert.PanicsWithError(t, "keyfunc: Join: function 2 of 2 is nil", func() { keyfunc.Join(keyfunc.Route(), nil) })
	})
	t.Run("is not affected by later changes to the caller's slice", func(t *testing.T) {
		parts := []keyfunc.Func{keyfunc.Static("a")}
		f := keyfunc.Join(parts...)
		parts[0] = keyfunc.Static("b")
		assert.Equal(t, "1:a", mustKey(t, f, r))
	})
}

func TestStatic(t *testing.T) {
	r := request("192.0.2.1:1")
	t.Run("returns the same key for every request", func(t *testing.T) {
		f := keyfunc.Static("global")
		assert.Equal(t, "global", mustKey(t, f, r))
		assert.Equal(t, "global", mustKey(t, f, request("198.51.100.1:1")))
	})
	t.Run("hashes a key longer than MaxKeyLen", func(t *testing.T) {
		key := mustKey(t, keyfunc.Static(strings.Repeat("s", 300)), r)
		assert.True(t, strings.HasPrefix(key, keyfunc.HashedKeyPrefix))
	})
}

func TestHashedKeysNeverCollideWithRawKeys(t *testing.T) {
	apiKey := keyfunc.Header("X-API-Key")
	long := strings.Repeat("x", keyfunc.MaxKeyLen+1)
	hashed := mustKey(t, apiKey, request("192.0.2.1:1", "X-API-Key", long))

	t.Run("a client sending another key's hash gets a different key", func(t *testing.T) {
		forged := mustKey(t, apiKey, request("192.0.2.1:1", "X-API-Key", hashed))
		assert.NotEqual(t, hashed, forged)
		assert.True(t, strings.HasPrefix(forged, keyfunc.HashedKeyPrefix), "a raw key with the prefix is hashed too")
	})
	t.Run("hashing is stable", func(t *testing.T) {
		assert.Equal(t, hashed, mustKey(t, apiKey, request("198.51.100.1:1", "X-API-Key", long)))
	})
	t.Run("a hash is the prefix and the unpadded base64url SHA-256", func(t *testing.T) {
		sum := sha256.Sum256([]byte(long))
		assert.Equal(t, "sha256:"+base64.RawURLEncoding.EncodeToString(sum[:]), hashed)
	})
}
