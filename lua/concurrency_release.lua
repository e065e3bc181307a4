-- concurrency_release: returns the slot of a slot id; releasing an unknown slot changes nothing.
-- Port of releaseNow (src/counters/emulator/concurrency.ts): change both together.
--
-- KEYS[1]  slot set, sorted set: member = slot id, score = when that slot expires (epoch ms)
-- ARGV[1]  now, epoch ms as a decimal string; '' = Redis TIME
-- ARGV[2]  slot_id
-- ARGV[3]  max_concurrency: the most slots held at once
-- ARGV[4]  lease_ttl_ms (unused; the same parameters as acquire)
-- Returns  {removed 1/0 (the slot was held), remaining slots, retry_after_ms (always 0), reset_after_ms (until no slot
--          is held)}

-- @include "time"
-- @include "number"

local key = KEYS[1]
local slot_id = ARGV[2]
local max = tonumber(ARGV[3])

redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now))
local removed = redis.call('ZREM', key, slot_id) == 1
local size = redis.call('ZCARD', key)
local reset = 0
if size > 0 then
  local latest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
  expire_in(key, latest)
  reset = latest - now
end
return reply(removed, math.max(0, max - size), 0, reset)
