-- quota: a budget of `limit` units per period; the period starts with the first consumption.
-- Port of MemoryCounterStore.quota (src/counters/memory-store.ts): change both together.
--
-- KEYS[1]  counter hash: x = expire-at (period end), s = period start, u = units used (epoch ms)
-- ARGV[1]  now, epoch ms as a decimal string; '' = Redis TIME
-- ARGV[2]  operation: consume, peek, refund; take, give (include "mode")
-- ARGV[3]  units: what a consume takes, a refund gives back (a peek ignores it)
-- ARGV[4]  limit (the budget)
-- ARGV[5]  period ms
-- Returns  {allowed 1/0, remaining, retry_after_ms, reset_after_ms}; lease operations add
--          {units, period start, ms until the period ends} (include "mode")

-- @include "time"
-- @include "number"
-- @include "mode"
-- @include "slot"
-- @include "window_take"

local key = KEYS[1]
local limit = tonumber(ARGV[4])
local period_ms = tonumber(ARGV[5])

local stored = load_slot(key, 's', 'u')
local period_start = now
local used = 0
if stored and now < tonumber(stored[2]) + period_ms then
  period_start = tonumber(stored[2])
  used = tonumber(stored[3])
end
local period_end = period_start + period_ms
local reset = 0
if used > 0 then
  reset = period_end - now
end
if giving and not (used > 0 and give_tag == period_start) then
  -- The units' period has ended: they lapsed, and nothing goes back.
  return lease_reply(true, math.max(0, limit - used), 0, reset, 0, period_start, period_end - now)
end
if refunding then
  local before = used
  if used > 0 then
    used = math.max(0, used - refund)
    redis.call('HSET', key, 'u', fmt(used))
  end
  -- Refunded to zero usage, the budget is whole again: reset 0, as a peek would then say.
  if used == 0 then
    reset = 0
  end
  if giving then
    return lease_reply(true, math.max(0, limit - used), 0, reset, before - used, period_start, period_end - now)
  end
  return reply(true, math.max(0, limit - used), 0, reset)
end
if taking then
  return window_take(key, used, limit, period_start, period_end, reset)
end
if used + cost > limit then
  return reply(false, math.max(0, limit - used), period_end - now, period_end - now)
end
if peeking then
  return reply(true, math.max(0, limit - used), 0, reset)
end
redis.call('HSET', key, 'x', fmt(period_end), 's', fmt(period_start), 'u', fmt(used + cost))
expire_in(key, period_end)
return reply(true, math.max(0, limit - (used + cost)), 0, period_end - now)
