package keyfunc

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
)

// Func turns a request into the key it is counted under, or an error
// wrapping [ErrNoKey] when the request carries nothing to count it under.
// Every Func of this package is safe for simultaneous use by multiple
// goroutines and never modifies the request.
type Func func(*http.Request) (string, error)

// ErrNoKey is wrapped by the errors a Func returns when the request has no
// key: a missing API-key header, no matched route, a peer that is not an IP
// address.
var ErrNoKey = errors.New("keyfunc: no key in request")

// maxKeyLen is the longest key returned as it is. Longer keys (from Header
// or Join) are replaced by their hash, so a huge header cannot become a huge
// map or Redis key.
const maxKeyLen = 256

// hashedKeyPrefix starts every hashed key: "sha256:" followed by the
// unpadded base64url SHA-256 of the original key (50 bytes in all). A
// short key that happens to start with this prefix is hashed too, so a
// client can never choose a key equal to the hash of another one.
const hashedKeyPrefix = "sha256:"

// Static returns a Func that counts every request under key: one limit
// shared by all clients, or a namespace for [Join]: Join(Static("login"),
// IP()).
func Static(key string) Func {
	key = boundKey(key)
	return func(*http.Request) (string, error) { return key, nil }
}

// boundKey returns key itself when it is short and cannot be mistaken for a
// hashed key, and its hash otherwise. The common path allocates nothing for
// a string, and for a key being assembled in a buffer exactly the returned
// string.
func boundKey[K string | []byte](key K) string {
	if len(key) <= maxKeyLen && !strings.HasPrefix(string(key), hashedKeyPrefix) {
		return string(key)
	}
	return hashKey([]byte(key))
}

func hashKey(key []byte) string {
	sum := sha256.Sum256(key)
	var buf [len(hashedKeyPrefix) + 43]byte // 43 = unpadded base64 of 32 bytes
	n := copy(buf[:], hashedKeyPrefix)
	base64.RawURLEncoding.Encode(buf[n:], sum[:])
	return string(buf[:])
}
