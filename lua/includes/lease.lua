-- include "lease": the answer of a capacity lease's operations (include "mode": take, give, reclaim)
-- and named takes. Needs "time", "number" and "mode", and the script's `lease_shape`: 'window' (units
-- belong to the window, quota period or sub-window of their tag) or 'bucket' (units go back only
-- within the taker's hold of their take).
--
-- Named takes: a take can reach its parent after its holder gave up on it (a slow or cut link), and
-- its units would then belong to no one. A take's own arguments come last in ARGV: its id ('' =
-- unnamed), its deadline ('' = none) and its hold (ms; buckets); a reclaim's: the id of the take it
-- gives back and that take's deadline ('' = none).
--   deadline  the last instant (this clock, epoch ms) the take may run: later it takes nothing (late)
--   id        the take is recorded in the counter's take ledger (KEYS[2], src/counters/keys.ts
--             takesKey); the same id again answers the recorded grant and takes nothing more (repeat)
--   reclaim   gives back what the named take took, as a give of its units with its tag would (units of
--             an ended window, or a bucket's past their hold, lapse), once: asked again, it answers the
--             same (repeat). A reclaim that comes before its take leaves a tombstone (ahead), and the
--             take, when it comes, takes nothing (reclaimed).
-- The ledger: x = the expire-at of its longest-lived entry, n = entries written, and per take id
-- '<expire-at>:<seq>:g:<units>:<tag>:<give tag>' (granted) or '<expire-at>:<seq>:r:<back>:<lapsed>'
-- (reclaimed, or a tombstone). An entry is kept MEMORY_MS past the latest of when it was written, its
-- take's deadline and, a grant, the end of what its units could go back to (their window's end, a
-- bucket's take + hold): a holder whose link returns within that learns what its take did, lapsed
-- units included. Past its expire-at it is absent. At most MAX_TAKES entries: a new one first drops
-- the expired, then the least recently written.
--
-- Every answer: {allowed, remaining, retry_after_ms, reset_after_ms, units (taken, or given back),
-- tag (of the window, quota period or sub-window the units belong to; a bucket's take: the instant its
-- units must be back by, the take's plus the hold; a bucket's give: 0), ms the units may still be spent
-- (until their window ends; a bucket's take: what is left of the hold), now (this clock, epoch ms),
-- outcome (0 done, 1 late, 2 repeat, 3 reclaimed, 4 ahead), units lapsed (give, reclaim)}.
-- Port of src/counters/named-takes.ts: change both together.
-- @include "slot"

local MAX_TAKES = 256
local MEMORY_MS = 60000
local DONE, LATE, REPEAT, RECLAIMED, AHEAD = 0, 1, 2, 3, 4

local outcome = DONE
local reclaiming = operation == 'reclaim'
local ledger = KEYS[2]
local take_id = nil
local deadline = nil
local hold = 0
-- The ledger entry of take_id: {expire_at, kind 'g' or 'r', a, b, c} (g: units, tag, give tag; r: back, lapsed).
local recorded = nil

local function optional_number(arg, what)
  if arg == '' then
    return nil
  end
  local n = tonumber(arg)
  if not n then
    error({ err = 'ERR rl: ' .. what .. ' must be a number or empty, got ' .. tostring(arg) })
  end
  return n
end

local function load_entry()
  local v = load_slot(ledger, take_id)
  if not v or not v[2] then
    return nil
  end
  local e, kind, a, b, c = string.match(v[2], '^([^:]+):[^:]+:(%a):([^:]+):([^:]+):?(.*)$')
  if tonumber(e) <= now then
    return nil
  end
  return { expire_at = tonumber(e), kind = kind, a = tonumber(a), b = tonumber(b), c = tonumber(c) }
end

local function write_entry(base, body)
  local expire_at = math.max(base, now, deadline or now) + MEMORY_MS
  local v = redis.call('HMGET', ledger, 'x', 'n')
  local x = tonumber(v[1]) or expire_at
  local seq = (tonumber(v[2]) or 0) + 1
  if redis.call('HEXISTS', ledger, take_id) == 0 and redis.call('HLEN', ledger) >= MAX_TAKES + 2 then
    -- Full: the expired go, then, if still full, the least recently written.
    local flat = redis.call('HGETALL', ledger)
    local live, oldest, oldest_seq = 0, nil, nil
    for i = 1, #flat, 2 do
      if flat[i] ~= 'x' and flat[i] ~= 'n' then
        local e, s = string.match(flat[i + 1], '^([^:]+):([^:]+):')
        if tonumber(e) <= now then
          redis.call('HDEL', ledger, flat[i])
        else
          live = live + 1
          if not oldest_seq or tonumber(s) < oldest_seq then
            oldest, oldest_seq = flat[i], tonumber(s)
          end
        end
      end
    end
    if live >= MAX_TAKES then
      redis.call('HDEL', ledger, oldest)
    end
  end
  x = math.max(x, expire_at)
  redis.call('HSET', ledger, 'x', fmt(x), 'n', fmt(seq), take_id, fmt(expire_at) .. ':' .. fmt(seq) .. ':' .. body)
  expire_in(ledger, x)
end

if taking or reclaiming then
  local first = #ARGV - 1
  if taking then
    first = #ARGV - 2
    hold = tonumber(ARGV[#ARGV])
    if not hold then
      return redis.error_reply('ERR rl: a take needs its hold (ms) as the last ARGV, got ' .. tostring(ARGV[#ARGV]))
    end
  end
  local ok, parsed = pcall(optional_number, ARGV[first + 1], 'a take deadline')
  if not ok then
    return parsed
  end
  deadline = parsed
  if ARGV[first] ~= '' then
    take_id = ARGV[first]
    if not ledger then
      return redis.error_reply('ERR rl: a named take or a reclaim needs the take ledger as KEYS[2]')
    end
    recorded = load_entry()
  elseif reclaiming then
    return redis.error_reply('ERR rl: a reclaim needs a take id')
  end
end
-- What a give asks back (the units of a reclaim's take): what it does not get back lapsed.
local asked = refund
if taking and recorded then
  -- Asked again: nothing more is taken (the state answers as a take of nothing).
  outcome = recorded.kind == 'g' and REPEAT or RECLAIMED
  cost = 0
elseif taking and deadline and now > deadline then
  outcome = LATE
  cost = 0
elseif reclaiming then
  giving = true
  refunding = true
  if recorded and recorded.kind == 'g' then
    refund = recorded.a
    give_tag = recorded.c
  else
    -- Nothing to give back (a give of nothing, to no window).
    refund = 0
    give_tag = -1
    outcome = recorded and REPEAT or AHEAD
  end
  asked = refund
end

local function lease_reply(allowed, remaining, retry_after, reset_after, units, tag, window_left)
  local lapsed = 0
  if taking and lease_shape == 'bucket' then
    -- The one place a bucket's back-by instant is made: its units go back, and are spent, within the hold.
    tag = now + hold
    window_left = hold
  end
  if taking and outcome == DONE and take_id then
    -- A reclaim gives back under the take's own tag (the entry keeps both fields, as older scripts read them).
    write_entry(math.max(now + window_left, tag), 'g:' .. fmt(units) .. ':' .. fmt(tag) .. ':' .. fmt(tag))
  elseif taking and outcome == REPEAT then
    if lease_shape == 'bucket' then
      window_left = math.max(0, recorded.b - now)
    elseif recorded.b ~= tag then
      -- Its window has ended.
      window_left = 0
    end
    units = recorded.a
    tag = recorded.b
    allowed = units > 0
  elseif giving then
    lapsed = asked - units
    if reclaiming and outcome == DONE then
      write_entry(recorded.expire_at, 'r:' .. fmt(units) .. ':' .. fmt(lapsed))
    elseif outcome == REPEAT then
      units = recorded.a
      lapsed = recorded.b
    elseif outcome == AHEAD then
      write_entry(now, 'r:0:0')
    end
  end
  local r = reply(allowed, remaining, retry_after, reset_after)
  r[5] = reply_number(units)
  r[6] = reply_number(tag)
  r[7] = reply_number(window_left)
  r[8] = reply_number(now)
  r[9] = outcome
  r[10] = reply_number(lapsed)
  return r
end
