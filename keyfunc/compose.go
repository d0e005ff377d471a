package keyfunc

import "strconv"

// JoinKeys is the key [Join] gives a request whose functions returned
// parts, in order, for keys put together outside a Func (grpcmw joins the
// keys of gRPC calls with it): each part written as its length, a colon,
// then the part, so no two different lists of parts give the same key, and
// a key longer than 256 bytes hashed.
func JoinKeys(parts ...string) string {
	var buf [maxKeyLen]byte // the key is built here, off the heap
	key := buf[:0]
	for _, part := range parts {
		key = appendPart(key, part)
	}
	return boundKey(key)
}

// BoundKey is the key a Func of this package makes of the value key (an
// API key, a method name) for keys taken outside a Func (grpcmw takes
// them from gRPC metadata): key itself, unless it is longer than 256 bytes
// or starts with "sha256:", when it is replaced by its hash.
func BoundKey(key string) string { return boundKey(key) }

// appendPart appends one part of a joined key to key.
func appendPart(key []byte, part string) []byte {
	key = strconv.AppendInt(key, int64(len(part)), 10)
	key = append(key, ':')
	return append(key, part...)
}
