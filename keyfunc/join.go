package keyfunc

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
)

// Join returns a Func whose key combines the keys of fs, in order:
// Join(Route(), IP()) counts each client separately on each route. Each part
// is written as its length, a colon, then the part
// ("11:/users/{id}9:192.0.2.1"), so no two different lists of parts give the
// same key. The first error from fs is returned as it is. Join panics when
// fs is empty (use [Static]) or holds a nil function.
func Join(fs ...Func) Func {
	if len(fs) == 0 {
		panic(errors.New("keyfunc: Join: no functions (Static gives every request one key)"))
	}
	for i, f := range fs {
		if f == nil {
			panic(fmt.Errorf("keyfunc: Join: function %d of %d is nil", i+1, len(fs)))
		}
	}
	fs = slices.Clone(fs) // the caller may reuse its slice
	return func(r *http.Request) (string, error) {
		var buf [maxKeyLen]byte // the key is built here, off the heap
		key := buf[:0]
		for _, f := range fs {
			part, err := f(r)
			if err != nil {
				return "", err
			}
			key = appendPart(key, part)
		}
		return boundKey(key), nil
	}
}
