package redisstore

import (
	"sync"
	"sync/atomic"

	"github.com/go-ratelimit/ratelimit/redisstore/internal/script"
)

// pspec is a policy given with a call (AllowPolicy, Get, Set) that differs
// from the limiter's own in a number its state depends on, as the script
// receives it, or the limiter's own (Limiter.own), whose numbers the
// script has written in.
type pspec struct {
	// id is the deny cache's name for it: 0 the limiter's own, >= 1 a
	// policy the spec cache holds, uncached one that no entry has.
	id uint64
	// Its parts (the policy alone when it has none), and whether it has
	// parts.
	parts []part
	all   bool
}

// part is a part of a policy: its keys' tail (keyLayout) and its numbers
// for the scripts. Under a limiter of a policy of one part, the one part
// has the limiter's keys.
type part struct {
	tail string
	args *script.Policy
}

// maxSpecs bounds the policies a limiter keeps converted for the scripts:
// plans are few, and policies beyond the bound still work (converted on
// every call, their denials not cached).
const maxSpecs = 1024

// uncached is the id of a policy beyond maxSpecs: its denials are not
// cached.
const uncached = ^uint64(0)

// specCache holds the specs of the policies given with calls, by policy:
// without its Name, but under a limiter of policies made with AllOf, where
// a policy of one part is keyed by its label (see Limiter.spec).
type specCache struct {
	m    sync.Map // core.Policy -> *pspec
	n    atomic.Int64
	next atomic.Uint64
}
