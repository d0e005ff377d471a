package keyfunc_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/keyfunc"
)

func TestHeader(t *testing.T) {
	apiKey := keyfunc.Header("X-API-Key")
	long := strings.Repeat("k", keyfunc.MaxKeyLen)
	tests := []struct {
		name   string
		f      keyfunc.Func
		header []string
		want   string
	}{
		{"keys on the header value", apiKey, []string{"X-API-Key", "k-123"}, "k-123"},
		{"matches the header name case-insensitively", keyfunc.Header("x-api-key"), []string{"X-Api-Key", "k-123"}, "k-123"},
		{"uses the first line when the header repeats", apiKey, []string{"X-API-Key", "first", "X-API-Key", "second"}, "first"},
		{"trims surrounding spaces and tabs", apiKey, []string{"X-API-Key", " \tk 1\t "}, "k 1"},
		{"keeps a key of exactly MaxKeyLen bytes", apiKey, []string{"X-API-Key", long}, long},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantKey(t, tt.f, request(client+":1", tt.header...), tt.want)
		})
	}

	t.Run("hashes a longer key", func(t *testing.T) {
		key := mustKey(t, apiKey, request(client+":1", "X-API-Key", long+"k"))
		if !strings.HasPrefix(key, keyfunc.HashedKeyPrefix) || len(key) != 50 {
			t.Errorf("got %q, want %s and 43 more bytes", key, keyfunc.HashedKeyPrefix)
		}
	})
	for name, header := range map[string][]string{
		"missing":     nil,
		"empty":       {"X-API-Key", ""},
		"only spaces": {"X-API-Key", "  \t "},
	} {
		t.Run("fails with ErrNoKey when the header is "+name, func(t *testing.T) {
			key, err := apiKey(request(client+":1", header...))
			wantNoKey(t, key, err)
			const want = "keyfunc: no key in request: header X-Api-Key is missing or empty"
			if err == nil || err.Error() != want {
				t.Errorf("got %v, want %s", err, want)
			}
		})
	}
	t.Run("fails with ErrNoKey when the header map is nil", func(t *testing.T) {
		key, err := apiKey(&http.Request{RemoteAddr: client + ":1"})
		wantNoKey(t, key, err)
	})
}

func TestHeaderRejectsBadNames(t *testing.T) {
	for _, name := range []string{"", "X API Key", "X-API-Key:", "X-API-Key\r\n", "Ключ"} {
		t.Run("rejects "+quote(name), func(t *testing.T) {
			err := panicError(t, func() { keyfunc.Header(name) })
			if !strings.Contains(err.Error(), "keyfunc: Header: ") {
				t.Errorf("got %v, want an error naming keyfunc: Header", err)
			}
		})
	}
}
