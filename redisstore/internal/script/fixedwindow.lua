-- The fixed window of package core (core/fixedwindow.go) for a batch of
-- calls: the number of each key's window counted from the epoch and the
-- count admitted in it, the Window (ns) of the policy it was written
-- under, the latest instant it was written at (µs and ns) and that
-- policy's Limit, stored as struct '<dI4ddHI4'. Arguments and reply: see
-- doc.go; a policy given with a call has the header's first five numbers
-- (K = 5). For example:
--
--   redis-cli --eval fixedwindow.lua user:1 , 1
--
-- The header: the limiter's own policy, which redisstore writes in as
-- constants: the Window in whole µs and the ns remainder, the Limit, the
-- expiry in ms, the largest count a conversion keeps (core's, what its
-- one-word state holds), the expiry as text; then, for a policy made with
-- core.AllOf, its parts after the first, each as these six values (nil:
-- a policy of one part; a table costs Redis an allocation and its
-- collection on every call).
local wa, wb, limit, ttl, most, ttlS, more = 60000000, 0, 10, 60000, 536870911, '60000', nil

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
local h = A - 3 - E * 5 -- the given policies' numbers follow ARGV[h]
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
local K, P = more and #more + 1 or 1, nil -- K: the parts of the limiter's own policy
if E > 0 or K > 1 then
  local function entry(a, b, ...) -- a policy's header values, its window's span now
    local eq, erem, ew = span(a, b, now_us, now_r)
    return {eq, erem, ew, ...}
  end
  P = {[0] = {q, rem, w, limit, ttl, most, ttlS}}
  for e = 1, E do
    local x = h + (e - 1) * 5
    P[e] = entry(tonumber(ARGV[x + 1]), tonumber(ARGV[x + 2]), tonumber(ARGV[x + 3]), tonumber(ARGV[x + 4]), tonumber(ARGV[x + 5]), ARGV[x + 4])
  end
  for j = 1, K - 1 do P[E + j] = entry(unpack(more[j])) end
end

