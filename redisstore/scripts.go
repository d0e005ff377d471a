package redisstore

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/core"
)

// The Lua scripts, one per algorithm, each the same state machine as its
// in-memory counterpart in package core (same formulas, same Decision),
// evaluated atomically on the server.
//
// Time. Lua numbers are doubles, exact for integers up to 2^53. An instant
// is held as whole microseconds since the epoch (about 1.8e15, exact until
// the year 2255) plus a nanosecond remainder; spans (ResetAfter, a bucket's
// TAT ahead of now, ...) are whole nanoseconds, exact up to 2^53 ns (104
// days). The longest span a script forms is about twice the policy's
// Recovery time (a TAT up to Recovery ahead plus a cost of up to Recovery),
// so New accepts Recovery times up to 2^52 ns, about 52 days. So the scripts
// compute in nanoseconds exactly like core, whatever the policy's interval
// (Window/Limit need not be a whole microsecond). Redis's TIME has
// microsecond resolution, so in production now's remainder is 0.
//
// Arguments, shared by all scripts:
//
//	KEYS[1]  the state key
//	ARGV[1]  n, the cost
//	ARGV[2]  "1" to consume when admitted, "0" to only look (Peek)
//	ARGV[3]  "" to read the server's TIME; else now in µs (tests only)
//	ARGV[4]  now's nanosecond remainder (tests only)
//	ARGV[5]  the key's expiry in ms: the policy's Recovery time, rounded up
//	ARGV[6…] the policy's numbers (see each script)
//
// Reply: one string "allowed remaining resetAfter retryAfter delay", the
// durations in ns. A string, not an array of integers, because go-redis
// boxes each integer of an array reply: one allocation instead of six.
const luaPrelude = `
local n = tonumber(ARGV[1])
local consume = ARGV[2] == '1'
local now_us, now_r = tonumber(ARGV[3]), tonumber(ARGV[4])
if not now_us then
  local t = redis.call('TIME')
  now_us, now_r = tonumber(t[1]) * 1000000 + tonumber(t[2]), 0
end
local ttl = tonumber(ARGV[5])

-- floor(a / b) for integers 0 <= a, 0 < b below 2^53, corrected for the
-- rounding of the float division.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

-- The span of width w = a*1000 + b ns (a µs, b < 1000 ns) that now falls in,
-- counted from the epoch, and now's offset into it in ns. Every product
-- stays below 2^53, so the result is exact.
local function span(a, b)
  local w = a * 1000 + b
  local q = math.floor((now_us + now_r / 1000) / (a + b / 1000))
  local rem = (now_us - q * a) * 1000 + now_r - q * b
  while rem < 0 do q, rem = q - 1, rem + w end
  while rem >= w do q, rem = q + 1, rem - w end
  return q, rem, w
end

-- The expiry to set: the Recovery time, or longer when the state outlives
-- it (a server clock that stepped back).
local function expiry(ns)
  local ms = math.ceil(ns / 1000000)
  if ms > ttl then return string.format('%d', ms) end
  return ARGV[5]
end

local function reply(allowed, remaining, reset, retry, delay)
  return string.format('%d %d %d %d %d', allowed, remaining, reset, retry, delay)
end
`

// luaGCRA is core/tokenbucket.go: the token and leaky bucket's theoretical
// arrival time (TAT), stored as one integer of Unix nanoseconds.
//
//	ARGV[6] interval ns (Window/Limit)   ARGV[7] tau ns (Burst*interval)
//	ARGV[8] "1" for a leaky bucket that delays
const luaGCRA = luaPrelude + `
local interval, tau = tonumber(ARGV[6]), tonumber(ARGV[7])
local base = 0 -- max(tat, now) - now
local tat = redis.call('GET', KEYS[1])
if tat then
  local us, r = 0, tonumber(tat)
  if #tat > 3 then us, r = tonumber(string.sub(tat, 1, -4)), tonumber(string.sub(tat, -3)) end
  base = math.max(0, (us - now_us) * 1000 + r - now_r)
end
local nxt = base + n * interval -- the new tat - now
if nxt > tau then
  return reply(0, idiv(math.max(0, tau - base), interval), base, nxt - tau, 0)
end
if not consume then
  return reply(1, idiv(tau - base, interval), base, 0, 0)
end
local t = now_r + nxt
redis.call('SET', KEYS[1], string.format('%d%03d', now_us + math.floor(t / 1000), t % 1000), 'PX', expiry(nxt))
local delay = 0
if ARGV[8] == '1' then delay = base end
return reply(1, idiv(tau - nxt, interval), nxt, 0, delay)
`

