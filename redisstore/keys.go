package redisstore

import (
	"fmt"
	"strings"

	"github.com/go-ratelimit/ratelimit/core"
)

// keyLayout builds the Redis key of a user key:
//
//	<prefix>:{<escaped user key>}:<algorithm>
//
// The braces are the Redis Cluster hash tag: only the escaped user key
// chooses the slot, so every key of one user key shares a slot, and a user
// key cannot choose it because '{' and '}' (and the escape character '%')
// are percent-escaped inside the tag. The prefix may not contain braces,
// so the first '{' of the key is always ours. The algorithm suffix keeps
// limiters of different algorithms that share a prefix from reading each
// other's state; limiters of one algorithm share the key, whatever their
// policies, as the policies given with calls do (see "Policies per call"
// in the package docs): the value records the policy it was written under.
type keyLayout struct {
	head string // "<prefix>:{"
	tail string // "}:<algorithm>"
}

func newKeyLayout(prefix string, p core.Policy) keyLayout {
	return keyLayout{head: prefix + ":{", tail: "}:" + algorithmTag(p.Algorithm)}
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

// algorithmTag names an algorithm's state in the key.
func algorithmTag(a core.Algorithm) string {
	switch a {
	case core.AlgTokenBucket:
		return "tb"
	case core.AlgLeakyBucket:
		return "lb"
	case core.AlgSlidingWindow:
		return "sw"
	default:
		return "fw"
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