-- Per key: its state (false: none), packed as it is stored, packed again
-- as soon as a call changes it (fewer tables than one per field: each
-- costs Redis an allocation and its garbage collection), and the expiry to
-- write it with (0: delete).
local cur, px, out = {}, {}, {false, false} -- out: room for one call and the now
-- Rows gs..g are a group (doc.go): charged row by row, each key's state
-- before kept in sv; if a row denies (not pass), the states are put back
-- and the rows decided again without consuming (probe).
local i, g, gs, probe, pass, sv = 1, 0, 0, false, true, nil
while i <= m do
  local v = ARGV[co + i] -- the cost; '1' (Allow) spared tonumber
  local k, n, settle, sa, sr = keys[i], v == '1' and 1 or tonumber(v), nil, nil, nil
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
    q, rem, w, limit, ttl, most, ttlS = p[1], p[2], p[3], p[4], p[5], p[6], p[7]
  end
  local st = cur[k]
  if st == nil then
    st = redis.call('GET', k)
    cur[k] = st
  end
  if i <= g and g > gs and not probe then sv[k] = {st, px[k]} end
  -- The stored window (false: none), its count, Window and Limit, and
  -- (cu, cr) the later of now and the instant it was written at.
  local stored, sc, sw, sl, cu, cr = false, 0, w, limit, now_us, now_r
  if st then
    local lu, lr
    stored, sc, sw, lu, lr, sl = struct.unpack('<dI4ddHI4', st)
    if lu > cu or (lu == cu and lr > cr) then cu, cr = lu, lr end
    if sc == 0 then stored = false end -- refunded to 0: a new key's count, still under its policy (sw, sl) for Settle
  end
  local count, back, converted = 0, 0, false -- back: windows the stored one is ahead of now's
  local rs, rt -- a look's or a denial's ResetAfter and RetryAfter on a converted state
  if stored then
    if sw == w then
      if stored >= q then
        -- A clock that stepped back stays in the stored window, so it
        -- cannot reopen a used-up window.
        count, back = sc, stored - q
      end
    else
      -- Written under another Window (core's fixedState.convert): both
      -- current windows at the later of now and the instant it was written
      -- at (cu, cr), which is in the stored window or after it. What might
      -- still lie in the current window: the stored count, if its window
      -- overlaps the current one and is its policy's current window or the
      -- one before, and its Limit for the window before it when that
      -- overlaps too and the stored window is its policy's current one.
      local oq, orem = span(math.floor(sw / 1000), sw % 1000, cu, cr)
      local nq, nrem = q, rem
      if cu ~= now_us or cr ~= now_r then nq, nrem = span(math.floor(w / 1000), w % 1000, cu, cr) end
      back = nq - q
      if stored >= oq - 1 then
        -- The stored window is [s, s + sw) and the current one
        -- [-nrem, w - nrem), in ns from (cu, cr).
        local s = (stored - oq) * sw - orem
        if s < w - nrem and s + sw > -nrem then count = sc end
        if stored == oq and s - sw < w - nrem and s > -nrem then count = count + sl end
        if count > most then count = most end
        if n == 0 or probe or count + n > limit then
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
              local lo = t - (t + nrem) % w -- the start of the window holding t
              local x = 0
              if s < lo + w and e > lo then x = sc end
              if t < e and s - sw < lo + w and s > lo then x = x + sl end
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
  if settle then -- Settle (core's fixedState.settle), in the key's own windows
    local sq, srem = q, rem
    if sw ~= w then sq, srem = span(math.floor(sw / 1000), sw % 1000, now_us, now_r) end
    local cw, c = sq, 0 -- the key's current window and its count
    if stored and stored >= sq then cw, c = stored, sc end
    if settle > 0 then
      c = math.min(c + settle, most)
    elseif c > 0 and span(math.floor(sw / 1000), sw % 1000, sa, sr) == cw then
      c = math.max(c + settle, 0) -- a refund while the window charged is the current one
    else
      c = nil
    end
    if c then -- kept at 0 too: a later debt counts under the key's policy, as in memory
      cur[k] = struct.pack('<dI4ddHI4', cw, c, sw, cu, cr, sl)
      px[k] = math.max(ttl, math.ceil(((cw - sq + 1) * sw - srem) / 1000000))
    end
    out[i] = struct.pack('<i8i8i8i8i8', 0, 0, 0, 0, 0)
  elseif n < 0 then -- Set: usage -1-n
    if n == -1 then
      cur[k], px[k] = false, 0
    else
      cur[k] = struct.pack('<dI4ddHI4', q, -n - 1, w, now_us, now_r, limit) -- written at now exactly
      px[k] = math.max(ttl, math.ceil((w - rem) / 1000000))
    end
    out[i] = struct.pack('<i8i8i8i8i8', 0, 0, 0, 0, 0)
  else
    local look, u = n == 0, 0 -- a look's fifth value: the count
    local consume = not look and not probe
    if look then
      n, u = 1, count
    elseif converted then
      u = -1 -- decided on a state not written: not to be cached
    end
    if count + n > limit then
      local left = limit - count
      if left < 0 then left = 0 end
      pass = false
      out[i] = struct.pack('<i8i8i8i8i8', 0, left, rs or untilEnd, rt or untilEnd, u)
    elseif not consume then
      if count == 0 then untilEnd = 0 end
      out[i] = struct.pack('<i8i8i8i8i8', 1, limit - count, rs or untilEnd, 0, u)
    else
      -- The key lives until its window ends: longer than ttl only after
      -- the clock stepped back.
      local p = math.ceil(untilEnd / 1000000)
      if p <= ttl then p = ttlS end
      cur[k], px[k] = struct.pack('<dI4ddHI4', q + back, count + n, w, cu, cr, limit), p
      out[i] = struct.pack('<i8i8i8i8i8', 1, limit - count - n, untilEnd, 0, 0)
    end
  end
  if i == g and (probe or pass) then
    probe = false
  elseif i == g and g > gs then -- a part denied: no part charged, the rows told without consuming
    for k, s in pairs(sv) do cur[k], px[k] = s[1], s[2] end
    probe, i = true, gs - 1
  end
  i = i + 1
end
for k, p in pairs(px) do
  if p == 0 then
    redis.call('DEL', k)
  else
    redis.call('SET', k, cur[k], 'PX', p)
  end
end
local now = struct.pack('<i8i8', now_us, now_r) -- the calls' now: Decision.At
if m == 1 then return out[1] .. now end -- one call: a concatenation, not table.concat's buffer
out[m + 1] = now
return table.concat(out)
