package redisstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
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
// Reply: an array {allowed, remaining, resetAfter, retryAfter, delay}, the
// durations in ns.
//
// The scripts define no functions in the common path: a closure costs
// server time on every call, and server time is what every app server
// shares.
const luaPrelude = `
local n = tonumber(ARGV[1])
local consume = ARGV[2] == '1'
local now_us, now_r = tonumber(ARGV[3]), tonumber(ARGV[4])
if not now_us then
  local t = redis.call('TIME')
  now_us, now_r = tonumber(t[1]) * 1000000 + tonumber(t[2]), 0
end
local ttl = tonumber(ARGV[5])
`

// luaSpan computes, for the policy's span (a fixed window or a sliding
// window's bucket) of w = a*1000 + b ns (a µs and b < 1000 ns from ARGV[6]
// and ARGV[7]), the number q of the span now falls in, counted from the
// epoch, and now's offset rem into it in ns. Every product stays below
// 2^53, so q and rem are exact; the float division only guesses q.
const luaSpan = `
local a, b = tonumber(ARGV[6]), tonumber(ARGV[7])
local w = a * 1000 + b
local q = math.floor((now_us + now_r / 1000) / (a + b / 1000))
local rem = (now_us - q * a) * 1000 + now_r - q * b
while rem < 0 do q, rem = q - 1, rem + w end
while rem >= w do q, rem = q + 1, rem - w end
`

// luaGCRA is core/tokenbucket.go: the token and leaky bucket's theoretical
// arrival time (TAT), stored as one integer of Unix nanoseconds (split into
// µs and ns on reading, as 19 digits are beyond a double).
//
//	ARGV[6] interval ns (Window/Limit)   ARGV[7] tau ns (Burst*interval)
//	ARGV[8] "1" for a leaky bucket that delays
//
// math.floor(x / interval) is exact for 0 <= x < 2^53: a quotient that is
// not an integer is at least 1/interval below the next one, more than the
// division's rounding error.
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
  return {0, math.floor(math.max(0, tau - base) / interval), base, nxt - tau, 0}
end
if not consume then
  return {1, math.floor((tau - base) / interval), base, 0, 0}
end
local t = now_r + nxt
redis.call('SET', KEYS[1], string.format('%d%03d', now_us + math.floor(t / 1000), t % 1000), 'PX', ARGV[5])
local delay = 0
if ARGV[8] == '1' then delay = base end
return {1, math.floor((tau - nxt) / interval), nxt, 0, delay}
`

// luaFixedWindow is core/fixedwindow.go: the window number and the count
// admitted in it, stored as one decimal string, the window number followed
// by the count in 10 digits (Limit < 2^32).
//
//	ARGV[6] Window's µs   ARGV[7] Window's ns remainder   ARGV[8] Limit
const luaFixedWindow = luaPrelude + luaSpan + `
local limit = tonumber(ARGV[8])
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
  return {0, limit - count, untilEnd, untilEnd, 0}
end
if not consume then
  if count == 0 then untilEnd = 0 end
  return {1, limit - count, untilEnd, 0, 0}
end
-- The key lives until its window ends: longer than ttl only after the
-- clock stepped back.
redis.call('SET', KEYS[1], string.format('%d%010d', q + back, count + n), 'PX', string.format('%d', math.max(ttl, math.ceil(untilEnd / 1000000))))
return {1, limit - count - n, untilEnd, 0, 0}
`

// luaSlidingWindow is core/slidingwindow.go: the number of the newest
// bucket written and a ring of Buckets+1 counters, the count of bucket b at
// position b mod (B+1), stored as one binary string of 8 + 4*(B+1) bytes
// (struct format "<d" then B+1 times "I4"), which Redis's struct library
// reads and writes in one call each. A request in bucket k is admitted when
// the B buckets k-B+1..k hold at most Limit and the B+1 buckets k-B..k at
// most Limit + Limit/B.
//
//	ARGV[6] bucket width's µs   ARGV[7] its ns remainder   ARGV[8] B
//	ARGV[9] Limit   ARGV[10] Limit + Limit/B   ARGV[11] the struct format
const luaSlidingWindow = luaPrelude + luaSpan + `
local buckets, limit, cap2, fmt = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]), ARGV[11]
local ring = buckets + 1
local c, head = nil, 0 -- c[1]: the newest bucket; c[2 + b % ring]: bucket b's count
local v = redis.call('GET', KEYS[1])
if v then
  c = {struct.unpack(fmt, v)}
  head = c[1]
