package redisstore

import (
	"sync"
	"sync/atomic"

	"github.com/go-ratelimit/ratelimit/redisstore/internal/script"
)

// pspec is a policy given with a call (AllowPolicy, Get, Set) that differs
// from the limiter's own in a number its state depends on, as the script
// receives it. A nil *pspec is the limiter's own policy (Limiter.own),
// whose numbers the script has written in.
type pspec struct {
	id uint64 // the deny cache's name for it, >= 1; 0 when not cached
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

// pid is the deny cache's name of the policy: 0 for the limiter's own,
// and for a policy whose denials are not cached one that no entry has.
func (ps *pspec) pid() uint64 {
	switch {
	case ps == nil:
		return 0
	case ps.id == 0:
		return ^uint64(0)
	}
	return ps.id
}

// maxSpecs bounds the policies a limiter keeps converted for the scripts:
// plans are few, and policies beyond the bound still work (converted on
// every call, their denials not cached).
const maxSpecs = 1024

// specCache holds the specs of the policies given with calls, by policy
// without its Name.
type specCache struct {
	m    sync.Map // core.Policy -> *pspec
	n    atomic.Int64
	next atomic.Uint64
}
