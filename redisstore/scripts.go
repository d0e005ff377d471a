package redisstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/core"
)

// The Lua scripts, one per algorithm, each the same state machine as its
// in-memory counterpart in package core (same formulas, same Decision),
// evaluated atomically on the server. Each limiter's script is generated
// with its own policy's numbers written in as constants: converting
// arguments with tonumber on every call measured about a quarter of the
// script's server time, and server time is what all app servers share.
// Policies given with a call (AllowPolicy, Get, Set) come as arguments
// instead, once per script call for each distinct policy, so that one
// script call decides calls under any mix of policies.
//
// One script call decides a batch of calls (see batcher.go): it reads the
// server's TIME once, then decides the calls in order, as many separate
// calls at that instant would, several calls for one key included. It
// reads each key at most once and writes each changed key once, at the
// end, so that every read comes before any write: a script stopped by an
// error (a key another Cluster node serves) has changed nothing.
//
// A key has one state whatever policy it is decided under. Its value
// records the numbers of the policy it was last written under that the
// state depends on (the token and leaky bucket's interval, the fixed
// window's Window, the sliding window's bucket width and number of
// buckets). A call under a policy with other numbers converts the state in
// the same script, before deciding (see "Policies per call" in the package
// docs): that is what makes the conversion atomic. A call that consumes
// (or a Set) writes the converted state, even when it is denied, so that
// the key is under its new policy from then on; a Peek or Get converts
// only what it reads.
//
// Time. Lua numbers are doubles, exact for integers up to 2^53. An instant
// is held as whole microseconds since the epoch (about 1.8e15, exact until
// the year 2255) plus a nanosecond remainder; spans (ResetAfter, a bucket's
// TAT ahead of now, ...) are whole nanoseconds, exact up to 2^53 ns (104
// days). The longest span a script forms is about twice the policy's
// Recovery time (a TAT up to Recovery ahead plus a cost of up to Recovery),
// and core.Policy.Validate bounds Recovery times by core.MaxSpan, 2^52 ns,
// about 52 days, for every store. A span beyond 2^62 ns, which only a
// clock stepped back by centuries forms, is reported as 2^62 ns: Redis
// would turn a reply beyond 2^63 into a meaningless integer. Redis's TIME
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
// Arguments of the keyed form, for m calls under E policies other than the
// limiter's own, each described by K numbers (K depends on the algorithm:
// see policyArgs):
//
//	KEYS[i]          the state key of call i
//	ARGV[i]          call i: its cost, to consume when admitted; 0 to
//	                 only look (Peek and Get: cost 1, nothing consumed);
//	                 -1-u to set the key's usage to u (Set)
//	ARGV[m+i]        only when E > 0: call i's policy, 0 for the
//	                 limiter's own, e for the e-th given below
//	then E*K         the numbers of each of the E policies
//	ARGV[#ARGV-2]    E
//	ARGV[#ARGV-1]    "" to read the server's TIME; else now in µs (tests only)
//	ARGV[#ARGV]      now's nanosecond remainder (tests only)
//
// The cross-slot form has no KEYS: ARGV[i] is the key of call i, and the
// arguments above follow, m places further on.
//
// Reply: one string of 5m little-endian 64-bit integers (struct "i8"),
// for each call in order {allowed, remaining, resetAfter, retryAfter,
// delay}, the durations in ns (one string is cheaper for the server to
// send and for the client to read than an array of integers); for a
// call that only looks, the fifth is the key's usage (Usage.Used) instead
// of the delay, which is 0 for such a call; a Set replies zeros. A call
// under another policy than its key's state is decided on the state
// converted, which is written only if it is admitted (core's
// registry.move); a look or a denial then reports the durations of the
// key left where it is, recovering under its own policy (core's
// registry.look), and such a denial replies -1 for its delay: the deny
// cache does not keep it.
const luaKeyed = `
local keys, m, co = KEYS, #KEYS, 0
`

// luaCrossSlot heads the cross-slot form. The flag needs Redis 7.
const luaCrossSlot = `#!lua flags=allow-cross-slot-keys
`

// luaCrossSlotKeys finds the calls' keys among the arguments.
const luaCrossSlotKeys = `
local m = h / 2
if E > 0 then m = h / 3 end
local keys, co = ARGV, m
`

// luaPrelude reads now once for the batch, and where the policies given
// with the calls are: their numbers start after ARGV[h]. Placeholder: K.
//
// The scripts define no function at their top level but the sliding
// window's after: Lua makes a closure of each local function every time
// its definition runs, which measured as a fair share of a lone call's
// script time, so the code of the rare paths (a conversion, a Set) is
// written out where it is used, or its functions defined there (a
// conversion's, made only when a call converts).
const luaPrelude = `
local A = #ARGV
local now_us, now_r = tonumber(ARGV[A - 1]), 0
if now_us then now_r = tonumber(ARGV[A]) else
  local t = redis.call('TIME')
  now_us = t[1] * 1000000 + t[2]
end
local E = tonumber(ARGV[A - 2])
local h = A - 3 - E * %d
local out = {}
`

