-- The token and leaky bucket of package core (core/tokenbucket.go) for a
-- batch of calls: the theoretical arrival time (TAT) of each key, stored
-- as struct '<dHddH': whole µs and the ns remainder, the interval (ns) of
-- the policy it was written under, and the latest instant it was written
-- at (µs and ns). Arguments and reply: see doc.go; a policy given with a
-- call has the header's first four numbers (K = 4). For example:
--
--   redis-cli --eval gcra.lua user:1 , 1
--
-- The header: the limiter's own policy, which redisstore writes in as
-- constants (tonumber on every call costs a quarter of the script's time):
-- the interval (Window/Limit) and tau (Burst * interval) in ns, the expiry
-- in ms, 1 if a leaky bucket delays (else 0), the expiry as text; then,
-- for a policy made with core.AllOf, its parts after the first, each as
-- these five values (nil: a policy of one part; a table costs Redis an
-- allocation and its collection on every call).
local interval, tau, ttl, delays, ttlS, more = 6000000000, 60000000000, 60000, 0, '60000', nil

local A, keys, m, co = #ARGV, KEYS, #KEYS, 0
-- E and now close the arguments only when needed (doc.go): a keyed call
-- of the limiter's own policy at the server's TIME has one per key. E is
-- compared as text first: tonumber (a strtod) costs about a thousand
-- instructions, as much as a table.
local E, now_us, now_r = 0, '', 0
if A > m or m == 0 then
  now_us, now_r = ARGV[A - 1], ARGV[A]
  if ARGV[A - 2] ~= '0' then E = tonumber(ARGV[A - 2]) end
end
if now_us ~= '' then now_us, now_r = tonumber(now_us), tonumber(now_r) else local t = redis.call('TIME'); now_us, now_r = t[1] * 1000000 + t[2], 0 end
local h = A - 3 - E * 4 -- the given policies' numbers follow ARGV[h]
if m == 0 then m = h / (2 + math.min(E, 1)); keys, co = ARGV, m end -- the cross-slot form

local K, P = more and #more + 1 or 1, nil -- K: the parts of the limiter's own policy
if E > 0 or K > 1 then
  P = {[0] = {interval, tau, ttl, delays, ttlS}}
  for e = 1, E do
    local x = h + (e - 1) * 4
    P[e] = {tonumber(ARGV[x + 1]), tonumber(ARGV[x + 2]), tonumber(ARGV[x + 3]), tonumber(ARGV[x + 4]), ARGV[x + 3]}
  end
  for j = 1, K - 1 do P[E + j] = more[j] end
end

-- Per key: its state (false: none), packed as it is stored, packed again
-- as soon as a call changes it (fewer tables than one per field: each
-- costs Redis an allocation and its garbage collection), and the expiry to
-- write it with ('del': delete).
local cur, dirty, out = {}, {}, {false, false} -- out: room for one call and the now
-- Rows gs..g are a group (doc.go): charged row by row, each key's state
-- before kept in sv; if a row denies (not pass), the states are put back
-- and the rows decided again without consuming (probe).
local i, g, gs, probe, pass, sv = 1, 0, 0, false, true, nil
while i <= m do
  local v = ARGV[co + i] -- the cost; '1' (Allow) spared tonumber
  local k, n, settle = keys[i], v == '1' and 1 or tonumber(v), nil
  if not n then settle, n = tonumber(string.match(v, '^%S+')), 0 end -- Settle: 'delta at_us at_r reset'
  if P then
    local e = 0 -- the row's policy: P[e], or P[-e] for a part after its group's first
    if E > 0 then e = tonumber(ARGV[co + m + i]) elseif (i - 1) % K > 0 then e = -((i - 1) % K) end
    if e < 0 then
      e = -e
    elseif n > 0 and i > g then
      g = i -- the group's last row: by ARGV, or the K parts of the limiter's own (E = 0)
      while g < m and (E > 0 and tonumber(ARGV[co + m + g + 1]) < 0 or E == 0 and g % K > 0) do g = g + 1 end
      gs, probe, pass, sv = i, false, true, {}
    end
    local p = P[e]
    interval, tau, ttl, delays, ttlS = p[1], p[2], p[3], p[4], p[5]
  end
  local st = cur[k]
  if st == nil then
    st = redis.call('GET', k)
    cur[k] = st
  end
  if i <= g and g > gs and not probe then sv[k] = {st, dirty[k]} end
  -- The TAT (false: none) in µs and ns, the interval of the policy it was
  -- written under, and (cu, cr) the later of now and the instant it was
  -- written at: a clock that stepped back converts and writes as if it
  -- had stood still there.
  local us, ur, from, cu, cr = false, 0, interval, now_us, now_r
  if st then
    local lu, lr
    us, ur, from, lu, lr = struct.unpack('<dHddH', st)
    if lu > cu or (lu == cu and lr > cr) then cu, cr = lu, lr end
  end
  local base = 0 -- max(tat, now) - now
  local stay = false -- a denial decided on a converted state, not written
  local rs, rt -- a look's or a denial's ResetAfter and RetryAfter on a converted state
  if us then
    base = (us - now_us) * 1000 + ur - now_r
    if base < 0 then base = 0 end
    if from ~= interval then
      -- Written under another rate: the same debt (TAT - now) in units
      -- of cost, ceil(d * interval / from), at most 2^52 ns, at the later
      -- of now and the instant it was written at (cu, cr): a clock that
      -- stepped back converts as if it had stood still there. The product
      -- may exceed 2^53: the part below one old interval is multiplied by
      -- binary long division, whose partial remainders stay below 2^53.
      -- muldiv(x, a, b) is floor(x * a / b), at most 2^53, and whether it
      -- is exact, for 0 <= x < 2^53 and 0 < a, b <= 2^52: x = q1 * b + r1,
      -- and r1 * a / b by binary long division, whose partial remainders
      -- stay below 2^53. Defined here, its closure is made only when a
      -- call converts.
      local function muldiv(x, a, b)
        local q1 = math.floor(x / b)
        local r1 = x - q1 * b
        if q1 * a >= 9007199254740992 then return 9007199254740992, false end
        local q, r, bit = 0, 0, 4503599627370496
        while bit >= 1 do
          q, r = q * 2, r * 2
          if r >= b then q, r = q + 1, r - b end
          if math.floor(a / bit) % 2 == 1 then
            r = r + r1
            if r >= b then q, r = q + 1, r - b end
          end
          bit = bit / 2
        end
        return math.min(q1 * a + q, 9007199254740992), r == 0
      end
      local x = base -- the TAT - now, left where it is
      local d = (us - cu) * 1000 + ur - cr
      if d > 0 then
        local d0, exact = d, true
        d, exact = muldiv(d, interval, from)
        if not exact then d = d + 1 end
        d = math.min(d, 4503599627370496)
        -- A delaying leaky bucket keeps the requests queued at their
        -- instants and serves new ones after them.
        if delays == 1 and d < d0 then d = d0 end
        base = (cu - now_us) * 1000 + cr - now_r + d -- the new TAT - now
      else
        d, base, x = 0, 0, 0
      end
      local denied = n > 0 and base + n * interval > tau
      stay = denied or probe
      if n == 0 or stay then
        -- A look or a denial leaves the key recovering at its own rate
        -- (core's registry.look): full at its TAT, and admitting a cost c
        -- once its debt then, converted, leaves room for c, that is once
        -- TAT - t <= floor((tau - c * interval) * from / interval) (and,
        -- for a delaying leaky bucket, <= tau - c * interval). When its
        -- debt at (cu, cr) leaves room, only a clock behind (cu, cr)
        -- denies, and base + c * interval - tau is the answer.
        local room = tau - math.max(n, 1) * interval
        local slack = muldiv(room, from, interval)
        if delays == 1 and slack > room then slack = room end
        rt = x - slack
        if d <= room then rt = base - room end
        rs, rt = math.min(x, 4611686018427387904), math.min(rt, 4611686018427387904)
      end
      if n ~= 0 and not stay then
        -- Decided under this policy from now on; a denial leaves the
        -- state as it was (core's registry.move).
        if d > 0 then
          local t = cr + d
          local carry = math.floor(t / 1000)
          cur[k] = struct.pack('<dHddH', cu + carry, t - carry * 1000, interval, cu, cr)
          dirty[k] = math.max(ttl, math.ceil(base / 1000000))
        else
          cur[k], dirty[k] = false, nil
        end
      end
    end
  end
  -- A server clock that stepped back by centuries: spans beyond 2^62 ns
  -- (which Redis would turn into garbage integers) are reported as 2^62.
  if base > 4611686018427387904 then base = 4611686018427387904 end
  if settle then -- Settle (core's gcraState.settle), in units of the key's own interval
    local iv, t = interval, 0 -- and its TAT less now
    if us then iv, t = from, (us - now_us) * 1000 + ur - now_r end
    local most = math.floor(4503599627370496 / iv) -- units in MaxSpan
    -- What the charge still holds: it was all back at its instant plus
    -- its reset, and what was charged after it lies beyond that.
    local sa, sr, reset = string.match(v, '^%S+ (%S+) (%S+) (%S+)$')
    sa, sr, reset = tonumber(sa), tonumber(sr), tonumber(reset)
    local held = (sa - now_us) * 1000 + sr - now_r + reset
    if settle > 0 then
      t = math.min(math.max(t, 0) + math.min(settle, most) * iv, 4503599627370496)
    elseif t > 0 and held > 0 and (delays == 0 or (us - sa) * 1000 + ur - sr == reset) then
      -- a delaying leaky bucket only while its TAT is the one its
      -- admission set: no request was queued after it
      t = math.max(t - math.min(math.min(-settle, most) * iv, held), 0)
    else
      t = nil -- nothing to give back
    end
    if t then
      local x = now_r + t
      local carry = math.floor(x / 1000)
      cur[k] = struct.pack('<dHddH', now_us + carry, x - carry * 1000, iv, cu, cr)
      dirty[k] = math.max(ttl, math.ceil(t / 1000000))
    end
    out[i] = struct.pack('<i8i8i8i8i8', 0, 0, 0, 0, 0)
  elseif n < 0 then -- Set: usage -1-n
    local d = (-n - 1) * interval
    if d == 0 then
      cur[k], dirty[k] = false, 'del'
    else
      local t = now_r + d
      local carry = math.floor(t / 1000)
      cur[k] = struct.pack('<dHddH', now_us + carry, t - carry * 1000, interval, now_us, now_r) -- written at now exactly
      dirty[k] = math.max(ttl, math.ceil(d / 1000000))
    end
    out[i] = struct.pack('<i8i8i8i8i8', 0, 0, 0, 0, 0)
  else
    local consume, used = n > 0 and not probe, 0 -- a look's fifth value: the key's usage, ceil(base / interval)
    if n == 0 then
      n, used = 1, math.floor(base / interval)
      if used * interval < base then used = used + 1 end
    end
    if stay then used = -1 end -- decided on a state not written: not to be cached
    local nxt = base + n * interval -- the new TAT - now
    if nxt > tau then
      local left = tau - base
      if left < 0 then left = 0 end
      pass = false
      out[i] = struct.pack('<i8i8i8i8i8', 0, math.floor(left / interval), rs or base, rt or nxt - tau, used)
    elseif not consume then
      out[i] = struct.pack('<i8i8i8i8i8', 1, math.floor((tau - base) / interval), rs or base, 0, used)
    else
      local t = now_r + nxt
      local carry = math.floor(t / 1000)
      cur[k], dirty[k] = struct.pack('<dHddH', now_us + carry, t - carry * 1000, interval, cu, cr), ttlS
      local delay = 0
      if delays == 1 then delay = base end
      out[i] = struct.pack('<i8i8i8i8i8', 1, math.floor((tau - nxt) / interval), nxt, 0, delay)
    end
  end
  if i == g and (probe or pass) then
    probe = false
  elseif i == g and g > gs then -- a part denied: no part charged, the rows told without consuming
    for k, s in pairs(sv) do cur[k], dirty[k] = s[1], s[2] end
    probe, i = true, gs - 1
  end
  i = i + 1
end
for k, px in pairs(dirty) do
  if px == 'del' then
    redis.call('DEL', k)
  else
    redis.call('SET', k, cur[k], 'PX', px)
  end
end
local now = struct.pack('<i8i8', now_us, now_r) -- the calls' now: Decision.At
if m == 1 then return out[1] .. now end -- one call: a concatenation, not table.concat's buffer
out[m + 1] = now
return table.concat(out)
