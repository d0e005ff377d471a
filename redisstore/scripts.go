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
// One script call decides a batch of calls (see batcher.go): it reads the
// server's TIME once, then decides the calls in order, as many separate
// calls at that instant would, several calls for one key included. It
// reads each key at most once and writes each admitted key once, at the
// end, so that every read comes before any write: a script stopped by an
// error (a key another Cluster node serves) has changed nothing.
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
// Two forms of each script share that body. The keyed form names the keys
// the way Redis expects (KEYS), so that a cluster client routes it and
// follows MOVED and ASK; Redis Cluster accepts it only when every key
// hashes to one slot. The cross-slot form (Redis 7's allow-cross-slot-keys
// flag) passes the keys as arguments, so that one call can decide keys of
// many slots served by one Cluster node.
//
// Arguments of the keyed form, for m calls:
//
//	KEYS[i]     the state key of call i
//	ARGV[1]     "" to read the server's TIME; else now in µs (tests only)
//	ARGV[2]     now's nanosecond remainder (tests only)
//	ARGV[2+i]   the cost of call i, to consume when admitted; 0 to only
//	            look (Peek: cost 1, nothing consumed)
//
// The cross-slot form has no KEYS: ARGV[i] is the key of call i, and the
// arguments above follow, m places further on.
//
// Reply: an array of 5m integers, for each call in order {allowed,
// remaining, resetAfter, retryAfter, delay}, the durations in ns.
const luaKeyed = `
local keys, m, o = KEYS, #KEYS, 0
`

// luaCrossSlot heads the cross-slot form. The flag needs Redis 7.
const luaCrossSlot = `#!lua flags=allow-cross-slot-keys
local m = (#ARGV - 2) / 2
local keys, o = ARGV, m
`

// luaPrelude reads now once for the batch.
const luaPrelude = `
local now_us, now_r = tonumber(ARGV[o + 1]), 0
if now_us then now_r = tonumber(ARGV[o + 2]) else
  local t = redis.call('TIME')
  now_us = t[1] * 1000000 + t[2]
end
local out = {}
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
local tus, tr, dirty = {}, {}, {} -- per key: the TAT (false: none), and whether to write it
for i = 1, m do
  local k, n = keys[i], tonumber(ARGV[o + 2 + i])
  local consume = n > 0
  if not consume then n = 1 end
  local us = tus[k]
  if us == nil then
    local v = redis.call('GET', k)
    us = false
    if v then us, tr[k] = struct.unpack('<dH', v) end
    tus[k] = us
  end
  local base = 0 -- max(tat, now) - now
  if us then
    base = (us - now_us) * 1000 + tr[k] - now_r
    if base < 0 then base = 0 end
  end
  local nxt = base + n * interval -- the new tat - now
  local j = 5 * i
  if nxt > tau then
    local left = tau - base
    if left < 0 then left = 0 end
    out[j-4], out[j-3], out[j-2], out[j-1], out[j] = 0, math.floor(left / interval), base, nxt - tau, 0
  elseif not consume then
    out[j-4], out[j-3], out[j-2], out[j-1], out[j] = 1, math.floor((tau - base) / interval), base, 0, 0
  else
    local t = now_r + nxt
    local carry = math.floor(t / 1000)
    tus[k], tr[k], dirty[k] = now_us + carry, t - carry * 1000, true
    local delay = 0
    if delays then delay = base end
    out[j-4], out[j-3], out[j-2], out[j-1], out[j] = 1, math.floor((tau - nxt) / interval), nxt, 0, delay
  end
end
for k in pairs(dirty) do
  redis.call('SET', k, struct.pack('<dH', tus[k], tr[k]), 'PX', ttl)
end
return out
`