// luaSpan returns Lua code that sets q, rem and w, for the span (a fixed
// window or a sliding window's bucket) of w = a*1000 + b ns (a µs and
// b < 1000 ns), to the number of the span now falls in, counted from the
// epoch, now's offset into it in ns, and w. Every product stays below
// 2^53, so q and rem are exact; the float division only guesses q. a and
// b are Lua expressions; q, rem and w names of variables in scope.
func luaSpan(a, b, q, rem, w string) string { return luaSpanAt(a, b, q, rem, w, "now_us", "now_r") }

// luaSpanAt is luaSpan at the instant of us µs and r ns (Lua variables)
// instead of now.
func luaSpanAt(a, b, q, rem, w, us, r string) string {
	return `
do
  local sa, sb = ` + a + `, ` + b + `
  local sw = sa * 1000 + sb
  local sq = math.floor((` + us + ` + ` + r + ` / 1000) / (sa + sb / 1000))
  local sr = (` + us + ` - sq * sa) * 1000 + ` + r + ` - sq * sb
  while sr < 0 do sq, sr = sq - 1, sr + sw end
  while sr >= sw do sq, sr = sq + 1, sr - sw end
  ` + q + `, ` + rem + `, ` + w + ` = sq, sr, sw
end
`
}

// luaSpanOf is luaSpanAt for a span of ns nanoseconds (a Lua variable).
func luaSpanOf(ns, q, rem, w, us, r string) string {
	return luaSpanAt("math.floor("+ns+" / 1000)", ns+" - math.floor("+ns+" / 1000) * 1000", q, rem, w, us, r)
}

// luaLatest sets cu and cr, new locals, to the later of now and the
// instant lu µs and lr ns (Lua expressions; lu may be nil or false).
func luaLatest(lu, lr string) string {
	return `
local cu, cr = now_us, now_r
if ` + lu + ` and (` + lu + ` > cu or (` + lu + ` == cu and ` + lr + ` > cr)) then cu, cr = ` + lu + `, ` + lr + ` end
`
}

// scriptHead returns the text a script's body follows: the form, then the
// prelude for k numbers per policy.
func scriptHead(cross bool, k int) string {
	if cross {
		return luaCrossSlot + fmt.Sprintf(luaPrelude, k) + luaCrossSlotKeys
	}
	return fmt.Sprintf(luaPrelude, k) + luaKeyed
}

