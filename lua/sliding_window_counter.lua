-- sliding_window_counter: the window is cut into sub_windows buckets; the estimate counts the buckets
-- inside the window fully and the bucket sliding out of it in proportion to the part still covered.
-- Port of MemoryCounterStore.slidingCounter (src/counters/memory-store.ts): change both together.
--
-- KEYS[1]  counter hash: one field per bucket, "<bucket index>" = units counted in it (index =
--          bucket start / bucket ms), plus x = expire-at (epoch ms)
-- ARGV[1]  now, epoch ms as a decimal string; '' = Redis TIME
-- ARGV[2]  cost (units this request takes)
-- ARGV[3]  limit
-- ARGV[4]  window ms
-- ARGV[5]  sub-window count (1 = weighted previous window)
-- Returns  {allowed 1/0, remaining, retry_after_ms, reset_after_ms}
--
-- The emulator sums the buckets in insertion order; so does this (HGETALL of a listpack-encoded hash
-- is in insertion order, and a policy has at most 60 sub-windows, far below the listpack limit). The
-- order matters only for non-integer costs, which validation does not produce.

-- @include "time"
-- @include "number"

local key = KEYS[1]
local cost = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local window_ms = tonumber(ARGV[4])
local sub_windows = tonumber(ARGV[5])

local bucket_ms = window_ms / sub_windows
local current = (now - math.fmod(now, bucket_ms)) / bucket_ms
local elapsed = now - current * bucket_ms

local flat = redis.call('HGETALL', key)
for i = 1, #flat, 2 do
  if flat[i] == 'x' then
    if tonumber(flat[i + 1]) <= now then
      -- Stale as a whole: absent, and deleted as the emulator's get() deletes it.
      redis.call('DEL', key)
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
    end
  end
end
-- The emulator drops stale buckets from the stored state whether or not the request is admitted.
for i = 1, #stale, 500 do
  redis.call('HDEL', key, unpack(stale, i, math.min(i + 499, #stale)))
end

local estimate = full + (oldest * (bucket_ms - elapsed)) / bucket_ms
if estimate + cost > limit then
  local retry = bucket_ms - elapsed
  if full + cost <= limit and oldest > 0 then
    retry = math.ceil(bucket_ms - ((limit - cost - full) * bucket_ms) / oldest) - elapsed
    if retry < 1 then
      retry = 1
    end
  end
  local reset = 0
  if newest >= 0 then
    reset = (newest + sub_windows + 1) * bucket_ms - now
  end
  return reply(false, math.max(0, math.floor(limit - estimate)), retry, reset)
end
local field = fmt(current)
local reset_at = (current + sub_windows + 1) * bucket_ms
redis.call('HSET', key, field, fmt((counts[field] or 0) + cost), 'x', fmt(reset_at))
expire_in(key, reset_at)
return reply(true, math.max(0, math.floor(limit - (estimate + cost))), 0, reset_at - now)