// luaFixedWindow is core/fixedwindow.go: the window number and the count
// admitted in it, stored as struct "<dI4". Placeholders: the span's a and
// b, then Limit and the expiry in ms.
const luaFixedWindow = luaPrelude + luaSpan + `
local limit, ttl = %d, %d
local win, cnt, px = {}, {}, {} -- per key: the stored window (false: none), its count, the expiry to write
for i = 1, m do
  local k, n = keys[i], tonumber(ARGV[o + 2 + i])
  local consume = n > 0
  if not consume then n = 1 end
  local stored = win[k]
  if stored == nil then
    local v = redis.call('GET', k)
    stored = false
    if v then stored, cnt[k] = struct.unpack('<dI4', v) end
    win[k] = stored
  end
  local count, back = 0, 0 -- back: windows the stored one is ahead of now's
  if stored and stored >= q then
    -- A clock that stepped back stays in the stored window, so it cannot
    -- reopen a used-up window.
    count, back = cnt[k], stored - q
  end
  local untilEnd = (back + 1) * w - rem
  local j = 5 * i
  if count + n > limit then
    out[j-4], out[j-3], out[j-2], out[j-1], out[j] = 0, limit - count, untilEnd, untilEnd, 0
  elseif not consume then
    if count == 0 then untilEnd = 0 end
    out[j-4], out[j-3], out[j-2], out[j-1], out[j] = 1, limit - count, untilEnd, 0, 0
  else
    -- The key lives until its window ends: longer than ttl only after the
    -- clock stepped back.
    local p = math.ceil(untilEnd / 1000000)
    if p < ttl then p = ttl end
    win[k], cnt[k], px[k] = q + back, count + n, p
    out[j-4], out[j-3], out[j-2], out[j-1], out[j] = 1, limit - count - n, untilEnd, 0, 0
  end
end
for k, p in pairs(px) do
  redis.call('SET', k, struct.pack('<dI4', win[k], cnt[k]), 'PX', string.format('%%d', p))
end
return out
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

-- ns from now until, with no further traffic, cost m is admitted and at
-- least want unit requests remain after it: after(c, ..., 0, limit) is
-- core's slidingState.untilFull (ResetAfter), after(c, ..., n, n) its
-- untilAdmits (RetryAfter). Buckets only drop out at bucket boundaries.
-- c[1] is the newest bucket top; c[2 + b %% ring] bucket b's count.
local function after(c, top, trailing, all, cost, want)
  local tr, al = trailing, all
  for j = 0, ring do
    if j > 0 then
      al = al - c[2 + (top - buckets + j - 1) %% ring]
      if j < ring then tr = tr - c[2 + (top - buckets + j) %% ring] else tr = 0 end
    end
    if tr + cost <= limit and al + cost <= cap2 and math.min(limit - tr - cost, cap2 - al - cost) + cost >= want then
      if j == 0 then return 0 end
      return (top + j - q) * w - rem
    end
  end
  return (top + ring - q) * w - rem
end

local rings, px = {}, {} -- per key: its ring (false: none), the expiry to write
for i = 1, m do
  local k, n = keys[i], tonumber(ARGV[o + 2 + i])
  local consume = n > 0
  if not consume then n = 1 end
  local c = rings[k]
  if c == nil then
    local v = redis.call('GET', k)
    c = false
    if v then c = {struct.unpack(fmt, v)} end
  end
  -- q is now's bucket. A clock that stepped back counts in the newest
  -- bucket seen, so it cannot revive buckets that already dropped out.
  local top = q
  if c and c[1] > top then top = c[1] end
  if not c or top - c[1] >= ring then
    c = {top}
    for x = 2, ring + 1 do c[x] = 0 end
  else
    for bk = c[1] + 1, top do c[2 + bk %% ring] = 0 end
    c[1] = top
  end
  rings[k] = c
  local all = 0
  for x = 2, ring + 1 do all = all + c[x] end
  local trailing = all - c[2 + (top + 1) %% ring] -- bucket top-B shares its slot with top+1

  local left = math.min(limit - trailing, cap2 - all)
  local j = 5 * i
  if trailing + n > limit or all + n > cap2 then
    if left < 0 then left = 0 end
    out[j-4], out[j-3], out[j-2], out[j-1], out[j] = 0, left, after(c, top, trailing, all, 0, limit), after(c, top, trailing, all, n, n), 0
  else
    if consume then
      local x = 2 + top %% ring
      c[x] = c[x] + n
      trailing, all, left = trailing + n, all + n, left - n
      -- The key lives until its newest bucket drops out: longer than ttl
      -- only after the clock stepped back.
      local p = math.ceil(((top + ring - q) * w - rem) / 1000000)
      if p < ttl then p = ttl end
      px[k] = p
    end
    out[j-4], out[j-3], out[j-2], out[j-1], out[j] = 1, left, after(c, top, trailing, all, 0, limit), 0, 0
  end
end
for k, p in pairs(px) do
  redis.call('SET', k, struct.pack(fmt, unpack(rings[k], 1, ring + 1)), 'PX', string.format('%%d', p))
end
return out
`

