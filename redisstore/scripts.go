package redisstore

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/core"
)

// The Lua scripts, one per algorithm, each the same state machine as its
// in-memory counterpart in package core (same formulas, same Decision),
// evaluated atomically on the server. Each limiter's script is generated
// with its policy's numbers written in as constants: converting arguments
// with tonumber on every call measured about a quarter of the script's
// server time, and server time is what all app servers share.
//
// Time. Lua numbers are doubles, exact for integers up to 2^53. An instant
// is held as whole microseconds since the epoch (about 1.8e15, exact until
// the year 2255) plus a nanosecond remainder; spans (ResetAfter, a bucket's
// TAT ahead of now, ...) are whole nanoseconds, exact up to 2^53 ns (104
// days). The longest span a script forms is about twice the policy's
// Recovery time (a TAT up to Recovery ahead plus a cost of up to Recovery),
// so New accepts Recovery times up to 2^52 ns, about 52 days. Redis's TIME
// has microsecond resolution, so in production now's remainder is 0.
//
// State is packed with Redis's struct library (one C call to read, one to
// write, where parsing decimal strings in Lua measured several times
// slower).
//
// Arguments:
//
//	KEYS[1]  the state key
//	ARGV[1]  n, the cost
//	ARGV[2]  "1" to consume when admitted, "0" to only look (Peek)
//	ARGV[3]  "" to read the server's TIME; else now in µs (tests only)
//	ARGV[4]  now's nanosecond remainder (tests only)
//
// Reply: an array {allowed, remaining, resetAfter, retryAfter, delay}, the
// durations in ns.
const luaPrelude = `
local n = tonumber(ARGV[1])
local now_us, now_r = tonumber(ARGV[3]), 0
if now_us then now_r = tonumber(ARGV[4]) else
  local t = redis.call('TIME')
  now_us = t[1] * 1000000 + t[2]
end
`

// luaSpan computes, for the policy's span (a fixed window or a sliding
// window's bucket) of w = a*1000 + b ns (a µs and b < 1000 ns), the number
// q of the span now falls in, counted from the epoch, and now's offset rem
// into it in ns. Every product stays below 2^53, so q and rem are exact; the
// float division only guesses q. Placeholders: a, b.
const luaSpan = `
local a, b = %d, %d
local w = a * 1000 + b
local q = math.floor((now_us + now_r / 1000) / (a + b / 1000))
local rem = (now_us - q * a) * 1000 + now_r - q * b
while rem < 0 do q, rem = q - 1, rem + w end
while rem >= w do q, rem = q + 1, rem - w end
`

// luaGCRA is core/tokenbucket.go: the token and leaky bucket's theoretical
// arrival time (TAT), stored as struct "<dH": whole µs and the ns
// remainder. Placeholders: interval (Window/Limit) and tau (Burst *
// interval) in ns, the expiry in ms, and whether a leaky bucket delays.
//
// math.floor(x / interval) is exact for 0 <= x < 2^53: a quotient that is
// not an integer is at least 1/interval below the next one, more than the
// division's rounding error.
const luaGCRA = luaPrelude + `
local interval, tau, ttl, delays = %d, %d, '%d', %t
local base = 0 -- max(tat, now) - now
local tat = redis.call('GET', KEYS[1])
if tat then
  local us, r = struct.unpack('<dH', tat)
  base = (us - now_us) * 1000 + r - now_r
  if base < 0 then base = 0 end
end
local nxt = base + n * interval -- the new tat - now
if nxt > tau then
  local left = tau - base
  if left < 0 then left = 0 end
  return {0, math.floor(left / interval), base, nxt - tau, 0}
end
if ARGV[2] ~= '1' then
  return {1, math.floor((tau - base) / interval), base, 0, 0}
end
local t = now_r + nxt
local carry = math.floor(t / 1000)
redis.call('SET', KEYS[1], struct.pack('<dH', now_us + carry, t - carry * 1000), 'PX', ttl)
local delay = 0
if delays then delay = base end
return {1, math.floor((tau - nxt) / interval), nxt, 0, delay}
`

// luaFixedWindow is core/fixedwindow.go: the window number and the count
// admitted in it, stored as struct "<dI4". Placeholders: the span's a and
// b, then Limit and the expiry in ms.
const luaFixedWindow = luaPrelude + luaSpan + `
local limit, ttl = %d, %d
local count, back = 0, 0 -- back: windows the stored one is ahead of now's
local v = redis.call('GET', KEYS[1])
if v then
  local stored, c = struct.unpack('<dI4', v)
  if stored >= q then
    -- A clock that stepped back stays in the stored window, so it cannot
    -- reopen a used-up window.
    count, back = c, stored - q
  end
end
local untilEnd = (back + 1) * w - rem
if count + n > limit then
  return {0, limit - count, untilEnd, untilEnd, 0}
end
if ARGV[2] ~= '1' then
  if count == 0 then untilEnd = 0 end
  return {1, limit - count, untilEnd, 0, 0}
end
-- The key lives until its window ends: longer than ttl only after the
-- clock stepped back.
local px = math.ceil(untilEnd / 1000000)
if px < ttl then px = ttl end
redis.call('SET', KEYS[1], struct.pack('<dI4', q + back, count + n), 'PX', string.format('%%d', px))
return {1, limit - count - n, untilEnd, 0, 0}
`

