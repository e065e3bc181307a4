-- concurrency_acquire: takes a slot for a slot id, or refreshes the slot when that id already
-- holds one (no second slot). Every slot expires lease_ttl ms after its last acquire.
-- Port of acquireNow (src/counters/emulator/concurrency.ts): change both together.
--
-- KEYS[1]  slot set, sorted set: member = slot id, score = when that slot expires (epoch ms). The
--          key expires with its latest slot, so the newest score is always its expire-at.
-- ARGV[1]  now, epoch ms as a decimal string; '' = Redis TIME
-- ARGV[2]  slot_id
-- ARGV[3]  max_concurrency: the most slots held at once
-- ARGV[4]  lease_ttl_ms
-- ARGV[5]  check: optional, 'check' answers as the acquire would be answered now and writes nothing (the first
--          step of an all-or-nothing group: lua/batch.lua)
-- Returns  {allowed 1/0, remaining slots, retry_after_ms (until the oldest slot expires),
--          reset_after_ms (until no slot is held), new_slot 1/0 (admitted and the slot id held
--          none: a slot was taken; 0 when refused or only refreshed: a give-back must not release it)}

-- @include "time"
-- @include "number"

local key = KEYS[1]
local slot_id = ARGV[2]
local max = tonumber(ARGV[3])
local lease_ttl_ms = tonumber(ARGV[4])

local function acquire_reply(allowed, remaining, retry_after, reset_after, new_slot)
  local r = reply(allowed, remaining, retry_after, reset_after)
  r[5] = new_slot and 1 or 0
  return r
end

if ARGV[5] == 'check' then
  -- Only the slots still held count (score after now); the expired ones stay until a real acquire.
  local live_from = '(' .. fmt(now)
  local live = redis.call('ZCOUNT', key, live_from, '+inf')
  local score = redis.call('ZSCORE', key, slot_id)
  local latest = now
  if live > 0 then
    latest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
  end
  local held_live = score and tonumber(score) > now
  if held_live or live < max then
    return acquire_reply(true, math.max(0, max - live), 0, latest - now, not held_live)
  end
  local first = tonumber(redis.call('ZRANGEBYSCORE', key, live_from, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2])
  return acquire_reply(false, math.max(0, max - live), first - now, latest - now, false)
end

-- Slots whose time has come are gone, whatever happens next.
redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now))
local size = redis.call('ZCARD', key)
local held = redis.call('ZSCORE', key, slot_id)
if held or size < max then
  redis.call('ZADD', key, fmt(now + lease_ttl_ms), slot_id)
  if not held then
    size = size + 1
  end
  local latest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
  expire_in(key, latest)
  return acquire_reply(true, math.max(0, max - size), 0, latest - now, not held)
end
local oldest = math.huge
local latest = -math.huge
if size > 0 then
  oldest = tonumber(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2])
  latest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
end
return acquire_reply(false, math.max(0, max - size), oldest - now, latest - now, false)