// luaGCRA is core/tokenbucket.go: the token and leaky bucket's theoretical
// arrival time (TAT), stored as struct "<dHddH": whole µs and the ns
// remainder, the interval (Window/Limit, ns) of the policy it was written
// under, and the latest instant it was written at (µs and ns). Placeholders: the limiter's own interval, tau (Burst *
// interval) in ns, the expiry in ms, and 1 when a leaky bucket delays; a
// policy given with a call has the same four numbers (K = 4).
//
// math.floor(x / interval) is exact for 0 <= x < 2^53: a quotient that is
// not an integer is at least 1/interval below the next one, more than the
// division's rounding error.
//
// A state written under another interval keeps its debt (TAT - now, what
// is used and not yet refilled) in units of cost: debt * interval / its
// interval, fractions included, rounded up to the nanosecond (never more
// generous), at most 2^52 ns; for a delaying leaky bucket at least the
// debt itself (the requests queued keep their instants). Converted at the later of now and the
// instant the state was written at: a clock that stepped back converts as
// if it stood still there, so that the time it went back is not rescaled. The product may exceed 2^53, so the part of
// the debt below one old interval is multiplied by binary long division,
// whose partial remainders stay below 2^53 (muldiv, a function of the
// conversion's path alone, so that only a conversion makes its closure).
// A look or a denial on a converted state measures its ResetAfter and
// RetryAfter on the key left where it is (core's gcraState.admitsAt).
const luaGCRA = `
local interval, tau, ttl, delays = %d, %d, %d, %d == 1
local ttlS = '%[3]d'
local P
if E > 0 then
  P = {[0] = {interval, tau, ttl, delays, ttlS}}
  for e = 1, E do
    local x = h + (e - 1) * 4
    P[e] = {tonumber(ARGV[x + 1]), tonumber(ARGV[x + 2]), tonumber(ARGV[x + 3]), ARGV[x + 4] == '1', ARGV[x + 3]}
  end
end
local tus, tr, tiv, dirty = {}, {}, {}, {} -- per key: the TAT (false: none), its interval, the expiry to write ('del': delete)
local lu, lr = {}, {} -- per key read: the instant it was written at
for i = 1, m do
  local k, n = keys[i], tonumber(ARGV[co + i])
  if E > 0 then
    local p = P[tonumber(ARGV[co + m + i])]
    interval, tau, ttl, delays, ttlS = p[1], p[2], p[3], p[4], p[5]
  end
  local us = tus[k]
  if us == nil then
    local v = redis.call('GET', k)
    us = false
    if v then us, tr[k], tiv[k], lu[k], lr[k] = struct.unpack('<dHddH', v) end
    tus[k] = us
  end
  local base = 0 -- max(tat, now) - now
  local stay = false -- a denial decided on a converted state, not written
  local rs, rt -- a look's or a denial's ResetAfter and RetryAfter on a converted state
  if us then
    base = (us - now_us) * 1000 + tr[k] - now_r
    if base < 0 then base = 0 end
    local from = tiv[k]
    if from ~= interval then
      -- Written under another rate: the same debt in units of cost,
      -- ceil(d * interval / from), at the later of now and the instant
      -- it was written at (cu, cr).
      local cu, cr = now_us, now_r
      local l = lu[k]
      if l and (l > cu or (l == cu and lr[k] > cr)) then cu, cr = l, lr[k] end
      -- muldiv(x, a, b) is floor(x * a / b), at most 2^53, and whether it
      -- is exact, for 0 <= x < 2^53 and 0 < a, b <= 2^52: x = q1 * b + r1,
      -- and r1 * a / b by binary long division, whose partial remainders
      -- stay below 2^53.
      local function muldiv(x, a, b)
        local q1 = math.floor(x / b)
        local r1 = x - q1 * b
        if q1 * a >= 9007199254740992 then return 9007199254740992, false end
        local q, r, bit = 0, 0, 4503599627370496
        while bit >= 1 do
          q, r = q * 2, r * 2
          if r >= b then q, r = q + 1, r - b end
          if math.floor(a / bit) %% 2 == 1 then
            r = r + r1
            if r >= b then q, r = q + 1, r - b end
          end
          bit = bit / 2
        end
        return math.min(q1 * a + q, 9007199254740992), r == 0
      end
      local x = base -- the TAT - now, left where it is
      local d = (us - cu) * 1000 + tr[k] - cr
      if d > 0 then
        local d0, exact = d, true
        d, exact = muldiv(d, interval, from)
        if not exact then d = d + 1 end
        d = math.min(d, 4503599627370496)
        -- A delaying leaky bucket keeps the requests queued at their
        -- instants and serves new ones after them.
        if delays and d < d0 then d = d0 end
        base = (cu - now_us) * 1000 + cr - now_r + d -- the new TAT - now
      else
        d, base, x = 0, 0, 0
      end
      local denied = n > 0 and base + n * interval > tau
      stay = denied
      if n == 0 or denied then
        -- A look or a denial leaves the key recovering at its own rate
        -- (core's registry.look): full at its TAT, and admitting a cost c
        -- once its debt then, converted, leaves room for c, that is once
        -- TAT - t <= floor((tau - c * interval) * from / interval) (and,
        -- for a delaying leaky bucket, <= tau - c * interval). When its
        -- debt at (cu, cr) leaves room, only a clock behind (cu, cr)
        -- denies, and base + c * interval - tau is the answer.
        local room = tau - math.max(n, 1) * interval
        local slack = muldiv(room, from, interval)
        if delays and slack > room then slack = room end
        rt = x - slack
        if d <= room then rt = base - room end
        rs, rt = math.min(x, 4611686018427387904), math.min(rt, 4611686018427387904)
      end
      if n ~= 0 and not denied then
        -- Decided under this policy from now on; a denial leaves the
        -- state as it was (core's registry.move).
        if d > 0 then
          local t = cr + d
          local carry = math.floor(t / 1000)
          tus[k], tr[k], tiv[k] = cu + carry, t - carry * 1000, interval
          local px = math.ceil(base / 1000000)
          if px < ttl then px = ttl end
          dirty[k] = px
        else
          tus[k], dirty[k] = false, nil
        end
      end
    end
  end
  -- A server clock that stepped back by centuries: spans beyond 2^62 ns
  -- (which Redis would turn into garbage integers) are reported as 2^62.
  if base > 4611686018427387904 then base = 4611686018427387904 end
  if n < 0 then
    local used = -n - 1
    if used == 0 then
      tus[k], dirty[k] = false, 'del'
    else
      local d = used * interval
      local t = now_r + d
      local carry = math.floor(t / 1000)
      tus[k], tr[k], tiv[k], lu[k] = now_us + carry, t - carry * 1000, interval, false -- written at now exactly
      local px = math.ceil(d / 1000000)
      if px < ttl then px = ttl end
      dirty[k] = px
    end
    out[i] = struct.pack('<i8i8i8i8i8', 0, 0, 0, 0, 0)
  else
    local consume = n > 0
    if not consume then n = 1 end
    local nxt = base + n * interval -- the new tat - now
    if nxt > tau then
      local left, u = tau - base, 0
      if left < 0 then left = 0 end
      if not consume then
        u = math.floor(base / interval)
        if u * interval < base then u = u + 1 end
      elseif stay then
        u = -1 -- decided on a state not written: not to be cached
      end
      out[i] = struct.pack('<i8i8i8i8i8', 0, math.floor(left / interval), rs or base, rt or nxt - tau, u)
    elseif not consume then
      local u = math.floor(base / interval)
      if u * interval < base then u = u + 1 end
      out[i] = struct.pack('<i8i8i8i8i8', 1, math.floor((tau - base) / interval), rs or base, 0, u)
    else
      local t = now_r + nxt
      local carry = math.floor(t / 1000)
      tus[k], tr[k], tiv[k], dirty[k] = now_us + carry, t - carry * 1000, interval, ttlS
      local delay = 0
      if delays then delay = base end
      out[i] = struct.pack('<i8i8i8i8i8', 1, math.floor((tau - nxt) / interval), nxt, 0, delay)
    end
  end
end
for k, px in pairs(dirty) do
  if px == 'del' then
    redis.call('DEL', k)
  else
    local cu, cr, l = now_us, now_r, lu[k]
    if l and (l > cu or (l == cu and lr[k] > cr)) then cu, cr = l, lr[k] end
    redis.call('SET', k, struct.pack('<dHddH', tus[k], tr[k], tiv[k], cu, cr), 'PX', px)
  end
end
return table.concat(out)
`

