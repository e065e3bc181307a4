-- include "window_take": the partial take (include "mode") of the algorithms that count `used` of
-- `limit` units in one window stored as {x = window end, s = window start, u = used}: fixed_window and
-- quota. Takes min(cost, what is left), possibly nothing; what it cannot take is refused until the
-- window ends, and a take that leaves nothing answers that too (when one more unit may be taken). Needs
-- the "time", "number" and "mode" includes.
-- Port of MemoryCounterStore.windowTake (src/counters/memory-store.ts): change both together.
local function window_take(key, used, limit, window_start, window_end, reset)
  local granted = math.max(0, math.min(cost, limit - used))
  local retry = 0
  if granted < cost or used + granted >= limit then
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
