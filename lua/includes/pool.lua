-- include "pool": region_pool.lua's pool hash (KEYS[1], its fields in the script's header): read into `p`
-- as the script starts, with the units of expired generations lapsed; `save` writes back what changed;
-- `answer` is the reply (src/regions/region-pool-protocol.ts). Needs `key`, `now`, `POOL_TTL_MS`.

-- Every field, with its value when absent; `p` holds them as numbers (strings for the tags and the lock).
local FIELDS = { 'a_u', 'a_e', 'a_t', 'a_s', 'b_u', 'b_e', 'b_t', 'b_s', 'lk', 'le', 'pr', 'lc', 'du', 'dd', 'rw', 'rs', 'rp', 'la', 'ln', 'an', 'wd', 'lw', 'sh', 'su' }
local STRINGS = { a_t = true, b_t = true, lk = true }
local ABSENT = { pr = -1, rw = now, la = now }
local p = {}
-- As read, so that `save` writes only what changed (a decision changes two or three fields).
local stored = {}
local fresh_pool
do
  local v = redis.call('HMGET', key, unpack(FIELDS))
  fresh_pool = v[1] == false
  for i, f in ipairs(FIELDS) do
    if STRINGS[f] then
      p[f] = v[i] or ''
    else
      p[f] = tonumber(v[i]) or ABSENT[f] or 0
    end
    stored[f] = p[f]
  end
end

local lapsed = 0
local GENERATIONS = { 'a', 'b' }

-- The units of generation `g` ('a' or 'b') are gone, counted as lapsed.
local function lapse(g)
  lapsed = lapsed + p[g .. '_u']
  p[g .. '_u'] = 0
end

-- The older live units are always in `a`.
local function settle()
  if p.a_u == 0 and p.b_u > 0 then
    p.a_u, p.a_e, p.a_t, p.a_s, p.b_u, p.b_s = p.b_u, p.b_e, p.b_t, p.b_s, 0, 0
  end
end

-- Units whose generation has expired are gone: they belonged to a window that may be over.
for _, g in ipairs(GENERATIONS) do
  if p[g .. '_u'] > 0 and p[g .. '_e'] <= now then lapse(g) end
end
settle()

local function measure(period)
  if now - p.rw >= period then
    if now - p.rw >= 2 * period then
      p.rp = 0
    else
      p.rp = p.rs
    end
    p.rs = 0
    p.rw = now
  end
end

local function left()
  return p.a_u + p.b_u
end

local function reset_after()
  local e = 0
  if p.a_u > 0 then e = p.a_e end
  if p.b_u > 0 and p.b_e > e then e = p.b_e end
  if e == 0 then return 0 end
  return e - now
end

-- Writes the fields that changed. Made or refilled (`refresh`), the pool lives POOL_TTL_MS past its
-- newest live units' expiry (none: past now), so no live unit goes with the key; later only memory is at
-- stake: expired units are recognised by their own expiry.
local function save(refresh)
  local args = {}
  for _, f in ipairs(FIELDS) do
    if p[f] ~= stored[f] or fresh_pool then
      args[#args + 1] = f
      args[#args + 1] = STRINGS[f] and p[f] or fmt(p[f])
    end
  end
  if #args > 0 then
    redis.call('HSET', key, unpack(args))
  end
  if refresh or fresh_pool then
    expire_in(key, now + reset_after() + POOL_TTL_MS)
  end
end

-- A bucket's tags are the instants its units must be back by: of two, the earlier ('' unknown: they
-- never go back).
local function earlier_tag(x, y)
  if x == '' or y == '' then return '' end
  if tonumber(y) < tonumber(x) then return y end
  return x
end

local function newest_tag()
  if p.b_u > 0 then return p.b_t end
  if p.a_u > 0 then return p.a_t end
  return ''
end

-- The id of the refill holding the lock (or that held it last).
local function refill_id()
  return p.lk .. ':' .. fmt(p.ln) .. ':' .. fmt(p.le)
end

-- `lock`: the id of the refill the lock was just given for, or false.
local function answer(spent, retry, lock, tag)
  local recent = p.rs
  if p.rp > recent then recent = p.rp end
  local down = 0
  if p.dd > now then down = 1 end
  return { spent and 1 or 0, reply_number(left()), reply_number(retry), lock or 0, reply_number(recent),
    reply_number(p.pr), reply_number(lapsed), down, reply_number(reset_after()), tag or newest_tag(), reply_number(now),
    reply_number(p.wd), 0 }
end