// luaFixedWindow is core/fixedwindow.go: the window number and the count
// admitted in it, stored as one decimal string, the window number followed
// by the count in 10 digits (Limit < 2^32).
//
//	ARGV[6] Window's µs   ARGV[7] Window's ns remainder   ARGV[8] Limit
const luaFixedWindow = luaPrelude + `
local limit = tonumber(ARGV[8])
local q, rem, w = span(tonumber(ARGV[6]), tonumber(ARGV[7]))
local count, back = 0, 0 -- back: windows the stored one is ahead of now's
local v = redis.call('GET', KEYS[1])
if v then
  local stored = tonumber(string.sub(v, 1, -11))
  if stored >= q then
    -- A clock that stepped back stays in the stored window, so it cannot
    -- reopen a used-up window.
    count, back = tonumber(string.sub(v, -10)), stored - q
  end
end
local untilEnd = (back + 1) * w - rem
if count + n > limit then
  return reply(0, limit - count, untilEnd, untilEnd, 0)
end
if not consume then
  if count == 0 then untilEnd = 0 end
  return reply(1, limit - count, untilEnd, 0, 0)
end
redis.call('SET', KEYS[1], string.format('%d%010d', q + back, count + n), 'PX', expiry(untilEnd))
return reply(1, limit - count - n, untilEnd, 0, 0)
`

// luaSlidingWindow is core/slidingwindow.go: a hash from bucket number to
// the count admitted in that bucket (only buckets with admissions exist).
// A request in bucket k is admitted when the B buckets k-B+1..k hold at
// most Limit and the B+1 buckets k-B..k at most Limit + Limit/B.
//
//	ARGV[6] bucket width's µs   ARGV[7] its ns remainder   ARGV[8] B
//	ARGV[9] Limit   ARGV[10] Limit + Limit/B
const luaSlidingWindow = luaPrelude + `
local buckets, limit, cap2 = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local ring = buckets + 1
local k, rem, w = span(tonumber(ARGV[6]), tonumber(ARGV[7]))
local fields = redis.call('HGETALL', KEYS[1])
local counts, top = {}, k
for i = 1, #fields, 2 do
  local b = tonumber(fields[i])
  counts[b] = tonumber(fields[i + 1])
  -- A clock that stepped back counts in the newest bucket seen, so it
  -- cannot revive buckets that already dropped out.
  if b > top then top = b end
end
local oldest = top - buckets
local trailing, all = 0, 0
for b, c in pairs(counts) do
  if b >= oldest then
    all = all + c
    if b > oldest then trailing = trailing + c end
  end
end
local function count(b) return counts[b] or 0 end
local function remaining(tr, al) return math.max(0, math.min(limit - tr, cap2 - al)) end

-- ns from now until, with no further traffic, cost m is admitted and at
-- least want unit requests remain after it (core's slidingState.until).
local function after(m, want)
  local tr, al = trailing, all
  for j = 0, ring do
    if j > 0 then
      al = al - count(oldest + j - 1)
      if j < ring then tr = tr - count(oldest + j) else tr = 0 end
    end
    if tr + m <= limit and al + m <= cap2 and remaining(tr + m, al + m) + m >= want then
      if j == 0 then return 0 end
      return (top + j - k) * w - rem
    end
  end
  return (top + ring - k) * w - rem
end

if trailing + n > limit or all + n > cap2 then
  return reply(0, remaining(trailing, all), after(0, limit), after(n, n), 0)
end
if consume then
  counts[top] = count(top) + n
  trailing, all = trailing + n, all + n
  redis.call('HINCRBY', KEYS[1], string.format('%d', top), n)
  local stale = {}
  for b in pairs(counts) do
    if b < oldest then stale[#stale + 1] = string.format('%d', b) end
  end
  if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
  redis.call('PEXPIRE', KEYS[1], expiry((top + ring - k) * w - rem))
end
return reply(1, remaining(trailing, all), after(0, limit), 0, 0)
`

