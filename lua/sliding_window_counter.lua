-- sliding_window_counter: the window is cut into sub_windows buckets; the estimate counts the buckets
-- inside the window fully and the bucket sliding out of it in proportion to the part still covered.
-- Port of slidingCounter (src/counters/emulator/sliding-window-counter.ts): change both together.
--
-- KEYS[1]  counter hash: one field per bucket, "<bucket index>" = units counted in it (index =
--          bucket start / bucket ms), plus x = expire-at (epoch ms)
-- KEYS[2]  a take, give or reclaim with an id: the counter's take ledger (include "lease")
-- KEYS[3]  a region's take, give or reclaim of a global budget with shares: the share ledger, per
--          sub-window (include "shares_sliding")
-- ARGV[1]  now, epoch ms as a decimal string; '' = Redis TIME
-- ARGV[2]  operation: consume, peek, refund; take, give, reclaim (include "mode")
-- ARGV[3]  units: what a consume takes, a refund gives back (a peek ignores it)
-- ARGV[4]  limit
-- ARGV[5]  window_ms
-- ARGV[6]  sub_windows: the sub-window count (1 = weighted previous window)
--          then, with shares, the region's share (include "shares")
--          then a lease operation's own arguments (include "lease")
-- Returns  {allowed 1/0, remaining, retry_after_ms, reset_after_ms}; lease operations add {units, window_tag,
--          window_left_ms, store_now, outcome, lapsed[, shares]} (include "lease")

-- @include "time"
-- @include "number"
-- @include "mode"
-- Units belong to the window of their tag (include "lease").
local lease_shape = 'window'
-- @include "lease"

local key = KEYS[1]
local limit = tonumber(ARGV[4])
local window_ms = tonumber(ARGV[5])
local sub_windows = tonumber(ARGV[6])

local bucket_ms = window_ms / sub_windows
local current = (now - math.fmod(now, bucket_ms)) / bucket_ms
local elapsed = now - current * bucket_ms
if share_region then
  share_slide_at(current, sub_windows, bucket_ms, elapsed)
end

local flat = redis.call('HGETALL', key)
for i = 1, #flat, 2 do
  if flat[i] == 'x' then
    if tonumber(flat[i + 1]) <= now then
      -- Stale as a whole: absent, and deleted as the emulator's get() deletes it (not by a peek).
      if not peeking then
        redis.call('DEL', key)
      end
      flat = {}
    end
    break
  end
end

local full = 0
local oldest = 0
local newest = -1
local counts = {}
local stale = {}
-- The buckets in the window, in stored (insertion) order: a refund walks them.
local live = {}
for i = 1, #flat, 2 do
  local field = flat[i]
  if field ~= 'x' then
    local index = tonumber(field)
    local count = tonumber(flat[i + 1])
    if index < current - sub_windows then
      stale[#stale + 1] = field
    else
      if index == current - sub_windows then
        oldest = count
      else
        full = full + count
      end
      if index > newest then
        newest = index
      end
      counts[field] = count
      live[#live + 1] = index
    end
  end
end
-- The emulator drops stale buckets from the stored state whether or not the request is admitted.
if not peeking then
  for i = 1, #stale, 500 do
    redis.call('HDEL', key, unpack(stale, i, math.min(i + 499, #stale)))
  end
end

if giving then
  if give_tag ~= current then
    -- The units' sub-window has ended: they lapsed, and nothing goes back.
    local reset = 0
    if newest >= 0 then
      reset = (newest + sub_windows + 1) * bucket_ms - now
    end
    return lease_reply(true, math.max(0, math.floor(limit - (full + (oldest * (bucket_ms - elapsed)) / bucket_ms))), 0, reset, 0, current, bucket_ms - elapsed)
  end
  -- They go back to the sub-window they were taken in, and to no other.
  refund = math.min(refund, counts[fmt(current)] or 0)
end
if refunding then
  -- Units go back from the newest bucket first; an emptied bucket is removed.
  table.sort(live, function(a, b) return a > b end)
  local left = refund
  for i = 1, #live do
    if left <= 0 then
      break
    end
    local field = fmt(live[i])
    local taken = math.min(counts[field], left)
    counts[field] = counts[field] - taken
    left = left - taken
    if counts[field] == 0 then
      redis.call('HDEL', key, field)
    else
      redis.call('HSET', key, field, fmt(counts[field]))
    end
  end
  full = 0
  oldest = 0
  newest = -1
  for i = 1, #live do
    local count = counts[fmt(live[i])]
    if count > 0 then
      if live[i] == current - sub_windows then
        oldest = count
      else
        full = full + count
      end
      if live[i] > newest then
        newest = live[i]
      end
    end
  end
  local reset = 0
  if newest >= 0 then
    reset = (newest + sub_windows + 1) * bucket_ms - now
  end
  local remaining = math.max(0, math.floor(limit - (full + (oldest * (bucket_ms - elapsed)) / bucket_ms)))
  if giving then
    return lease_reply(true, remaining, 0, reset, refund, current, bucket_ms - elapsed)
  end
  return reply(true, remaining, 0, reset)
end

local estimate = full + (oldest * (bucket_ms - elapsed)) / bucket_ms
-- A take is granted what fits now; the rest is refused as a consume of `cost` would be, and a take
-- granted all of it answers the retry_after of one more unit (0 while one more fits).
-- A region's take of a global budget with shares gets at most what its share leaves it (include "shares").
local wanted = cost
if taking and share_region then
  cost = share_cap(current, cost)
end
local granted = cost
if taking then
  granted = math.max(0, math.min(cost, math.floor(limit - estimate)))
end
local retry_for = cost
if taking and granted == cost then
  retry_for = cost + 1
end
local retry = 0
if estimate + retry_for > limit then
  retry = bucket_ms - elapsed
  if full + retry_for <= limit and oldest > 0 then
    retry = math.ceil(bucket_ms - ((limit - retry_for - full) * bucket_ms) / oldest) - elapsed
    if retry < 1 then
      retry = 1
    end
  end
end
if cost < wanted then
  -- Capped by its share: refused the rest until the sub-window ends.
  retry = bucket_ms - elapsed
end
if granted == 0 or (not taking and estimate + cost > limit) then
  local reset = 0
  if newest >= 0 then
    reset = (newest + sub_windows + 1) * bucket_ms - now
  end
  if taking then
    return lease_reply(false, math.max(0, math.floor(limit - estimate)), retry, reset, 0, current, bucket_ms - elapsed)
  end
  return reply(false, math.max(0, math.floor(limit - estimate)), retry, reset)
end
if peeking then
  local reset = 0
  if newest >= 0 then
    reset = (newest + sub_windows + 1) * bucket_ms - now
  end
  return reply(true, math.max(0, math.floor(limit - estimate)), 0, reset)
end
local field = fmt(current)
local reset_at = (current + sub_windows + 1) * bucket_ms
redis.call('HSET', key, field, fmt((counts[field] or 0) + granted), 'x', fmt(reset_at))
expire_in(key, reset_at)
if taking then
  return lease_reply(true, math.max(0, math.floor(limit - (estimate + granted))), retry, reset_at - now, granted, current, bucket_ms - elapsed)
end
return reply(true, math.max(0, math.floor(limit - (estimate + cost))), 0, reset_at - now)
