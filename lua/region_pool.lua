-- region_pool: a region's pool of units of one `budget: global` counter, held in the region's store
-- (docs/distribution.md). One script for every algorithm: the units were taken from the global counter
-- by the algorithm's own script; here they are only counted, spent and let go. Every server of the
-- region spends from the same pool, so decisions in the region are exact against it.
-- Protocol: src/regions/region-pool-protocol.ts declares the same operations, arguments and reply
-- fields, in this order (the loader checks this header against it); the port of this script is
-- test/regions/support/memory-region-pool.ts: change all together.
--
-- Clocks: only this store's clock is read here (ARGV[1] '' = TIME), and every answer tells it. A
-- generation's expiry arrives in this clock, computed by the server from such an answer and the global
-- store's, so that it never comes later than the global window's end (src/regions/region-store.ts,
-- `refill`, by `toStoreClock` of src/lease/types.ts; docs/distribution.md, "Clocks").
--
-- KEYS[1]  pool hash (include "pool"), its fields by their stored names:
--            a_u a_e a_t a_s  older generation: units, expires-at (this store's clock), tag (windows: the
--                             window's; buckets: the instant, in the global store's clock, they must be back
--                             there by), units spent or taken from it (what refunds may put back)
--            b_u b_e b_t b_s  newer generation
--            lk le        refill lock: owner token, expires-at (one server of the region refills at a time);
--                         with `ln` they make the refill's id, `lk:ln:le`, which names its take at the global
--                         counter (a lock that expires with its refill neither added nor failed hands that
--                         id to the next holder, who reclaims the take there)
--            pr           what the parent could still admit after the last take (-1 = not known yet)
--            lc           the chunk the last refill asked for (refill ahead once half of it is spent)
--            du           parent exhausted until (no refill before; spends that do not fit are refused)
--            dd           parent unreachable until (decisions that do not fit fail at once)
--            rw rs rp     demand measure: period start, units spent (or wanted and not found) in it, in the previous period
--            la           last spend (idle return)
--            ln an        refills started (refill locks given), and the last of them that landed (its add)
--            wd           units the decisions waiting for the next refill want (it asks for them at least)
--            lw sh        what those waiting for the last refill started wanted, and 1 when the last refill
--                         that landed brought fewer units than that (the parent could not serve them all)
--            su           parent short until: when the last refill that landed said the parent may admit more
--                         (its retry_after; 0: at once); a waiting decision refused before is told what is left
-- ARGV[1]  now, epoch ms; '' = Redis TIME
-- ARGV[2]  operation; its arguments follow, from ARGV[3] on, in this order:
--            spend  cost lock_ms token measure_ms fresh waits_for  (all of cost or nothing)
--            take   cost lock_ms token measure_ms fresh waits_for  (up to cost: a process lease below the region)
--            add    units expires_at tag parent_remaining refill retry_after_ms asked measure_ms window
--            fail   refill down_ms  (a refill could not reach the parent)
--            drain  idle_ms window  (every live unit out if none was spent for idle_ms; 0 = now)
--            refund units tag below  (below 1: a return from a process lease, into units of window tag)
--            peek
--          `fresh` 1: a first try, so its demand counts once. `waits_for` the refill this decision waits
--          for, as the last answer said (0: none). `expires_at` in this store's clock. `refill` the
--          refill's id, as the lock was given: only the refill that holds the lock adds (one whose lock
--          was taken over is refused: its take is reclaimed, so its units must not reach the pool too).
--          `retry_after_ms` > 0: the parent admits no more for that long, as its take answered when it
--          granted fewer units than asked or its last ones, at most max_hold (0: it may admit more now).
--          `asked` the chunk asked for. `window` 1: the tags are windows, and units of another window
--          lapse; 0: a bucket's, whose generations stay side by side, and merged go back by the earlier tag.
-- Returns  {spent 1/0, left, retry_after_ms, refill, recent, parent_remaining, lapsed, down 1/0,
--          reset_after_ms, tag, store_now, waiting, waits_for[, stale]}: `refill` the id of the refill
--          the lock was given for (0: none), `stale` (only then) the id of the refill whose expired lock
--          it took over, `left` the live units after the operation,
--          `retry_after_ms` (spend, take: > 0 refused) until the parent may admit again: while it admits
--          nothing (`du`), or, for a waiting decision refused, what is left of `su` (at least 1),
--          `recent` the units wanted over the last measure period (the chunk rule's rate), `lapsed` units that expired
--          unspent (or were dropped) during this call, `reset_after_ms` until the newest live units
--          expire, `tag` their window tag, `store_now` this store's clock as the script read it, `waiting`
--          the units the decisions waiting for a refill want (spend, take: those the refill this call
--          starts must ask for), `waits_for` (spend, take) the refill this decision now waits for (0:
--          it does not wait). Except:
--          take answers in `left` the units taken, with their tag and reset_after_ms until they expire;
--          add `spent` 1 when its units were taken in (0: refused); drain the units taken out and their
--          tag; refund the units taken back.

-- @include "time"
-- @include "number"

local key = KEYS[1]
local op = ARGV[2]
local POOL_TTL_MS = 600000

-- @include "pool"

if op == 'spend' or op == 'take' then
  -- spend: a decision's cost, all or nothing. take: up to n units for a process lease below the
  -- region (a partial take, as the algorithm scripts' operation take), answered with how many and until when.
  local cost = tonumber(ARGV[3])
  local lock_ms = tonumber(ARGV[4])
  local token = ARGV[5]
  local fresh = ARGV[7] == '1'
  measure(tonumber(ARGV[6]))
  local units = 0
  if op == 'take' then
    units = math.min(cost, left())
  elseif cost <= left() then
    units = cost
  end
  local tag = p.a_t
  local expires = p.a_e
  if units > 0 then
    -- Oldest units first: they expire first.
    local from_a = math.min(units, p.a_u)
    p.a_u = p.a_u - from_a
    p.b_u = p.b_u - (units - from_a)
    p.a_s = p.a_s + from_a
    p.b_s = p.b_s + (units - from_a)
    if units > from_a then
      expires = math.min(expires, p.b_e)
    end
    settle()
    p.la = now
  end
  if units > 0 or fresh then
    -- Demand the pool could not meet counts too, so the next chunk is sized for it.
    p.rs = p.rs + cost
  end
  local retry = 0
  if p.du > now then retry = p.du - now end
  -- A decision the pool cannot pay waits for a refill: it counts in what the next refill to start asks
  -- for, and counts again only once that one has landed without it being paid.
  local waits_for = 0
  if units == 0 and retry == 0 and p.dd <= now then
    waits_for = tonumber(ARGV[8])
    local needs = cost
    if op == 'take' then needs = 1 end
    if waits_for > 0 and waits_for <= p.an and (p.sh == 1 or (p.pr >= 0 and p.pr < needs)) then
      -- The refill it waited for has landed, the pool still cannot pay it, and the parent could not
      -- give what the decisions waiting wanted, or had less than it needs left: the parent admits no
      -- more now. Refused, as a holder refuses its waiters after a short take (under demand beyond the
      -- limit, waiting on would never end), with what is left of the parent's retry_after.
      retry = math.max(1, p.su - now)
      waits_for = 0
    elseif waits_for <= p.an then
      -- (A process lease's take counts one unit: any unit serves it.)
      p.wd = p.wd + needs
      waits_for = p.ln + 1
    end
  end
  -- Refill ahead once half of the last chunk is spent, or now for a demand that does not fit; never
  -- while the parent is exhausted or unreachable, and only one server at a time.
  local lock = false
  local stale = nil
  if (units < cost or left() * 2 <= p.lc) and retry == 0 and p.dd <= now and (p.lk == '' or p.le <= now) then
    -- Expired with its refill neither added nor failed (its server died, hung or was paused): this
    -- holder reclaims that refill's take, and its add, if it still comes, is refused.
    if p.lk ~= '' then stale = refill_id() end
    p.lk = token
    p.le = now + lock_ms
    lock = true
  end
  local waiting = p.wd
  if lock then
    -- This refill serves the decisions waiting so far (`waiting`); later ones wait for the next.
    p.ln = p.ln + 1
    p.lw = p.wd
    p.wd = 0
  end
  save()
  local reply = answer(units > 0, retry, lock and refill_id())
  reply[12] = reply_number(waiting)
  reply[13] = reply_number(waits_for)
  reply[14] = stale
  if op == 'take' then
    -- The units taken, their window tag, and how long they may still be spent.
    reply[2] = reply_number(units)
    if units > 0 then
      reply[9] = reply_number(expires - now)
      reply[10] = tag
    end
  end
  return reply
end

-- add's `refill` (ARGV[7]).
if op == 'add' and (p.lk == '' or ARGV[7] ~= refill_id()) then
  -- Not the refill holding the lock (taken over, or landed already): its take is reclaimed instead.
  if lapsed > 0 then save() end
  return answer(false, 0, false)
end

if op == 'add' then
  local units = tonumber(ARGV[3])
  local expires = tonumber(ARGV[4]) -- expires_at
  local tag = ARGV[5]
  p.pr = tonumber(ARGV[6]) -- parent_remaining
  local retry = tonumber(ARGV[8]) -- retry_after_ms
  p.lc = tonumber(ARGV[9]) -- asked
  measure(tonumber(ARGV[10])) -- measure_ms
  local window = ARGV[11] == '1'
  if units > 0 and expires <= now then
    -- Already past their window (a slow round trip): they lapse here.
    lapsed = lapsed + units
  elseif units > 0 then
    -- Units of another window never mix with these: the older ones are over (or about to be).
    if window and tag ~= '' then
      for _, g in ipairs(GENERATIONS) do
        if p[g .. '_u'] > 0 and p[g .. '_t'] ~= tag then lapse(g) end
      end
      settle()
    end
    if p.a_u == 0 then
      p.a_u, p.a_e, p.a_t, p.a_s = units, expires, tag, 0
    else
      if p.b_u > 0 then
        -- Two generations at most: the older two merge under the earlier expiry (never later), and a
        -- bucket's under the earlier tag (never back later than either may).
        p.a_u = p.a_u + p.b_u
        p.a_e = math.min(p.a_e, p.b_e)
        p.a_s = p.a_s + p.b_s
        if not window then p.a_t = earlier_tag(p.a_t, p.b_t) end
      end
      p.b_u, p.b_e, p.b_t, p.b_s = units, expires, tag, 0
    end
    p.du = 0
  elseif units <= 0 then
    -- The parent admits nothing now: no refill and no waiting until it may again.
    p.du = now + math.max(1, retry)
  end
  -- Until when the parent admits no more (0: it may now): what waiting decisions refused are told.
  if retry > 0 then p.su = now + retry else p.su = 0 end
  p.dd = 0
  -- The latest refill started has landed: the decisions that waited for it look again.
  p.an = p.ln
  if units < p.lw then p.sh = 1 else p.sh = 0 end
  p.lk = ''
  p.le = 0
  save(true)
  return answer(true, 0, false)
end

if op == 'fail' then
  -- ARGV[3] refill, ARGV[4] down_ms
  if p.lk ~= '' and ARGV[3] == refill_id() then
    p.lk = ''
    p.le = 0
  end
  p.dd = now + tonumber(ARGV[4])
  save()
  return answer(false, 0, false)
end

if op == 'drain' then
  local idle_ms = tonumber(ARGV[3])
  local window = ARGV[4] == '1'
  if left() == 0 or now - p.la < idle_ms then
    if lapsed > 0 then save() end
    return answer(false, 0, false, '')
  end
  local units = left()
  local tag = p.a_t
  if not window then
    -- A bucket's units all leave, by the earlier tag.
    if p.b_u > 0 then tag = earlier_tag(p.a_t, p.b_t) end
  else
    -- The units leave under the newest tag; an older window's units (never live beside a newer one
    -- after `add`) would not be refunded by the parent anyway.
    if p.b_u > 0 then tag = p.b_t end
    if p.b_u > 0 and p.a_u > 0 and p.a_t ~= p.b_t then
      lapsed = lapsed + p.a_u
      units = p.b_u
    end
  end
  p.a_u = 0
  p.b_u = 0
  save()
  local reply = answer(true, 0, false, tag)
  reply[2] = reply_number(units)
  return reply
end

if op == 'refund' then
  -- A decision's refund: back into the live generation that expires first, at most what was spent or
  -- taken lately (as a counter's usage never goes below zero). A return from a process lease below
  -- (`below`): its units, only into a generation of the same window whose expiry has not passed (even
  -- one emptied meanwhile). Either way never more than was spent or taken from that generation, so no
  -- refund adds units the global counter did not grant. With no such generation the units belonged
  -- to a window that is over and stay spent. Answers, in `left`, how many went back.
  local units = tonumber(ARGV[3])
  local tag = ARGV[4] or ''
  local below = ARGV[5] == '1'
  if not below then
    units = math.min(units, p.rs)
  end
  local into = nil
  for _, g in ipairs(GENERATIONS) do
    if into == nil and p[g .. '_e'] > now and p[g .. '_s'] > 0 and (not below or p[g .. '_t'] == tag) then
      into = g
    end
  end
  if into == nil then
    units = 0
  else
    units = math.min(units, p[into .. '_s'])
    p[into .. '_u'] = p[into .. '_u'] + units
    p[into .. '_s'] = p[into .. '_s'] - units
    settle()
  end
  if not below then
    p.rs = p.rs - units
  end
  save()
  local reply = answer(true, 0, false)
  reply[2] = reply_number(units)
  return reply
end

if op == 'peek' then
  if lapsed > 0 then save() end
  return answer(false, 0, false)
end

return redis.error_reply('ERR rl region_pool: unknown operation ' .. tostring(op))
