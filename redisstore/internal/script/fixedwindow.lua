-- The fixed window of package core (core/fixedwindow.go) for a batch of
-- calls: the number of each key's window counted from the epoch and the
-- count admitted in it, the Window (ns) of the policy it was written
-- under, the latest instant it was written at (µs and ns) and that
-- policy's Limit, stored as struct '<dI4ddHI4'. Arguments and reply: see
-- doc.go; a policy given with a call has the header's first five numbers
-- (K = 5). For example:
--
--   redis-cli --eval fixedwindow.lua user:1 , 1 0 '' ''
--
-- The header: the limiter's own policy, which redisstore writes in as
-- constants: the Window in whole µs and the ns remainder, the Limit, the
-- expiry in ms, the largest count a conversion keeps (core's, what its
-- one-word state holds), and the expiry as text.
local wa, wb, limit, ttl, most, ttlS = 60000000, 0, 10, 60000, 536870911, '60000'

local A, keys, m, co = #ARGV, KEYS, #KEYS, 0
local E, now_us, now_r = tonumber(ARGV[A - 2]), tonumber(ARGV[A - 1]), 0
if now_us then now_r = tonumber(ARGV[A]) else local t = redis.call('TIME'); now_us = t[1] * 1000000 + t[2] end
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
local P
if E > 0 then
  P = {[0] = {q, rem, w, limit, ttl, most, ttlS}}
  for e = 1, E do
    local x = h + (e - 1) * 5
    local eq, erem, ew = span(tonumber(ARGV[x + 1]), tonumber(ARGV[x + 2]), now_us, now_r)
    P[e] = {eq, erem, ew, tonumber(ARGV[x + 3]), tonumber(ARGV[x + 4]), tonumber(ARGV[x + 5]), ARGV[x + 4]}
  end
end

-- Per key: the stored window (false: none), its count, its Window and
-- Limit, the instant it was written at, the expiry to write (0: delete).
local win, cnt, ws, wl, lu, lr, px = {}, {}, {}, {}, {}, {}, {}
local out = {}
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
      -- Written under another Window (core's fixedState.convert): both
      -- current windows at the later of now and the instant it was written
      -- at (cu, cr), which is in the stored window or after it. What might
      -- still lie in the current window: the stored count, if its window
      -- overlaps the current one and is its policy's current window or the
      -- one before, and its Limit for the window before it when that
      -- overlaps too and the stored window is its policy's current one.
      local cu, cr, l = now_us, now_r, lu[k]
      if l and (l > cu or (l == cu and lr[k] > cr)) then cu, cr = l, lr[k] end
      local oq, orem = span(math.floor(sw / 1000), sw % 1000, cu, cr)
      local nq, nrem = q, rem
      if cu ~= now_us or cr ~= now_r then nq, nrem = span(math.floor(w / 1000), w % 1000, cu, cr) end
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
              local lo = t - (t + nrem) % w -- the start of the window holding t
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
  if n < 0 then -- Set: usage -1-n
    if n == -1 then
      win[k], px[k] = false, 0
    else
      local p = math.max(ttl, math.ceil((w - rem) / 1000000))
      win[k], cnt[k], ws[k], wl[k], px[k], lu[k] = q, -n - 1, w, limit, p, false -- written at now exactly
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
      -- The key lives until its window ends: longer than ttl only after
      -- the clock stepped back.
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
