package keyfunc_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/internal/testkit/assert"

	"github.com/go-ratelimit/ratelimit/keyfunc"
)

func TestHeader(t *testing.T) {
	apiKey := keyfunc.Header("X-API-Key")

	t.Run("keys on the header value", func(t *testing.T) {
		assert.Equal(t, "k-123", mustKey(t, apiKey, request(client+":1", "X-API-Key", "k-123")))
	})
	t.Run("matches the header name case-insensitively", func(t *testing.T) {
		lower := keyfunc.Header("x-api-key")
		assert.Equal(t, "k-123", mustKey(t, lower, request(client+":1", "X-Api-Key", "k-123")))
	})
	t.Run("uses the first line when the header repeats", func(t *testing.T) {
		r := request(client+":1", "X-API-Key", "first", "X-API-Key", "second")
		assert.Equal(t, "first", mustKey(t, apiKey, r))
	})
	t.Run("trims surrounding spaces and tabs", func(t *testing.T) {
		assert.Equal(t, "k 1", mustKey(t, apiKey, request(client+":1", "X-API-Key", " \tk 1\t ")))
	})
	t.Run("keeps a key of exactly MaxKeyLen bytes", func(t *testing.T) {
		v := strings.Repeat("k", keyfunc.MaxKeyLen)
		assert.Equal(t, v, mustKey(t, apiKey, request(client+":1", "X-API-Key", v)))
	})
	t.Run("hashes a longer key", func(t *testing.T) {
		v := strings.Repeat("k", keyfunc.MaxKeyLen+1)
		key := mustKey(t, apiKey, request(client+":1", "X-API-Key", v))
		assert.True(t, strings.HasPrefix(key, keyfunc.HashedKeyPrefix))
		assert.Len(t, key, 50)
	})
	for name, header := range map[string][]string{
		"missing":     nil,
		"empty":       {"X-API-Key", ""},
		"only spaces": {"X-API-Key", "  \t "},
	} {
		t.Run("fails with ErrNoKey when the header is "+name, func(t *testing.T) {
			key, err := apiKey(request(client+":1", header...))
			assert.ErrorIs(t, err, keyfunc.ErrNoKey)
			assert.EqualError(t, err, "keyfunc: no key in request: header X-Api-Key is missing or empty")
			assert.Empty(t, key)
		})
	}
	t.Run("fails with ErrNoKey when the header map is nil", func(t *testing.T) {
		_, err := apiKey(&http.Request{RemoteAddr: client + ":1"})
		assert.ErrorIs(t, err, keyfunc.ErrNoKey)
	})
}

func TestHeaderRejectsBadNames(t *testing.T) {
	for _, name := range []string{"", "X API Key", "X-API-Key:", "X-API-Key\r\n", "Ключ"} {
		t.Run("rejects "+quote(name), func(t *testing.T) {
			err := panicError(t, func() { keyfunc.Header(name) })
			assert.Contains(t, err.Error(), "keyfunc: Header: ")
		})
	}
}
