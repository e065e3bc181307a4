-- include "lease": the answer of a capacity lease's operations (include "mode": take, give, reclaim)
-- and named takes and gives. Needs "time", "number" and "mode", and the script's `lease_shape`: 'window'
-- (units belong to the window, quota period or sub-window of their tag) or 'bucket' (units go back only
-- within the taker's hold of their take).
--
-- Named takes and gives: either can reach its parent after its holder gave up on it (a slow or cut
-- link): a take's units would then belong to no one, a give's would be counted lapsed and given back
-- too. Their own arguments come last in ARGV: a take's id ('' = unnamed), deadline ('' = none) and
-- hold (ms; buckets); a give's id, deadline and tag (include "mode"); a reclaim's id (of a take or a
-- give), its deadline ('' = none) and its reclaimer ('' = none).
--   deadline  the last instant (this clock, epoch ms) the take or give may run: later it takes or gives
--             nothing (late)
--   id        the take or give is recorded in the counter's take ledger (KEYS[2], src/counters/keys.ts
--             takesKey); the same id again answers the recorded result and takes or gives nothing more
--             (repeat)
--   reclaim   settles an id once: a take's, it gives back what the take took, as a give of its units
--             with its tag would (units of an ended window, or a bucket's past their hold, lapse); a
--             give's, it answers what the give did and gives nothing. Asked again, it answers the same
--             (repeat) to the same reclaimer, and nothing (reclaimed) to another: only the first
--             reclaimer counts the units. A reclaim that comes before its take or give leaves a
--             tombstone (ahead), and that take or give, when it comes, does nothing (reclaimed).
-- An id is a take's or a give's, never both: a take that finds any entry but its grant, or a give any
-- but its own, does nothing (reclaimed), so no units leave or come back twice.
-- The ledger: x = the expire-at of its longest-lived entry, n = entries written, and per id
-- '<expire-at>:<seq>:g:<units>:<tag>:<give tag>' (a take's grant), '<expire-at>:<seq>:v:<back>:<lapsed>'
-- (a give) or '<expire-at>:<seq>:r:<back>:<lapsed>:<reclaimer>' (reclaimed, or a tombstone). An entry is kept
-- MEMORY_MS past the later of when it was written and its operation's deadline: a holder settles what
-- it did not hear within that (src/lease), and a reclaim's give checks the units' window anyway. Past
-- its expire-at it is absent. At most MAX_TAKES entries: a new one first drops the expired, then the
-- least recently written.
--
-- Every answer of a lease operation:
-- Returns  {allowed 1/0, remaining, retry_after_ms, reset_after_ms, units, window_tag, window_left_ms,
--          store_now, outcome, lapsed[, shares]}: units taken or given back; window_tag, the tag of the
--          window, quota period or sub-window the units belong to (a bucket's take: the instant its units
--          must be back by, the take's plus the hold; a bucket's give: 0); window_left_ms, how long the
--          units may still be spent (until their window ends; a bucket's take: what is left of the
--          hold); store_now, this clock (epoch ms); outcome, 0 done, 1 late, 2 repeat, 3 reclaimed,
--          4 ahead; lapsed, units lapsed (give, reclaim); shares, a region's share report (include "shares").
-- Port of src/counters/parent-take-ledger.ts: change both together.
-- @include "slot"
-- @include "shares"

local MAX_TAKES = 256
local MEMORY_MS = 60000
local DONE, LATE, REPEAT, RECLAIMED, AHEAD = 0, 1, 2, 3, 4

local outcome = DONE
local reclaiming = operation == 'reclaim'
local ledger = KEYS[2]
local take_id = nil
local deadline = nil
local hold = 0
-- The ledger entry of take_id: {expire_at, kind 'g', 'v' or 'r', a, b, c, rest} (g: units, tag, give tag; v: back,
-- lapsed; r: back, lapsed, and its reclaimer as `rest`, the raw last field).
local by = ''
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
  return { expire_at = tonumber(e), kind = kind, a = tonumber(a), b = tonumber(b), c = tonumber(c), rest = c }
end

local function write_entry(body)
  local expire_at = math.max(now, deadline or now) + MEMORY_MS
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

if taking or giving or reclaiming then
  -- Each has three own arguments; the last: a take's hold, a give's tag, a reclaim's reclaimer.
  local first = #ARGV - 2
  if reclaiming then
    by = ARGV[#ARGV]
  end
  if taking then
    hold = tonumber(ARGV[#ARGV])
    if not hold then
      return redis.error_reply('ERR rl: a take needs its hold (ms) as the last ARGV, got ' .. tostring(ARGV[#ARGV]))
    end
  end
  local ok, parsed = pcall(optional_number, ARGV[first + 1], 'a deadline')
  if not ok then
    return parsed
  end
  deadline = parsed
  if ARGV[first] ~= '' then
    take_id = ARGV[first]
    if not ledger then
      return redis.error_reply('ERR rl: a named take or give, or a reclaim, needs the take ledger as KEYS[2]')
    end
    recorded = load_entry()
  elseif reclaiming then
    return redis.error_reply('ERR rl: a reclaim needs an id')
  end
end
if (taking or giving) and recorded then
  -- Asked again (its own kind of entry), or settled without it: nothing more is taken or given back.
  local own = 'v'
  if taking then
    own = 'g'
  end
  outcome = recorded.kind == own and REPEAT or RECLAIMED
elseif (taking or giving) and deadline and now > deadline then
  outcome = LATE
elseif reclaiming then
  giving = true
  refunding = true
  if recorded and recorded.kind == 'g' then
    refund = recorded.a
    give_tag = recorded.c
  elseif recorded and recorded.kind == 'r' and recorded.rest ~= by then
    -- Settled by another reclaimer, who counts it.
    outcome = RECLAIMED
  else
    -- A give's, or settled before: nothing more to give back.
    outcome = recorded and REPEAT or AHEAD
  end
end
if outcome ~= DONE then
  -- The state answers as a take, or a give to no window, of nothing.
  cost = 0
  refund = 0
  give_tag = -1
end
-- What a give asks back: what it does not get back lapsed.
local asked = refund

local function lease_reply(allowed, remaining, retry_after, reset_after, units, tag, window_left)
  local lapsed = 0
  if taking and lease_shape == 'bucket' then
    -- The one place a bucket's back-by instant is made: its units go back, and are spent, within the hold.
    tag = now + hold
    window_left = hold
  end
  if taking and outcome == DONE and take_id then
    -- A reclaim gives back under the take's own tag (the entry keeps both fields, as older scripts read them).
    write_entry('g:' .. fmt(units) .. ':' .. fmt(tag) .. ':' .. fmt(tag))
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
    if outcome == REPEAT then
      units = recorded.a
      lapsed = recorded.b
    elseif outcome == DONE and take_id and reclaiming then
      write_entry('r:' .. fmt(units) .. ':' .. fmt(lapsed) .. ':' .. by)
    elseif outcome == DONE and take_id then
      write_entry('v:' .. fmt(units) .. ':' .. fmt(lapsed))
    elseif outcome == AHEAD then
      write_entry('r:0:0:' .. by)
    end
  end
  local share_text = nil
  if share_region then
    remaining, retry_after, share_text = share_answer(outcome == DONE, units, tag, window_left, remaining, retry_after)
  end
  local r = reply(allowed, remaining, retry_after, reset_after)
  r[5] = reply_number(units)
  r[6] = reply_number(tag)
  r[7] = reply_number(window_left)
  r[8] = reply_number(now)
  r[9] = outcome
  r[10] = reply_number(lapsed)
  -- A share's (include "shares"): every region's units of the window.
  r[11] = share_text
  return r
end
