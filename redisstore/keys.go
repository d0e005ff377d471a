package redisstore

import (
	"fmt"
	"strings"

	"github.com/go-ratelimit/ratelimit/core"
)

// keyLayout builds the Redis key of a user key:
//
//	<prefix>:{<escaped user key>}:<policy>
//
// The braces are the Redis Cluster hash tag: only the escaped user key
// chooses the slot, so every key of one user key shares a slot, and a user
// key cannot choose it because '{' and '}' (and the escape character '%')
// are percent-escaped inside the tag. The prefix may not contain braces,
// so the first '{' of the key is always ours. The policy suffix keeps
// limiters with different policies (or algorithms) that share a prefix from
// reading each other's state.
type keyLayout struct {
	head string // "<prefix>:{"
	tail string // "}:<policy>"
}

func newKeyLayout(prefix string, p core.Policy) keyLayout {
	return keyLayout{head: prefix + ":{", tail: "}:" + policyTag(p)}
}

// key returns the Redis key of the user key k. A key needing no escape
// (the usual case) costs one allocation.
func (l keyLayout) key(k string) string {
	if k == "" {
		// An empty tag "{}" would make Redis hash the whole name; "%"
		// alone is never the output of escape, so it names the empty key
		// without colliding with any other.
		return l.head + "%" + l.tail
	}
	if strings.ContainsAny(k, "%{}") {
		k = escapeKey(k)
	}
	return l.head + k + l.tail
}

// escapeKey percent-escapes '%', '{' and '}', which is injective: distinct
// user keys keep distinct Redis keys.
func escapeKey(k string) string {
	var b strings.Builder
	b.Grow(len(k) + 8)
	for i := 0; i < len(k); i++ {
		switch c := k[i]; c {
		case '%':
			b.WriteString("%25")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// policyTag names a policy's state in the key: the algorithm and every
// number its state depends on (not the Name, which changes no state).
func policyTag(p core.Policy) string {
	switch p.Algorithm {
	case core.AlgTokenBucket:
		return fmt.Sprintf("tb:%d:%v:%d", p.Limit, p.Window, p.Burst)
	case core.AlgLeakyBucket:
		return fmt.Sprintf("lb:%d:%v:%d", p.Limit, p.Window, p.Burst)
	case core.AlgSlidingWindow:
		return fmt.Sprintf("sw:%d:%v:%d", p.Limit, p.Window, p.Buckets)
	default:
		return fmt.Sprintf("fw:%d:%v", p.Limit, p.Window)
	}
}

func validPrefix(prefix string) error {
	switch {
	case prefix == "":
		return fmt.Errorf("redisstore: WithPrefix needs a non-empty prefix")
	case strings.ContainsAny(prefix, "{}"):
		return fmt.Errorf("redisstore: WithPrefix(%q): a prefix may not contain '{' or '}' (the key's hash tag is the library's)", prefix)
	}
	return nil
}
