-- concurrency_release: returns the lease of a lease id; releasing an unknown lease changes nothing.
-- Port of releaseNow (src/counters/emulator/concurrency.ts): change both together.
--
-- KEYS[1]  lease set, sorted set: member = lease id, score = when that lease expires (epoch ms)
-- ARGV[1]  now, epoch ms as a decimal string; '' = Redis TIME
-- ARGV[2]  lease_id
-- ARGV[3]  max_concurrency: the most leases held at once
-- ARGV[4]  lease_ttl_ms (unused; the same parameters as acquire)
-- Returns  {removed 1/0 (the lease was held), remaining slots, retry_after_ms (always 0), reset_after_ms (until no lease
--          is held)}

-- @include "time"
-- @include "number"

local key = KEYS[1]
local lease_id = ARGV[2]
local max = tonumber(ARGV[3])

redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now))
local removed = redis.call('ZREM', key, lease_id) == 1
local size = redis.call('ZCARD', key)
local reset = 0
if size > 0 then
  local latest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
  expire_in(key, latest)
  reset = latest - now
end
return reply(removed, math.max(0, max - size), 0, reset)
