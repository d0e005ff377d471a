package keyfunc

import (
	"fmt"
	"net/http"
	"net/textproto"
)

// Header returns a Func whose key is the value of the named request header,
// typically an API key: Header("X-API-Key"). The key is the first line of
// the header with surrounding spaces and tabs removed; a missing or blank
// header gives an error wrapping [ErrNoKey]. The value is used as sent:
// authenticate before counting, or expect one bucket per made-up key. Header
// panics for an empty or invalid header name.
func Header(name string) Func {
	name = headerKey("Header", name)
	// Built once: a missing key is common (anonymous clients) and should
	// cost nothing.
	missing := fmt.Errorf("%w: header %s is missing or empty", ErrNoKey, name)
	return func(r *http.Request) (string, error) {
		lines := r.Header[name]
		if len(lines) == 0 {
			return "", missing
		}
		v := trimOWS(lines[0])
		if v == "" {
			return "", missing
		}
		return boundKey(v), nil
	}
}

// headerKey is name as a canonical header key, for the constructor fn. It
// panics for a name that is not a valid field name (a token), "" included.
func headerKey(fn, name string) string {
	if token, rest := cutToken(name); token == "" || rest != "" {
		panic(fmt.Errorf("keyfunc: %s: %q is not a valid header name", fn, name))
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}
