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
	if !validHeaderName(name) { // "" included
		panic(fmt.Errorf("keyfunc: Header: %q is not a valid header name", name))
	}
	name = textproto.CanonicalMIMEHeaderKey(name)
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