// luaFixedWindow is core/fixedwindow.go: the window number and the count
// admitted in it, the Window (ns) of the policy it was written under, the
// latest instant it was written at (µs and ns) and that policy's Limit,
// stored as struct "<dI4ddHI4". Placeholders: the own Window's a and b
// (see luaSpan), then Limit, the expiry in ms and the largest count a
// conversion keeps (core's, what its one-word state holds); a policy given
// with a call has the same five numbers (K = 5).
//
// A state written under another Window carries into the call's policy's
// current window what might still lie in it (core's fixedState.convert):
// the count of its window, if that window overlaps the current one and is
// its policy's current window or the one before, and its policy's Limit
// for the window before it when that overlaps too and the stored window is
// its policy's current one; both windows taken at the later of now and the
// instant the state was written at: a clock that stepped back converts as
// if it stood still there. A look or a denial on a converted state
// measures its ResetAfter and RetryAfter on the key left where it is
// (core's fixedState.admitsAt).
var luaFixedWindow = `
local q, rem, w` + luaSpan("%d", "%d", "q", "rem", "w") + `
local limit, ttl, most = %d, %d, %d
local ttlS = '%[4]d'
local P
if E > 0 then
  P = {[0] = {q, rem, w, limit, ttl, most, ttlS}}
  for e = 1, E do
    local x = h + (e - 1) * 5
    local eq, erem, ew` + luaSpan("tonumber(ARGV[x + 1])", "tonumber(ARGV[x + 2])", "eq", "erem", "ew") + `
    P[e] = {eq, erem, ew, tonumber(ARGV[x + 3]), tonumber(ARGV[x + 4]), tonumber(ARGV[x + 5]), ARGV[x + 4]}
  end
end
local win, cnt, ws, wl, px = {}, {}, {}, {}, {} -- per key: the stored window (false: none), its count, its Window and Limit, the expiry to write (0: delete)
local lu, lr = {}, {} -- per key read: the instant it was written at
for i = 1, m do
  local k, n = keys[i], tonumber(ARGV[co + i])
  if E > 0 then
    local p = P[tonumber(ARGV[co + m + i])]
    q, rem, w, limit, ttl, most, ttlS = p[1], p[2], p[3], p[4], p[5], p[6], p[7]
  end
  local stored = win[k]
  if stored == nil then
    local v = redis.call('GET', k)
    stored = false
    if v then stored, cnt[k], ws[k], lu[k], lr[k], wl[k] = struct.unpack('<dI4ddHI4', v) end
    win[k] = stored
  end
  local count, back, converted = 0, 0, false -- back: windows the stored one is ahead of now's
  local rs, rt -- a look's or a denial's ResetAfter and RetryAfter on a converted state
  if stored then
    local sw = ws[k]
    if sw == w then
      if stored >= q then
        -- A clock that stepped back stays in the stored window, so it
        -- cannot reopen a used-up window.
        count, back = cnt[k], stored - q
      end
    else
      -- Written under another Window: both current windows at the later
      -- of now and the instant it was written at (cu, cr), which is in
      -- the stored window or after it.` + luaLatest("lu[k]", "lr[k]") + `
      local oq, orem, ow` + luaSpanOf("sw", "oq", "orem", "ow", "cu", "cr") + `
      local nq, nrem, nw = q, rem, w
      if cu ~= now_us or cr ~= now_r then` + luaSpanOf("w", "nq", "nrem", "nw", "cu", "cr") + `end
      back = nq - q
      if stored >= oq - 1 then
        -- The stored window is [s, s + sw) and the current one
        -- [-nrem, w - nrem), in ns from (cu, cr).
        local s = (stored - oq) * sw - orem
        if s < w - nrem and s + sw > -nrem then count = cnt[k] end
        if stored == oq and s - sw < w - nrem and s > -nrem then count = count + wl[k] end
        if count > most then count = most end
        if n == 0 or count + n > limit then
          -- A look or a denial leaves the key where it is (core's
          -- fixedState.admitsAt): what a conversion at t (ns from (cu, cr))
          -- carries only falls, and changes only at the stored window's
          -- end e, the current window's end, the first window from e on,
          -- and at e + sw (no longer live). first(c): the time from now
          -- until it leaves room for a cost of c.
          local e, hi = s + sw, w - nrem
          local function first(c)
            local best = e + sw
            for _, t in ipairs({0, e, hi, hi + math.max(0, math.ceil((e - hi) / w)) * w}) do
              local lo = t - (t + nrem) %% w -- the start of the window holding t
              local x = 0
              if s < lo + w and e > lo then x = cnt[k] end
              if t < e and s - sw < lo + w and s > lo then x = x + wl[k] end
              if t >= 0 and t < best and math.min(x, most) + c <= limit then best = t end
            end
            if best == 0 then return 0 end
            return math.min(best + (cu - now_us) * 1000 + cr - now_r, 4611686018427387904)
          end
          rs, rt = first(limit), first(math.max(n, 1))
        end
      end
      -- Decided under this policy from now on if admitted (written below);
      -- a denial leaves the state as it was (core's registry.move).
      converted = true
    end
  end
  local untilEnd = (back + 1) * w - rem
  -- A server clock that stepped back by centuries: spans beyond 2^62 ns
  -- (which Redis would turn into garbage integers) are reported as 2^62.
  if untilEnd > 4611686018427387904 then untilEnd = 4611686018427387904 end
  if n < 0 then
    local used = -n - 1
    if used == 0 then
      win[k], px[k] = false, 0
    else
      local p = math.ceil((w - rem) / 1000000)
      if p < ttl then p = ttl end
      win[k], cnt[k], ws[k], wl[k], px[k], lu[k] = q, used, w, limit, p, false -- written at now exactly
    end
    out[i] = struct.pack('<i8i8i8i8i8', 0, 0, 0, 0, 0)
  else
    local consume = n > 0
    if not consume then n = 1 end
    if count + n > limit then
      local left, u = limit - count, 0
      if left < 0 then left = 0 end
      if not consume then
        u = count
      elseif converted then
        u = -1 -- decided on a state not written: not to be cached
      end
      out[i] = struct.pack('<i8i8i8i8i8', 0, left, rs or untilEnd, rt or untilEnd, u)
    elseif not consume then
      if count == 0 then untilEnd = 0 end
      out[i] = struct.pack('<i8i8i8i8i8', 1, limit - count, rs or untilEnd, 0, count)
    else
      -- The key lives until its window ends: longer than ttl only after the
      -- clock stepped back.
      local p = math.ceil(untilEnd / 1000000)
      if p <= ttl then p = ttlS end
      win[k], cnt[k], ws[k], wl[k], px[k] = q + back, count + n, w, limit, p
      out[i] = struct.pack('<i8i8i8i8i8', 1, limit - count - n, untilEnd, 0, 0)
    end
  end
end
for k, p in pairs(px) do
  if p == 0 then
    redis.call('DEL', k)
  else
    local cu, cr, l = now_us, now_r, lu[k]
    if l and (l > cu or (l == cu and lr[k] > cr)) then cu, cr = l, lr[k] end
    redis.call('SET', k, struct.pack('<dI4ddHI4', win[k], cnt[k], ws[k], cu, cr, wl[k]), 'PX', p)
  end
end
return table.concat(out)
`

