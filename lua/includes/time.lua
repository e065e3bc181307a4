-- include "time": the clock of one script run and the expiry of the keys it writes.
--
-- ARGV[1] is the current time in epoch milliseconds as a decimal string, or the empty string, which
-- means "read the Redis server clock" (production always passes ''; tests pass an explicit time).
-- Reading TIME in a script that writes is safe: Redis 7 replicates scripts by their effects.
local explicit_now = ARGV[1] ~= ''
local now
if explicit_now then
  now = tonumber(ARGV[1])
  if not now then
    return redis.error_reply('ERR rl: ARGV[1] (now) must be a number or empty, got ' .. ARGV[1])
  end
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Every key gets a PEXPIRE of (expire_at - now) ms, at least 1: the moment the emulator
-- (src/counters/emulator/keyspace.ts) would drop the same state. The scripts treat stale state exactly
-- like absent state, so expiry only reclaims memory and never changes a result.
--
-- With an explicit (test) time, Redis still expires keys by its own real clock, and that clock can
-- run ahead of the test's simulated clock (a test that sits at one simulated instant while real time
-- passes, say). A key could then vanish while the emulator still holds the state, and the two would
-- disagree. So with an explicit time every PEXPIRE gets a fixed pad: the key lives on for a while after
-- its state went stale, which costs nothing but memory, and only in tests.
local EXPIRE_PAD_MS = 60000

local function expire_in(key, expire_at)
  local ttl = math.ceil(expire_at - now)
  if ttl < 1 then ttl = 1 end
  if explicit_now then ttl = ttl + EXPIRE_PAD_MS end
  -- A number passed to redis.call is formatted with 14 significant digits; format it ourselves.
  redis.call('PEXPIRE', key, string.format('%d', ttl))
end
