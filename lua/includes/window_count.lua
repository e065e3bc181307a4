-- include "window_count": every operation (include "mode") of the algorithms that count `used` of
-- `limit` units in one window stored as {x = window end, s = window start, u = used}: fixed_window and
-- quota, which differ only in where their window starts. Needs the "time", "number", "mode", "lease"
-- and "slot" includes.
-- Port of fixedWindow, quota and windowTake (src/counters/emulator/fixed-window.ts, quota.ts,
-- window-count.ts): change them together.

-- The partial take: min(cost, what is left), possibly nothing; what it cannot take is refused until
-- the window ends, and a take that leaves nothing answers that too (when one more unit may be taken).
local function window_take(key, used, limit, window_start, window_end, reset)
  -- A region's take of a global budget with shares gets at most what its share leaves it (include "shares").
  local asked = cost
  if share_region then
    cost = share_cap(window_start, cost)
  end
  local granted = math.max(0, math.min(cost, limit - used))
  local retry = 0
  if granted < asked or used + granted >= limit then
    retry = window_end - now
  end
  if granted > 0 then
    used = used + granted
    redis.call('HSET', key, 'x', fmt(window_end), 's', fmt(window_start), 'u', fmt(used))
    expire_in(key, window_end)
    reset = window_end - now
  end
  return lease_reply(granted > 0, math.max(0, limit - used), retry, reset, granted, window_start, window_end - now)
end

-- The operation on the window [window_start, window_end) of `key`, which has `used` units counted.
local function count_in_window(key, limit, window_start, window_end, used)
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
end