// maxSpan is the longest Recovery time (and Window) the scripts compute
// exactly: 2^52 ns, about 52 days.
const maxSpan = time.Duration(1) << 52

// script is one algorithm's Lua script and the policy's numbers it takes
// (ARGV[5] onwards), converted once so that a call boxes nothing for them.
type script struct {
	lua        *redis.Script
	policyArgs []any
}

func newScript(p core.Policy, ttl time.Duration) (script, error) {
	if rec := p.Recovery(); rec > maxSpan || p.Window > maxSpan {
		return script{}, fmt.Errorf("redisstore: %v: window %v or recovery time %v exceeds %v, the longest the scripts compute exactly in Lua's float64 numbers", p.Algorithm, p.Window, rec, maxSpan)
	}
	ttlArg := strconv.FormatInt(int64((ttl+time.Millisecond-1)/time.Millisecond), 10)
	ns := func(d time.Duration) string { return strconv.FormatInt(int64(d), 10) }
	us := func(d time.Duration) string { return strconv.FormatInt(int64(d/time.Microsecond), 10) }
	rem := func(d time.Duration) string { return strconv.FormatInt(int64(d%time.Microsecond), 10) }
	switch p.Algorithm {
	case core.AlgTokenBucket, core.AlgLeakyBucket:
		interval := p.Interval()
		delay := "0"
		if p.Algorithm == core.AlgLeakyBucket && !p.Meter {
			delay = "1"
		}
		return script{gcraScript, []any{ttlArg, ns(interval), ns(time.Duration(p.Burst) * interval), delay}}, nil
	case core.AlgFixedWindow:
		return script{fixedWindowScript, []any{ttlArg, us(p.Window), rem(p.Window), strconv.FormatInt(p.Limit, 10)}}, nil
	case core.AlgSlidingWindow:
		w := p.Interval()
		return script{slidingWindowScript, []any{ttlArg, us(w), rem(w),
			strconv.FormatInt(p.Buckets, 10), strconv.FormatInt(p.Limit, 10),
			strconv.FormatInt(p.Limit+p.Limit/p.Buckets, 10)}}, nil
	}
	return script{}, fmt.Errorf("redisstore: unknown algorithm %v", p.Algorithm)
}

var (
	gcraScript          = redis.NewScript(luaGCRA)
	fixedWindowScript   = redis.NewScript(luaFixedWindow)
	slidingWindowScript = redis.NewScript(luaSlidingWindow)
)

// parseReply reads a script's reply into d, allocating nothing.
func parseReply(v any, d *core.Decision) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("redisstore: unexpected script reply %T", v)
	}
	var f [5]int64
	i := 0
	for j := range f {
		neg := false
		if i < len(s) && s[i] == '-' {
			neg, i = true, i+1
		}
		start := i
		var x int64
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			x = x*10 + int64(s[i]-'0')
		}
		if i == start || (j < len(f)-1 && (i >= len(s) || s[i] != ' ')) {
			return errBadReply(s)
		}
		i++
		if neg {
			x = -x
		}
		f[j] = x
	}
	if i != len(s)+1 {
		return errBadReply(s)
	}
	d.Allowed = f[0] == 1
	d.Remaining = f[1]
	d.ResetAfter = time.Duration(max(f[2], 0))
	d.RetryAfter = time.Duration(max(f[3], 0))
	d.Delay = time.Duration(max(f[4], 0))
	return nil
}

func errBadReply(s string) error {
	return fmt.Errorf("redisstore: malformed script reply %q", s)
}

// isNoScript reports whether err says the server does not have the
// script cached (restart, failover, SCRIPT FLUSH).
func isNoScript(err error) bool {
	return errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT")
}

// scriptSource returns the Lua source of the script with the given SHA1.
func scriptSource(sha string) string {
	for _, s := range []struct {
		script *redis.Script
		src    string
	}{{gcraScript, luaGCRA}, {fixedWindowScript, luaFixedWindow}, {slidingWindowScript, luaSlidingWindow}} {
		if s.script.Hash() == sha {
			return s.src
		}
	}
	return ""
}