// luaSlidingWindow is core/slidingwindow.go: the number of the newest
// bucket written and a ring of Buckets+1 counters, the count of bucket b at
// position b mod (B+1), stored as struct "<d" then B+1 times "I4". A
// request in bucket k is admitted when the B buckets k-B+1..k hold at most
// Limit and the B+1 buckets k-B..k at most cap2 = Policy.MaxInWindow() =
// Limit + ceil(Limit/B): a client sending steadily at Limit per Window lands
// up to that many in B+1 consecutive buckets. Placeholders: the span's a and
// b, then B, Limit, cap2, the expiry in ms and the struct format.
const luaSlidingWindow = luaPrelude + luaSpan + `
local buckets, limit, cap2, ttl, fmt = %d, %d, %d, %d, '%s'
local ring = buckets + 1
local c, head = nil, 0 -- c[1]: the newest bucket; c[2 + b %% ring]: bucket b's count
local v = redis.call('GET', KEYS[1])
if v then
  c = {struct.unpack(fmt, v)}
  head = c[1]
end
-- q is now's bucket. A clock that stepped back counts in the newest bucket
-- seen, so it cannot revive buckets that already dropped out.
local top = q
if head > top then top = head end
if not v or top - head >= ring then
  c = {top}
  for i = 2, ring + 1 do c[i] = 0 end
else
  for bk = head + 1, top do c[2 + bk %% ring] = 0 end
  c[1] = top
end
local all = 0
for i = 2, ring + 1 do all = all + c[i] end
local trailing = all - c[2 + (top + 1) %% ring] -- bucket top-B shares its slot with top+1

-- ns from now until, with no further traffic, cost m is admitted and at
-- least want unit requests remain after it: after(0, limit) is core's
-- slidingState.untilFull (ResetAfter), after(n, n) its untilAdmits
-- (RetryAfter). Buckets only drop out at bucket boundaries.
local function after(m, want)
  local tr, al = trailing, all
  for j = 0, ring do
    if j > 0 then
      al = al - c[2 + (top - buckets + j - 1) %% ring]
      if j < ring then tr = tr - c[2 + (top - buckets + j) %% ring] else tr = 0 end
    end
    if tr + m <= limit and al + m <= cap2 and math.min(limit - tr - m, cap2 - al - m) + m >= want then
      if j == 0 then return 0 end
      return (top + j - q) * w - rem
    end
  end
  return (top + ring - q) * w - rem
end

local left = math.min(limit - trailing, cap2 - all)
if trailing + n > limit or all + n > cap2 then
  if left < 0 then left = 0 end
  return {0, left, after(0, limit), after(n, n), 0}
end
if ARGV[2] == '1' then
  local i = 2 + top %% ring
  c[i] = c[i] + n
  trailing, all, left = trailing + n, all + n, left - n
  -- The key lives until its newest bucket drops out: longer than ttl only
  -- after the clock stepped back.
  local px = math.ceil(((top + ring - q) * w - rem) / 1000000)
  if px < ttl then px = ttl end
  redis.call('SET', KEYS[1], struct.pack(fmt, unpack(c, 1, ring + 1)), 'PX', string.format('%%d', px))
end
return {1, left, after(0, limit), 0, 0}
`

// maxSpan is the longest Recovery time (and Window) the scripts compute
// exactly: 2^52 ns, about 52 days.
const maxSpan = time.Duration(1) << 52

// script is the Lua script of one policy.
type script struct {
	lua *redis.Script
	sha any    // lua.Hash(), boxed once so that calls do not box it
	src string // for EVAL when the server lacks the script
}

// newScript returns the script of policy p, whose keys expire ttl after
// each write.
func newScript(p core.Policy, ttl time.Duration) (script, error) {
	if rec := p.Recovery(); rec > maxSpan || p.Window > maxSpan {
		return script{}, fmt.Errorf("redisstore: %v: window %v or recovery time %v exceeds %v, the longest the scripts compute exactly in Lua's float64 numbers", p.Algorithm, p.Window, rec, maxSpan)
	}
	ttlMs := int64((ttl + time.Millisecond - 1) / time.Millisecond)
	var src string
	switch p.Algorithm {
	case core.AlgTokenBucket, core.AlgLeakyBucket:
		interval := int64(p.Interval())
		delays := p.Algorithm == core.AlgLeakyBucket && !p.Meter
		src = fmt.Sprintf(luaGCRA, interval, p.Burst*interval, ttlMs, delays)
	case core.AlgFixedWindow:
		w := int64(p.Window)
		src = fmt.Sprintf(luaFixedWindow, w/1000, w%1000, p.Limit, ttlMs)
	case core.AlgSlidingWindow:
		w := int64(p.Interval())
		// core.MaxBuckets bounds the ring, which the script unpacks onto
		// Lua's stack (8000 values): TestMaxBucketsFitLua.
		src = fmt.Sprintf(luaSlidingWindow, w/1000, w%1000, p.Buckets, p.Limit, p.MaxInWindow(), ttlMs,
			"<d"+strings.Repeat("I4", int(p.Buckets+1)))
	default:
		return script{}, fmt.Errorf("redisstore: unknown algorithm %v", p.Algorithm)
	}
	lua := redis.NewScript(src)
	return script{lua: lua, sha: lua.Hash(), src: src}, nil
}

// parseReply reads a script's reply into d.
func parseReply(v any, d *core.Decision) error {
	f, ok := v.([]any)
	if !ok || len(f) != 5 {
		return fmt.Errorf("redisstore: unexpected script reply %v", v)
	}
	var x [5]int64
	for i, e := range f {
		if x[i], ok = e.(int64); !ok {
			return fmt.Errorf("redisstore: unexpected script reply %v", v)
		}
	}
	d.Allowed = x[0] == 1
	d.Remaining = x[1]
	d.ResetAfter = time.Duration(max(x[2], 0))
	d.RetryAfter = time.Duration(max(x[3], 0))
	d.Delay = time.Duration(max(x[4], 0))
	return nil
}

// isNoScript reports whether err says the server does not have the
// script cached (restart, failover, SCRIPT FLUSH).
func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}
