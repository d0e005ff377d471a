package redisstore

import (
	"fmt"
	"strings"

	"github.com/go-ratelimit/ratelimit/core"
)

// keyLayout builds the Redis key of a user key:
//
//	<prefix>:{<escaped user key>}:<the limiter's policy>:v3
//
// The braces are the Redis Cluster hash tag: only the escaped user key
// chooses the slot, so every key of one user key shares a slot, and a user
// key cannot choose it because '{' and '}' (and the escape character '%')
// are percent-escaped inside the tag. The prefix may not contain braces,
// so the first '{' of the key is always ours. The limiter's own policy in
// the suffix keeps limiters with different policies that share a prefix
// (stacked limits on one client: per second and per day) from reading
// each other's state; the policies given with one limiter's calls share
// its keys, the value recording the policy it was last written under (see
// "Policies per call" in package core). v3 is the value format, which
// records that policy (and, for a fixed window, its Limit): keys written
// before it are never read.
//
// Under policies made with core.AllOf each part has a key of its own, the
// user key's followed by ":<the part's label>": one slot for all of a user
// key's parts, and a part keeps its state across policies that have a part
// of its label. The limiter's policy in the key then names every part.
type keyLayout struct {
	head string // "<prefix>:{"
	tail string // "}:<policy>:v3"
}

func newKeyLayout(prefix string, p core.Policy) keyLayout {
	return keyLayout{head: prefix + ":{", tail: "}:" + policyTag(p) + ":v3"}
}

// key returns the Redis key of the user key k. A key needing no escape
// (the usual case) costs one allocation.
func (l keyLayout) key(k string) string { return l.head + tagged(k) + l.tail }

// tagged returns the user key k as it stands inside the hash tag.
func tagged(k string) string {
	if k == "" {
		// An empty tag "{}" would make Redis hash the whole name; "%"
		// alone is never the output of escape, so it names the empty key
		// without colliding with any other.
		return "%"
	}
	return keyEscaper.Replace(k) // k itself when it has nothing to escape
}

// keyEscaper percent-escapes '%', '{' and '}', which is injective:
// distinct user keys keep distinct Redis keys.
var keyEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// policyTag names a limiter's own policy in its keys: the algorithm, its
// numbers, whether a leaky bucket meters, and its name when it has one (two
// limiters of equal numbers apart, login and signup per IP, say).
func policyTag(p core.Policy) string {
	sep, fields := ":", []string{algorithmTags[p.Algorithm], fmt.Sprint(p.Limit), p.Window.String()}
	switch {
	case p.Parts() != nil: // its parts' tags instead
		sep, fields = "+", nil
		for _, q := range p.Parts() {
			fields = append(fields, policyTag(q))
		}
	case p.Algorithm == core.AlgLeakyBucket && p.Meter: // apart from a delaying one
		fields = append(fields, fmt.Sprint(p.Burst), "meter")
	case p.Algorithm == core.AlgTokenBucket || p.Algorithm == core.AlgLeakyBucket:
		fields = append(fields, fmt.Sprint(p.Burst))
	case p.Algorithm == core.AlgSlidingWindow:
		fields = append(fields, fmt.Sprint(p.Buckets))
	}
	if p.Name != "" {
		fields = append(fields, p.Name)
	}
	return strings.Join(fields, sep)
}

// algorithmTags name the algorithms' states in keys, by core.Algorithm.
var algorithmTags = [...]string{core.AlgFixedWindow: "fw", core.AlgSlidingWindow: "sw", core.AlgTokenBucket: "tb", core.AlgLeakyBucket: "lb"}
