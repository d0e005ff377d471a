// Package script holds redisstore's Lua scripts, one per algorithm, each
// the same state machine as its in-memory counterpart in package core
// (same formulas, same Decision), run atomically by Redis: gcra.lua (the
// token and leaky bucket), fixedwindow.lua and slidingwindow.lua. Each is
// plain Lua that redis-cli --eval runs as it is, on the example policy of
// its header; a limiter's script is the file with its header (the first
// line of code) holding the limiter's own policy, and its parts after the
// first for a policy made with core.AllOf.
//
// One script call decides a batch of calls: it reads the server's TIME
// once, then decides the calls in order, as many separate calls at that
// instant would, several calls for one key included. It reads each key at
// most once and writes each changed key once, at the end, so that every
// read comes before any write: a script stopped by an error (a key another
// Cluster node serves) has changed nothing.
//
// A key has one state whatever policy it is decided under: its value
// records the numbers of the policy it was last written under, and a call
// under a policy with other numbers converts the state in the same script,
// before deciding ("Policies per call" in package core). A call that
// consumes writes the converted state only if admitted; a Peek or Get
// converts only what it reads.
//
// Time. Lua numbers are doubles, exact for integers up to 2^53. An instant
// is held as whole microseconds since the epoch (exact until the year
// 2255) plus a nanosecond remainder; spans are whole nanoseconds, exact up
// to 2^53 ns (104 days), and core.MaxSpan bounds every span a script forms
// to about twice that. A span beyond 2^62 ns, which only a clock stepped
// back by centuries forms, is reported as 2^62 ns. State is packed with
// Redis's struct library (one C call to read, one to write).
//
// Arguments, for m calls under E policies other than the limiter's own,
// each described by K numbers (see Args):
//
//	KEYS[i]          the key of call i
//	ARGV[i]          call i: its cost, to consume when admitted; 0 to
//	                 only look (Peek and Get: cost 1, nothing consumed);
//	                 -1-u to set the key's usage to u (Set); or the text
//	                 'delta at_us at_r reset', a settlement of delta
//	                 units of a cost charged at that instant, whose
//	                 decision gave the row that ResetAfter in ns: when its
//	                 charge was all back, for a delaying leaky bucket the
//	                 TAT its admission set (Settle; replies zeros)
//	ARGV[m+i]        only when E > 0: call i's policy, 0 for the
//	                 limiter's own, e for the e-th given below; -e for a
//	                 part of the call before it (a policy made with
//	                 core.AllOf); -E-j for part j+1 of the limiter's own
//	                 policy made with core.AllOf, whose parts the header
//	                 holds (with E = 0 each call is then one row per part)
//	then E*K         the numbers of each of the E policies
//	ARGV[#ARGV-2]    E
//	ARGV[#ARGV-1]    "" to read the server's TIME; else now in µs (tests)
//	ARGV[#ARGV]      now's nanosecond remainder (tests)
//
// The last three are left out when E = 0 and the script reads the
// server's TIME, but for the cross-slot form: a keyed call without them
// has one argument per key.
//
// The cross-slot form (Redis 7's allow-cross-slot-keys flag, a first line
// the scripts are sent with) takes no KEYS: ARGV[i] is the key of call i,
// and the arguments above follow, m places further on. It decides keys of
// many slots that one Cluster node serves in one script call.
//
// A call of cost n > 0 and the rows of parts that follow it are a group:
// each row is decided and charged once, the state it replaced kept; if a
// row denies, every row's state is put back and the rows are decided again
// without consuming, so that a denial charges no part. A denied group
// replies the rows as decided without consuming.
//
// Reply: one string of 5m little-endian 64-bit integers, for each call in
// order {allowed, remaining, resetAfter, retryAfter, delay}, the durations
// in ns; for a call that only looks, the fifth is the key's usage instead;
// a Set replies zeros. A denial decided on a state converted from another
// policy, which is not written, replies -1 in the fifth: its RetryAfter
// would go stale at another rate, so the deny cache must not keep it.
// Then two more: the script's now, in µs and the ns remainder, the At of
// every call's Decision.
package script
