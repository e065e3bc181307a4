-- token_bucket: `capacity` tokens, refilled at rate_units per rate_period_ms; a request takes `cost`.
-- Port of tokenBucket (src/counters/emulator/token-bucket.ts): change both together.
--
-- KEYS[1]  bucket hash: x = settled-at (when it is full again; also its expire-at),
--          a = tokens at the last update, u = time of the last update (epoch ms)
-- KEYS[2]  a take, give or reclaim with an id: the counter's take ledger (include "lease")
-- KEYS[3]  never given: shares are for fixed_window and quota only (include "shares" reads it)
-- ARGV[1]  now, epoch ms as a decimal string; '' = Redis TIME
-- ARGV[2]  operation: consume, peek, refund; take, give, reclaim (include "mode")
-- ARGV[3]  units: the tokens a consume takes, a refund gives back (a peek ignores it)
-- ARGV[4]  capacity
-- ARGV[5]  rate_units (tokens added per rate period)
-- ARGV[6]  rate_period_ms
--          then a lease operation's own arguments (include "lease")
-- Returns  {allowed 1/0, remaining, retry_after_ms, reset_after_ms}; lease operations add {units, window_tag,
--          window_left_ms, store_now, outcome, lapsed[, shares]} (include "lease")

-- @include "time"
-- @include "number"
-- @include "mode"
-- Units go back only within their hold of the take (include "lease").
local lease_shape = 'bucket'
-- @include "lease"
-- @include "slot"

local key = KEYS[1]
local capacity = tonumber(ARGV[4])
local rate_units = tonumber(ARGV[5])
local rate_period_ms = tonumber(ARGV[6])

local stored = load_slot(key, 'a', 'u')
local tokens = capacity
local full_at = now
if stored then
  local settled_at = tonumber(stored[1])
  if now < settled_at then
    tokens = math.min(capacity, tonumber(stored[2]) + (math.max(0, now - tonumber(stored[3])) * rate_units) / rate_period_ms)
    full_at = settled_at
  end
end
if giving and now >= give_tag then
  -- A return that arrives after the instant it had to be back by: the units lapsed, and nothing goes back.
  return lease_reply(true, math.floor(tokens), 0, full_at - now, 0, 0, 0)
end
if refunding then
  -- What went back (a return answers it): never above capacity, so a full bucket takes nothing back.
  local room = capacity - tokens
  tokens = math.min(capacity, tokens + refund)
  local settled_at = now + math.ceil(((capacity - tokens) * rate_period_ms) / rate_units)
  if stored then
    redis.call('HSET', key, 'x', fmt(settled_at), 'a', fmt(tokens), 'u', fmt(now))
    expire_in(key, settled_at)
  end
  if giving then
    return lease_reply(true, math.floor(tokens), 0, settled_at - now, math.floor(math.min(refund, room)), 0, 0)
  end
  return reply(true, math.floor(tokens), 0, settled_at - now)
end
if taking then
  local granted = math.max(0, math.min(cost, math.floor(tokens)))
  -- The retry_after of the rest, or, all of it granted, of one more unit (0 while the bucket has one).
  local retry_for = cost + 1
  if granted < cost then
    retry_for = cost
  end
  local retry = 0
  if tokens < retry_for then
    retry = math.ceil(((retry_for - tokens) * rate_period_ms) / rate_units)
  end
  if granted > 0 then
    tokens = tokens - granted
    full_at = now + math.ceil(((capacity - tokens) * rate_period_ms) / rate_units)
    redis.call('HSET', key, 'x', fmt(full_at), 'a', fmt(tokens), 'u', fmt(now))
    expire_in(key, full_at)
  end
  return lease_reply(granted > 0, math.floor(tokens), retry, full_at - now, granted, 0, 0)
end
if peeking and tokens >= cost then
  return reply(true, math.floor(tokens), 0, full_at - now)
end
if tokens >= cost then
  tokens = tokens - cost
  local settled_at = now + math.ceil(((capacity - tokens) * rate_period_ms) / rate_units)
  redis.call('HSET', key, 'x', fmt(settled_at), 'a', fmt(tokens), 'u', fmt(now))
  expire_in(key, settled_at)
  return reply(true, math.floor(tokens), 0, settled_at - now)
end
local retry = math.ceil(((cost - tokens) * rate_period_ms) / rate_units)
return reply(false, math.floor(tokens), retry, full_at - now)