// maxSpan is the longest Recovery time (and Window) the scripts compute
// exactly: 2^52 ns, about 52 days.
const maxSpan = time.Duration(1) << 52

// script is one form of a policy's Lua script.
type script struct {
	lua *redis.Script
	sha any    // lua.Hash(), boxed once so that calls do not box it
	src string // for EVAL when the server lacks the script
}

func newScriptForm(src string) script {
	lua := redis.NewScript(src)
	return script{lua: lua, sha: lua.Hash(), src: src}
}

// scripts are the two forms of one policy's script.
type scripts struct {
	keyed, cross script
}

// newScripts returns the scripts of policy p, whose keys expire ttl after
// each write.
func newScripts(p core.Policy, ttl time.Duration) (scripts, error) {
	if rec := p.Recovery(); rec > maxSpan || p.Window > maxSpan {
		return scripts{}, fmt.Errorf("redisstore: %v: window %v or recovery time %v exceeds %v, the longest the scripts compute exactly in Lua's float64 numbers", p.Algorithm, p.Window, rec, maxSpan)
	}
	ttlMs := int64((ttl + time.Millisecond - 1) / time.Millisecond)
	var body string
	switch p.Algorithm {
	case core.AlgTokenBucket, core.AlgLeakyBucket:
		interval := int64(p.Interval())
		delays := p.Algorithm == core.AlgLeakyBucket && !p.Meter
		body = fmt.Sprintf(luaGCRA, interval, p.Burst*interval, ttlMs, delays)
	case core.AlgFixedWindow:
		w := int64(p.Window)
		body = fmt.Sprintf(luaFixedWindow, w/1000, w%1000, p.Limit, ttlMs)
	case core.AlgSlidingWindow:
		w := int64(p.Interval())
		// core.MaxBuckets bounds the ring, which the script unpacks onto
		// Lua's stack (8000 values): TestMaxBucketsFitLua.
		body = fmt.Sprintf(luaSlidingWindow, w/1000, w%1000, p.Buckets, p.Limit, p.MaxInWindow(), ttlMs,
			"<d"+strings.Repeat("I4", int(p.Buckets+1)))
	default:
		return scripts{}, fmt.Errorf("redisstore: unknown algorithm %v", p.Algorithm)
	}
	return scripts{keyed: newScriptForm(luaKeyed + body), cross: newScriptForm(luaCrossSlot + body)}, nil
}

// parseReplies reads a script's reply into the Decisions of its calls.
func parseReplies(v any, calls []*call) error {
	f, ok := v.([]any)
	if !ok || len(f) != 5*len(calls) {
		return fmt.Errorf("redisstore: unexpected script reply of %d values for %d calls", len(f), len(calls))
	}
	for i, c := range calls {
		var x [5]int64
		for j := range x {
			if x[j], ok = f[5*i+j].(int64); !ok {
				return fmt.Errorf("redisstore: unexpected script reply %v", f[5*i:5*i+5])
			}
		}
		d := &c.res
		d.Allowed = x[0] == 1
		d.Remaining = x[1]
		d.ResetAfter = time.Duration(max(x[2], 0))
		d.RetryAfter = time.Duration(max(x[3], 0))
		d.Delay = time.Duration(max(x[4], 0))
	}
	return nil
}

// isNoScript reports whether err says the server does not have the
// script cached (restart, failover, SCRIPT FLUSH).
func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}