end
-- q is now's bucket. A clock that stepped back counts in the newest bucket
-- seen, so it cannot revive buckets that already dropped out.
local top = math.max(q, head)
if not v or top - head >= ring then
  c = {top}
  for i = 2, ring + 1 do c[i] = 0 end
else
  for bk = head + 1, top do c[2 + bk % ring] = 0 end
  c[1] = top
end
local all = 0
for i = 2, ring + 1 do all = all + c[i] end
local trailing = all - c[2 + (top + 1) % ring] -- bucket top-B shares its slot with top+1

-- ns from now until, with no further traffic, cost m is admitted and at
-- least want unit requests remain after it (core's slidingState.until).
-- Buckets only drop out at bucket boundaries.
local function after(m, want)
  local tr, al = trailing, all
  for j = 0, ring do
    if j > 0 then
      al = al - c[2 + (top - buckets + j - 1) % ring]
      if j < ring then tr = tr - c[2 + (top - buckets + j) % ring] else tr = 0 end
    end
    if tr + m <= limit and al + m <= cap2 and math.min(limit - tr - m, cap2 - al - m) + m >= want then
      if j == 0 then return 0 end
      return (top + j - q) * w - rem
    end
  end
  return (top + ring - q) * w - rem
end

if trailing + n > limit or all + n > cap2 then
  return {0, math.max(0, math.min(limit - trailing, cap2 - all)), after(0, limit), after(n, n), 0}
end
if consume then
  local i = 2 + top % ring
  c[i] = c[i] + n
  trailing, all = trailing + n, all + n
  -- The key lives until its newest bucket drops out: longer than ttl only
  -- after the clock stepped back.
  redis.call('SET', KEYS[1], struct.pack(fmt, unpack(c, 1, ring + 1)), 'PX',
    string.format('%d', math.max(ttl, math.ceil(((top + ring - q) * w - rem) / 1000000))))
end
return {1, math.max(0, math.min(limit - trailing, cap2 - all)), after(0, limit), 0, 0}
`

// MaxBuckets is the largest sliding-window bucket count the Redis store
// accepts: the script unpacks the whole ring onto Lua's stack, which holds
// 8000 values.
const MaxBuckets = 4096

// maxSpan is the longest Recovery time (and Window) the scripts compute
// exactly: 2^52 ns, about 52 days.
const maxSpan = time.Duration(1) << 52

// script is one algorithm's Lua script and the policy's numbers it takes
// (ARGV[5] onwards), converted once so that a call boxes nothing for them.
type script struct {
	lua        *redis.Script
	sha        any // lua.Hash(), boxed once
	policyArgs []any
}

func newScript(p core.Policy, ttl time.Duration) (script, error) {
	if rec := p.Recovery(); rec > maxSpan || p.Window > maxSpan {
		return script{}, fmt.Errorf("redisstore: %v: window %v or recovery time %v exceeds %v, the longest the scripts compute exactly in Lua's float64 numbers", p.Algorithm, p.Window, rec, maxSpan)
	}
	if p.Algorithm == core.AlgSlidingWindow && p.Buckets > MaxBuckets {
		return script{}, fmt.Errorf("redisstore: SlidingWindow buckets must be <= %d, got %d (the ring is one value of Lua's stack per bucket)", MaxBuckets, p.Buckets)
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
		return newScriptArgs(gcraScript, []any{ttlArg, ns(interval), ns(time.Duration(p.Burst) * interval), delay}), nil
	case core.AlgFixedWindow:
		return newScriptArgs(fixedWindowScript, []any{ttlArg, us(p.Window), rem(p.Window), strconv.FormatInt(p.Limit, 10)}), nil
	case core.AlgSlidingWindow:
		w := p.Interval()
		return newScriptArgs(slidingWindowScript, []any{ttlArg, us(w), rem(w),
			strconv.FormatInt(p.Buckets, 10), strconv.FormatInt(p.Limit, 10),
			strconv.FormatInt(p.Limit+p.Limit/p.Buckets, 10),
			"<d" + strings.Repeat("I4", int(p.Buckets+1))}), nil
	}
	return script{}, fmt.Errorf("redisstore: unknown algorithm %v", p.Algorithm)
}

func newScriptArgs(lua *redis.Script, policyArgs []any) script {
	return script{lua: lua, sha: lua.Hash(), policyArgs: policyArgs}
}

var (
	gcraScript          = redis.NewScript(luaGCRA)
	fixedWindowScript   = redis.NewScript(luaFixedWindow)
	slidingWindowScript = redis.NewScript(luaSlidingWindow)
)

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