// luaSlidingWindow is core/slidingwindow.go: the number of the newest
// bucket written, the bucket width (ns) of the policy it was written
// under, the latest instant it was written at (µs and ns), and a ring of
// Buckets+1 counters, the count of bucket b at position b mod (B+1),
// stored as struct "<dddH" then B+1 times "I4" (so B is the value's length
// less 26, over 4, less 1). A request in bucket k is
// admitted when the B buckets k-B+1..k hold at most Limit and the B+1
// buckets k-B..k at most cap2 = Policy.MaxInWindow() = Limit +
// ceil(Limit/B): a client sending steadily at Limit per Window lands up to
// that many in B+1 consecutive buckets. Placeholders: the own bucket
// width's a and b (see luaSpan), then B, Limit, cap2, the expiry in ms and
// the struct format; a policy given with a call has the first six (K = 6).
//
// In the script a key's ring is a table of its top bucket, its bucket
// width, the instant, its B+1 counts and one more value (struct.unpack's
// next position), so that its length tells its B.
//
// A state written under another bucket width or number of buckets (another
// Window or Buckets) counts each of its Buckets+1 buckets in the newest
// bucket of the call's policy that it overlaps, but not after the current
// one (core's slidingState.convert), both taken at the later of now and
// the instant the state was written at: a clock that stepped back converts
// as if it stood still there. A look or a denial on a converted state
// measures its ResetAfter and RetryAfter on the key left where it is
// (core's slidingState.admitsAt).
var luaSlidingWindow = `
local q, rem, w` + luaSpan("%d", "%d", "q", "rem", "w") + `
local buckets, limit, cap2, ttl, fmt = %d, %d, %d, %d, '%s'
local ring = buckets + 1
local ring0, fmt0 = ring, fmt
local P
if E > 0 then
  P = {[0] = {q, rem, w, buckets, limit, cap2, ttl, fmt}}
  for e = 1, E do
    local x = h + (e - 1) * 6
    local eq, erem, ew` + luaSpan("tonumber(ARGV[x + 1])", "tonumber(ARGV[x + 2])", "eq", "erem", "ew") + `
    local eb = tonumber(ARGV[x + 3])
    P[e] = {eq, erem, ew, eb, tonumber(ARGV[x + 4]), tonumber(ARGV[x + 5]), tonumber(ARGV[x + 6]), '<dddH' .. string.rep('I4', eb + 1)}
  end
end

-- ns from now until, with no further traffic, cost m is admitted and at
-- least want unit requests remain after it: after(c, ..., 0, limit) is
-- core's slidingState.untilFull (ResetAfter), after(c, ..., n, n) its
-- untilAdmits (RetryAfter). Buckets only drop out at bucket boundaries.
-- c[1] is the newest bucket top, c[2] the bucket width, c[3] and c[4] the
-- instant it was written at, c[5 + b %% ring] bucket b's count.
local function after(c, top, trailing, all, cost, want)
  local tr, al = trailing, all
  for j = 0, ring do
    if j > 0 then
      al = al - c[5 + (top - buckets + j - 1) %% ring]
      if j < ring then tr = tr - c[5 + (top - buckets + j) %% ring] else tr = 0 end
    end
    if tr + cost <= limit and al + cost <= cap2 and math.min(limit - tr - cost, cap2 - al - cost) + cost >= want then
      if j == 0 then return 0 end
      return math.min((top + j - q) * w - rem, 4611686018427387904)
    end
  end
  -- At most 2^62 ns: see luaGCRA.
  return math.min((top + ring - q) * w - rem, 4611686018427387904)
end

local rings, px = {}, {} -- per key: its ring (false: none), the expiry to write (0: delete)
for i = 1, m do
  local k, n = keys[i], tonumber(ARGV[co + i])
  if E > 0 then
    local p = P[tonumber(ARGV[co + m + i])]
    q, rem, w, buckets, limit, cap2, ttl, fmt = p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8]
    ring = buckets + 1
  end
  local c = rings[k]
  if c == nil then
    local v = redis.call('GET', k)
    c = false
    if v then
      if #v == 26 + 4 * ring then c = {struct.unpack(fmt, v)} else c = {struct.unpack('<dddH' .. string.rep('I4', (#v - 26) / 4), v)} end
    end
    rings[k] = c
  end
  local keep, converted = true, false -- whether the ring decided below is the key's state; whether it was converted
  local frees -- on a converted state: the time until, left where it is, it admits a cost (below)
  if c and (c[2] ~= w or #c ~= ring + 5) then
    -- Written under another Window or Buckets: what its trailing window
    -- counts, into the current bucket, both at the later of now and the
    -- instant it was written at (cu, cr).
    local oring, sw = #c - 5, c[2]` + luaLatest("c[3]", "c[4]") + `
    local oq, orem, ow` + luaSpanOf("sw", "oq", "orem", "ow", "cu", "cr") + `
    local nq, nrem, nw = q, rem, w
    if cu ~= now_us or cr ~= now_r then` + luaSpanOf("w", "nq", "nrem", "nw", "cu", "cr") + `end
    local old = c
    c = false
    -- Each of the old ring's buckets (the newest written is no later than
    -- oq, the old bucket of (cu, cr)) in the newest new bucket it
    -- overlaps, not after nq: the one holding its last ns, whose offset
    -- from (cu, cr) is (b + 1 - oq) * sw - orem - 1.
    for b = oq - oring + 1, old[1] do
      local x = old[5 + b %% oring]
      local jb = nq + math.floor(((b + 1 - oq) * sw - orem - 1 + nrem) / w)
      if jb > nq then jb = nq end
      if x > 0 and nq - jb < ring then
        if not c then
          c = {nq, w, cu, cr}
          for y = 5, ring + 5 do c[y] = 0 end
        end
        local y = 5 + jb %% ring
        c[y] = math.min(c[y] + x, 4294967295)
      end
    end
    -- A look or a denial leaves the key where it is (core's
    -- slidingState.admitsAt): each old bucket b counts in the trailing
    -- buckets until leaves(b, buckets), then in the one before them until
    -- leaves(b, ring): until it has left the old ring, or the new bucket
    -- holding its last ns has left them (ns from (cu, cr)). Both grow with
    -- b, and the sums only fall: frees(cost) walks the buckets in order to
    -- the first instant that leaves room for cost, as a time from now.
    local lo, hi, off = oq - oring + 1, old[1], (cu - now_us) * 1000 + cr - now_r
    local function leaves(b, j)
      return math.min((b + oring - oq) * sw - orem, (math.floor(((b + 1 - oq) * sw - orem - 1 + nrem) / w) + j) * w - nrem)
    end
    frees = function(cost)
      local i1, i2, tr, ol, t = lo, lo, 0, 0, 0
      for b = lo, hi do tr = tr + old[5 + b %% oring] end
      while true do
        -- Buckets that hold nothing change no sum.
        while i1 <= hi and old[5 + i1 %% oring] == 0 do i1 = i1 + 1 end
        while i2 < i1 and old[5 + i2 %% oring] == 0 do i2 = i2 + 1 end
        local e = math.huge
        if i1 <= hi then e = leaves(i1, buckets) end
        if i2 < i1 then e = math.min(e, leaves(i2, ring)) end
        if e > t then
          if tr + cost <= limit and tr + math.min(ol, 4294967295) + cost <= cap2 then
            if t == 0 then return 0 end
            return math.min(t + off, 4611686018427387904)
          end
          t = e
        end
        if i1 <= hi and leaves(i1, buckets) == e then
          local x = old[5 + i1 %% oring]
          tr, ol, i1 = tr - x, ol + x, i1 + 1
        elseif leaves(i2, ring) == e then
          ol, i2 = ol - old[5 + i2 %% oring], i2 + 1
        end
      end
    end
    -- Decided under this policy from now on if admitted (written below);
    -- a look or a denial leaves the state as it was (core's
    -- registry.move).
    keep, converted = false, true
  end
  if n < 0 then
    local used = -n - 1
    if used == 0 then
      rings[k], px[k] = false, 0
    else
      c = {q, w, 0, 0}
      for x = 5, ring + 5 do c[x] = 0 end
      c[5 + q %% ring] = used
      rings[k], px[k] = c, math.max(ttl, math.ceil((ring * w - rem) / 1000000))
    end
    out[i] = struct.pack('<i8i8i8i8i8', 0, 0, 0, 0, 0)
  else
    local consume = n > 0
    if not consume then n = 1 end
    -- q is now's bucket. A clock that stepped back counts in the newest
    -- bucket seen, so it cannot revive buckets that already dropped out.
    local top = q
    if c and c[1] > top then top = c[1] end
    if not c or top - c[1] >= ring then
      c = {top, w, 0, 0}
      for x = 5, ring + 5 do c[x] = 0 end
    else
      for bk = c[1] + 1, top do c[5 + bk %% ring] = 0 end
      c[1] = top
    end
    if keep then rings[k] = c end
    local all = 0
    for x = 5, ring + 4 do all = all + c[x] end
    local trailing = all - c[5 + (top + 1) %% ring] -- bucket top-B shares its slot with top+1

    local left = math.min(limit - trailing, cap2 - all)
    if left < 0 then left = 0 end
    if trailing + n > limit or all + n > cap2 then
      local u = 0
      if not consume then
        u = trailing
      elseif converted then
        u = -1 -- decided on a state not written: not to be cached
      end
      if frees then
        out[i] = struct.pack('<i8i8i8i8i8', 0, left, frees(limit), frees(n), u)
      else
        out[i] = struct.pack('<i8i8i8i8i8', 0, left, after(c, top, trailing, all, 0, limit), after(c, top, trailing, all, n, n), u)
      end
    else
      local u = trailing
      if consume then
        local x = 5 + top %% ring
        c[x] = c[x] + n
        trailing, all, left, u = trailing + n, all + n, left - n, 0
        -- The key lives until its newest bucket drops out: longer than ttl
        -- only after the clock stepped back.
        local p = math.ceil(((top + ring - q) * w - rem) / 1000000)
        if p < ttl then p = ttl end
        rings[k], px[k] = c, p
      end
      local reset = after(c, top, trailing, all, 0, limit)
      if frees and not consume then reset = frees(limit) end
      out[i] = struct.pack('<i8i8i8i8i8', 1, left, reset, 0, u)
    end
  end
end
for k, p in pairs(px) do
  local c = rings[k]
  if p == 0 or not c then
    redis.call('DEL', k)
  else
    local len, f = #c - 5, fmt0
    if len ~= ring0 then f = '<dddH' .. string.rep('I4', len) end
    if now_us > c[3] or (now_us == c[3] and now_r > c[4]) then c[3], c[4] = now_us, now_r end
    redis.call('SET', k, struct.pack(f, unpack(c, 1, len + 4)), 'PX', p)
  end
end
return table.concat(out)
`

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
	nums, err := policyArgs(p, ttl)
	if err != nil {
		return scripts{}, err
	}
	var body string
	k := len(nums)
	switch p.Algorithm {
	case core.AlgTokenBucket, core.AlgLeakyBucket:
		body = fmt.Sprintf(luaGCRA, nums[0], nums[1], nums[2], nums[3])
	case core.AlgFixedWindow:
		body = fmt.Sprintf(luaFixedWindow, nums[0], nums[1], nums[2], nums[3], nums[4])
	case core.AlgSlidingWindow:
		// core.MaxBuckets bounds the ring, which the script unpacks onto
		// Lua's stack (8000 values): TestMaxBucketsFitLua.
		body = fmt.Sprintf(luaSlidingWindow, nums[0], nums[1], nums[2], nums[3], nums[4], nums[5],
			"<dddH"+strings.Repeat("I4", int(p.Buckets+1)))
	}
	return scripts{keyed: newScriptForm(scriptHead(false, k) + body), cross: newScriptForm(scriptHead(true, k) + body)}, nil
}

