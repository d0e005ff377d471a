-- The sliding window of package core (core/slidingwindow.go) for a batch
-- of calls: the number of the newest bucket written, the bucket width (ns)
-- of the policy it was written under, the latest instant it was written
-- at (µs and ns), and a ring of B+1 counters, bucket b's count at position
-- b mod (B+1), stored as struct '<dddH' then B+1 times 'I4' (B is the
-- value's length less 26, over 4, less 1). A request in bucket k is
-- admitted when the B buckets k-B+1..k hold at most Limit and the B+1
-- buckets k-B..k at most cap2 = Policy.MaxInWindow() = Limit +
-- ceil(Limit/B): a client sending steadily at Limit per Window lands up to
-- that many in B+1 consecutive buckets. Arguments and reply: see doc.go; a
-- policy given with a call has the header's first six numbers (K = 6).
-- For example:
--
--   redis-cli --eval slidingwindow.lua user:1 , 1
--
-- The header: the limiter's own policy, which redisstore writes in as
-- constants: the bucket width in whole µs and the ns remainder, Buckets,
-- Limit, cap2, the expiry in ms, the struct format of its ring; then, for
-- a policy made with core.AllOf, its parts after the first, each as these
-- seven values (nil: a policy of one part; a table costs Redis an
-- allocation and its collection on every call).
local wa, wb, buckets, limit, cap2, ttl, fmt, more = 6000000, 0, 10, 100, 110, 66000, '<dddHI4I4I4I4I4I4I4I4I4I4I4', nil

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
local h = A - 3 - E * 6 -- the given policies' numbers follow ARGV[h]
if m == 0 then m = h / (2 + math.min(E, 1)); keys, co = ARGV, m end -- the cross-slot form

-- span returns the number of the span of a µs and b ns (b < 1000) that the
-- instant us µs r ns falls in, counted from the epoch, the instant's offset
-- into it in ns, and the span in ns. Every product stays below 2^53, so
-- they are exact; the float division only guesses the number.
local function span(a, b, us, r)
  local w = a * 1000 + b
  local q = math.floor((us + r / 1000) / (a + b / 1000))
  local rem = (us - q * a) * 1000 + r - q * b
  while rem < 0 do q, rem = q - 1, rem + w end
  while rem >= w do q, rem = q + 1, rem - w end
  return q, rem, w
end

local q, rem, w = span(wa, wb, now_us, now_r)
local ring = buckets + 1
local ring0, fmt0 = ring, fmt
local K, P = more and #more + 1 or 1, nil -- K: the parts of the limiter's own policy
if E > 0 or K > 1 then
  local function entry(a, b, ...) -- a policy's header values, its bucket's span now
    local eq, erem, ew = span(a, b, now_us, now_r)
    return {eq, erem, ew, ...}
  end
  P = {[0] = {q, rem, w, buckets, limit, cap2, ttl, fmt}}
  for e = 1, E do
    local x = h + (e - 1) * 6
    local eb = tonumber(ARGV[x + 3])
    P[e] = entry(tonumber(ARGV[x + 1]), tonumber(ARGV[x + 2]), eb, tonumber(ARGV[x + 4]), tonumber(ARGV[x + 5]), tonumber(ARGV[x + 6]), '<dddH' .. string.rep('I4', eb + 1))
  end
  for j = 1, K - 1 do P[E + j] = entry(unpack(more[j])) end
end

-- ns from now until, with no further traffic, cost m is admitted and at
-- least want unit requests remain after it: after(c, ..., 0, limit) is
-- core's slidingState.untilFull (ResetAfter), after(c, ..., n, n) its
-- untilAdmits (RetryAfter). Buckets only drop out at bucket boundaries.
-- c[1] is the newest bucket top, c[2] the bucket width, c[3] and c[4] the
-- instant it was written at, c[5 + b % ring] bucket b's count. At most
-- 2^62 ns: Redis would turn a longer span into a meaningless integer.
local function after(c, top, trailing, all, cost, want)
  local tr, al = trailing, all
  for j = 0, ring do
    if j > 0 then
      al = al - c[5 + (top - buckets + j - 1) % ring]
      if j < ring then tr = tr - c[5 + (top - buckets + j) % ring] else tr = 0 end
    end
    if tr + cost <= limit and al + cost <= cap2 and math.min(limit - tr - cost, cap2 - al - cost) + cost >= want then
      if j == 0 then return 0 end
      return math.min((top + j - q) * w - rem, 4611686018427387904)
    end
  end
  return math.min((top + ring - q) * w - rem, 4611686018427387904)
end

local rings, px = {}, {} -- per key: its ring (false: none), the expiry to write (0: delete)
local out = {}
-- Rows gs..g are a group (doc.go): charged row by row, what each charge
-- changed kept in sv; if a row denies (not pass), the states are put back
-- and the rows decided again without consuming (probe).
local i, g, gs, probe, pass, sv = 1, 0, 0, false, true, nil
while i <= m do
  local v = ARGV[co + i]
  local k, n, settle, sa, sr = keys[i], tonumber(v), nil, nil, nil
  if not n then -- Settle: 'delta at_us at_r reset'
    settle, sa, sr = string.match(v, '^(%S+) (%S+) (%S+) ')
    settle, sa, sr, n = tonumber(settle), tonumber(sa), tonumber(sr), 0
  end
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
    -- Written under another Window or Buckets (core's
    -- slidingState.convert): each old bucket counts in the newest bucket
    -- of this policy that it overlaps, but not after the current one, both
    -- at the later of now and the instant it was written at (cu, cr).
    local oring, sw = #c - 5, c[2]
    local cu, cr = now_us, now_r
    if c[3] > cu or (c[3] == cu and c[4] > cr) then cu, cr = c[3], c[4] end
    local oq, orem = span(math.floor(sw / 1000), sw % 1000, cu, cr)
    local nq, nrem = q, rem
    if cu ~= now_us or cr ~= now_r then nq, nrem = span(math.floor(w / 1000), w % 1000, cu, cr) end
    local old = c
    c = false
    -- The old ring's newest bucket written is no later than oq, the old
    -- bucket of (cu, cr); bucket b's last ns is (b + 1 - oq) * sw - orem - 1
    -- from (cu, cr).
    for b = oq - oring + 1, old[1] do
      local x = old[5 + b % oring]
      local jb = nq + math.floor(((b + 1 - oq) * sw - orem - 1 + nrem) / w)
      if jb > nq then jb = nq end
      if x > 0 and nq - jb < ring then
        if not c then
          c = {nq, w, cu, cr}
          for y = 5, ring + 5 do c[y] = 0 end
        end
        local y = 5 + jb % ring
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
    -- Defined here, its closures are made only when a call converts.
    local lo, hi, off = oq - oring + 1, old[1], (cu - now_us) * 1000 + cr - now_r
    local function leaves(b, j)
      return math.min((b + oring - oq) * sw - orem, (math.floor(((b + 1 - oq) * sw - orem - 1 + nrem) / w) + j) * w - nrem)
    end
    frees = function(cost)
      local i1, i2, tr, ol, t = lo, lo, 0, 0, 0
      for b = lo, hi do tr = tr + old[5 + b % oring] end
      while true do
        -- Buckets that hold nothing change no sum.
        while i1 <= hi and old[5 + i1 % oring] == 0 do i1 = i1 + 1 end
        while i2 < i1 and old[5 + i2 % oring] == 0 do i2 = i2 + 1 end
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
          local x = old[5 + i1 % oring]
          tr, ol, i1 = tr - x, ol + x, i1 + 1
        elseif leaves(i2, ring) == e then
          ol, i2 = ol - old[5 + i2 % oring], i2 + 1
        end
      end
    end
    -- Decided under this policy from now on if admitted (written below);
    -- a look or a denial leaves the state as it was (core's
    -- registry.move).
    keep, converted = false, true
  end
  if settle then -- Settle (core's slidingState.settle), in the key's own buckets
    local r = rings[k] -- as stored (c may be converted)
    local sw, sring, sq, srem = w, ring, q, rem
    if r then sw, sring = r[2], #r - 5 end
    if sw ~= w then sq, srem = span(math.floor(sw / 1000), sw % 1000, now_us, now_r) end
    local top = sq
    if r and r[1] > top then top = r[1] end
    local b = top -- a debt's bucket; a refund's is at's while it counts
    if settle < 0 then
      b = span(math.floor(sw / 1000), sw % 1000, sa, sr)
      if not r or b > top or top - b >= sring then b = nil end
    end
    if b then
      if not r or top - r[1] >= sring then
        r = {top, sw, 0, 0}
        for x = 5, sring + 5 do r[x] = 0 end
      end
      for x = r[1] + 1, top do r[5 + x % sring] = 0 end
      r[1] = top
      local y = 5 + b % sring
      r[y] = math.min(math.max(r[y] + settle, 0), 4294967295)
      rings[k], px[k] = r, math.max(ttl, math.ceil(((top + sring - sq) * sw - srem) / 1000000))
    end
    out[i] = struct.pack('<i8i8i8i8i8', 0, 0, 0, 0, 0)
  elseif n < 0 then -- Set: usage -1-n
    if n == -1 then
      rings[k], px[k] = false, 0
    else
      c = {q, w, 0, 0}
      for x = 5, ring + 5 do c[x] = 0 end
      c[5 + q % ring] = -n - 1
      rings[k], px[k] = c, math.max(ttl, math.ceil((ring * w - rem) / 1000000))
    end
    out[i] = struct.pack('<i8i8i8i8i8', 0, 0, 0, 0, 0)
  else
    local look = n == 0
    local consume = not look and not probe
    if look then n = 1 end
    -- q is now's bucket. A clock that stepped back counts in the newest
    -- bucket seen, so it cannot revive buckets that already dropped out.
    local top = q
    if c and c[1] > top then top = c[1] end
    if not c or top - c[1] >= ring then
      c = {top, w, 0, 0}
      for x = 5, ring + 5 do c[x] = 0 end
    else
      for bk = c[1] + 1, top do c[5 + bk % ring] = 0 end
      c[1] = top
    end
    if keep then rings[k] = c end
    local all = 0
    for x = 5, ring + 4 do all = all + c[x] end
    local trailing = all - c[5 + (top + 1) % ring] -- bucket top-B shares its slot with top+1
    local left = math.min(limit - trailing, cap2 - all)
    if left < 0 then left = 0 end
    local u = 0 -- a look's fifth value: the trailing count
    if look then
      u = trailing
    elseif converted then
      u = -1 -- decided on a state not written: not to be cached
    end
    if trailing + n > limit or all + n > cap2 then
      pass = false
      if frees then
        out[i] = struct.pack('<i8i8i8i8i8', 0, left, frees(limit), frees(n), u)
      else
        out[i] = struct.pack('<i8i8i8i8i8', 0, left, after(c, top, trailing, all, 0, limit), after(c, top, trailing, all, n, n), u)
      end
    else
      if consume then
        local x = 5 + top % ring
        if i <= g and g > gs then sv[k] = {c, x, n, rings[k], px[k]} end
        c[x] = c[x] + n
        trailing, all, left, u = trailing + n, all + n, left - n, 0
        -- The key lives until its newest bucket drops out: longer than
        -- ttl only after the clock stepped back.
        local p = math.ceil(((top + ring - q) * w - rem) / 1000000)
        if p < ttl then p = ttl end
        rings[k], px[k] = c, p
      end
      local reset = after(c, top, trailing, all, 0, limit)
      if frees and not consume then reset = frees(limit) end
      out[i] = struct.pack('<i8i8i8i8i8', 1, left, reset, 0, u)
    end
  end
  if i == g and (probe or pass) then
    probe = false
  elseif i == g and g > gs then -- a part denied: no part charged, the rows told without consuming
    for k, s in pairs(sv) do s[1][s[2]], rings[k], px[k] = s[1][s[2]] - s[3], s[4], s[5] end
    probe, i = true, gs - 1
  end
  i = i + 1
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
local now = struct.pack('<i8i8', now_us, now_r) -- the calls' now: Decision.At
if m == 1 then return out[1] .. now end -- one call: a concatenation, not table.concat's buffer
out[m + 1] = now
return table.concat(out)
