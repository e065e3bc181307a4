-- fixed_window: windows of `window` ms aligned to the epoch; a denied request takes nothing.
-- Port of MemoryCounterStore.fixedWindow (src/counters/memory-store.ts): change both together.
--
-- KEYS[1]  counter hash: x = expire-at (window end), s = window start, u = units used (epoch ms)
-- ARGV[1]  now, epoch ms as a decimal string; '' = Redis TIME
-- ARGV[2]  operation: consume, peek, refund; take, give (include "mode")
-- ARGV[3]  units: what a consume takes, a refund gives back (a peek ignores it)
-- ARGV[4]  limit
-- ARGV[5]  window ms
-- Returns  {allowed 1/0, remaining, retry_after_ms, reset_after_ms}; lease operations add
--          {units, window start, ms until the window ends} (include "mode")

-- @include "time"
-- @include "number"
-- @include "mode"
-- @include "slot"
-- @include "window_take"

local key = KEYS[1]
local limit = tonumber(ARGV[4])
local window_ms = tonumber(ARGV[5])

local window_start = now - math.fmod(now, window_ms)
local window_end = window_start + window_ms
local stored = load_slot(key, 's', 'u')
local used = 0
if stored and tonumber(stored[2]) == window_start then
  used = tonumber(stored[3])
end
local reset = 0
if used > 0 then
  reset = window_end - now
end
if giving and give_tag ~= window_start then
  -- The units' window has ended: they lapsed, and nothing goes back.
  return lease_reply(true, math.max(0, limit - used), 0, reset, 0, window_start, window_end - now)
end
if refunding then
  local before = used
  if used > 0 then
    used = math.max(0, used - refund)
    redis.call('HSET', key, 'u', fmt(used))
  end
  -- Refunded to zero usage, the window is whole again: reset 0, as a peek would then say.
  if used == 0 then
    reset = 0
  end
  if giving then
    return lease_reply(true, math.max(0, limit - used), 0, reset, before - used, window_start, window_end - now)
  end
  return reply(true, math.max(0, limit - used), 0, reset)
end
if taking then
  return window_take(key, used, limit, window_start, window_end, reset)
end
if used + cost > limit then
  return reply(false, math.max(0, limit - used), window_end - now, window_end - now)
end
if peeking then
  return reply(true, math.max(0, limit - used), 0, reset)
end
redis.call('HSET', key, 'x', fmt(window_end), 's', fmt(window_start), 'u', fmt(used + cost))
expire_in(key, window_end)
return reply(true, math.max(0, limit - (used + cost)), 0, window_end - now)