// policyArgs returns the numbers of the valid policy p that its algorithm's
// script needs, in the order of its placeholders and of the arguments that
// describe a policy given with a call (see the scripts), its keys expiring
// ttl after each write:
//
//	token and leaky bucket  interval (ns), tau (ns), expiry (ms), 1 if it delays
//	fixed window            Window in µs and the ns remainder, Limit, expiry (ms), the largest count a conversion keeps
//	sliding window          bucket width in µs and the ns remainder, Buckets, Limit, cap2, expiry (ms)
func policyArgs(p core.Policy, ttl time.Duration) ([]int64, error) {
	ttlMs := int64((ttl + time.Millisecond - 1) / time.Millisecond)
	switch p.Algorithm {
	case core.AlgTokenBucket, core.AlgLeakyBucket:
		interval := int64(p.Interval())
		delays := int64(0)
		if p.Algorithm == core.AlgLeakyBucket && !p.Meter {
			delays = 1
		}
		return []int64{interval, p.Burst * interval, ttlMs, delays}, nil
	case core.AlgFixedWindow:
		w := int64(p.Window)
		// The largest count core's one-word state keeps beside the window
		// number (core's maxFixedLimit), so that a conversion keeps the
		// same count in both stores.
		most := min(int64(1)<<(63-bits.Len64(uint64(math.MaxInt64/w)))-1, core.MaxWindowLimit)
		return []int64{w / 1000, w % 1000, p.Limit, ttlMs, most}, nil
	case core.AlgSlidingWindow:
		w := int64(p.Interval())
		return []int64{w / 1000, w % 1000, p.Buckets, p.Limit, p.MaxInWindow(), ttlMs}, nil
	}
	return nil, fmt.Errorf("redisstore: unknown algorithm %v", p.Algorithm)
}

// parseReplies reads a script's reply into the Decisions of its calls.
func parseReplies(v any, calls []*call) error {
	f, ok := v.(string)
	if !ok || len(f) != 40*len(calls) {
		return fmt.Errorf("redisstore: unexpected script reply %T of %d bytes for %d calls", v, len(f), len(calls))
	}
	for i, c := range calls {
		var x [5]int64
		for j := range x {
			x[j] = int64(binary.LittleEndian.Uint64([]byte(f[40*i+8*j : 40*i+8*j+8])))
		}
		d := &c.res
		d.Allowed = x[0] == 1
		d.Remaining = x[1]
		d.ResetAfter = time.Duration(max(x[2], 0))
		d.RetryAfter = time.Duration(max(x[3], 0))
		switch {
		case c.n == 0:
			c.used = x[4] // a look: the fifth is the usage, the delay 0
		case x[4] < 0:
			c.used = -1 // a denial the deny cache must not repeat: see Limiter.allow
		default:
			d.Delay = time.Duration(x[4])
		}
	}
	return nil
}

// isNoScript reports whether err says the server does not have the
// script cached (restart, failover, SCRIPT FLUSH).
func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}
