-- sliding_window_log: exact sliding window; every admitted request is an entry (time, cost) and
-- leaves the window `window` ms later.
-- Port of slidingLog (src/counters/emulator/sliding-window-log.ts): change both together.
--
-- KEYS[1]  entry log, sorted set: member "<seq, 16 digits>:<cost>", score = time of the entry (epoch
--          ms). Members are unique; equal times keep arrival order through the zero-padded seq.
-- KEYS[2]  log state hash (the `:sum` key): x = expire-at (newest entry + window), s = running sum of
--          the costs in the log, q = the last seq used
-- ARGV[1]  now, epoch ms as a decimal string; '' = Redis TIME
-- ARGV[2]  operation: consume, peek or refund (include "mode"; this script takes no lease)
-- ARGV[3]  units: what a consume takes, a refund gives back (a peek ignores it)
-- ARGV[4]  limit
-- ARGV[5]  window ms
-- Returns  {allowed 1/0, remaining, retry_after_ms, reset_after_ms}

-- @include "time"
-- @include "number"
-- @include "mode"
if taking or giving or operation == 'reclaim' then
  return redis.error_reply('ERR rl: sliding_window_log takes no capacity lease')
end

local log_key = KEYS[1]
local state_key = KEYS[2]
local limit = tonumber(ARGV[4])
local window_ms = tonumber(ARGV[5])
local BATCH = 256

local function entry_cost(member)
  return tonumber(string.sub(member, string.find(member, ':', 1, true) + 1))
end

local state = redis.call('HMGET', state_key, 'x', 's', 'q')
local sum = 0
local seq = 0
if state[1] and tonumber(state[1]) > now then
  sum = tonumber(state[2])
  seq = tonumber(state[3])
elseif peeking then
  -- Absent or stale: an empty log, which a peek's cost of 1 always fits and a check's fits within the
  -- limit (a larger one waits a whole window). Nothing is deleted by a peek or a check.
  if cost <= limit then
    return reply(true, math.max(0, limit), 0, 0)
  end
  return reply(false, math.max(0, limit), window_ms, 0)
else
  -- Absent or stale: an empty log (the emulator's get() deletes stale state; so does this).
  redis.call('DEL', log_key, state_key)
end

-- Entries leave the window when now - window reaches them; the emulator drops them from the stored
-- state whether or not this request is admitted, subtracting their costs oldest first. A peek only
-- skips them: `first` is then the rank of the oldest entry still in the window.
local cutoff = fmt(now - window_ms)
local expired = 0
while true do
  local offset = 0
  if peeking then
    offset = expired
  end
  local batch = redis.call('ZRANGEBYSCORE', log_key, '-inf', cutoff, 'LIMIT', offset, BATCH)
  for i = 1, #batch do
    sum = sum - entry_cost(batch[i])
  end
  if #batch > 0 then
    if not peeking then
      redis.call('ZREMRANGEBYRANK', log_key, 0, #batch - 1)
    end
    expired = expired + #batch
  end
  if #batch < BATCH then
    break
  end
end
local first = 0
if peeking then
  first = expired
end

local count = redis.call('ZCARD', log_key) - first
if refunding then
  -- Units go back from the newest entries (the ones this context added last), whole entries first.
  local left = refund
  while left > 0 and count > 0 do
    local newest = redis.call('ZRANGE', log_key, -1, -1, 'WITHSCORES')
    local taken = entry_cost(newest[1])
    redis.call('ZREM', log_key, newest[1])
    if taken > left then
      local seq_part = string.sub(newest[1], 1, string.find(newest[1], ':', 1, true))
      redis.call('ZADD', log_key, newest[2], seq_part .. fmt(taken - left))
      sum = sum - left
      left = 0
    else
      sum = sum - taken
      left = left - taken
      count = count - 1
    end
  end
  if count == 0 then
    redis.call('DEL', log_key, state_key)
    return reply(true, math.max(0, limit), 0, 0)
  end
  local expire_at = tonumber(redis.call('ZRANGE', log_key, -1, -1, 'WITHSCORES')[2]) + window_ms
  redis.call('HSET', state_key, 'x', fmt(expire_at), 's', fmt(sum), 'q', fmt(seq))
  expire_in(log_key, expire_at)
  expire_in(state_key, expire_at)
  return reply(true, math.max(0, limit - sum), 0, expire_at - now)
end
if sum + cost > limit then
  local newest_ts = now
  local reset = 0
  if count > 0 then
    newest_ts = tonumber(redis.call('ZRANGE', log_key, -1, -1, 'WITHSCORES')[2])
    reset = newest_ts + window_ms - now
  end
  -- Wait until enough of the oldest entries have left the window for this cost to fit; read from the
  -- oldest only as far as needed.
  local retry = newest_ts + window_ms - now
  local freed = 0
  local start = first
  local found = false
  while not found and start < first + count do
    local batch = redis.call('ZRANGE', log_key, start, start + BATCH - 1, 'WITHSCORES')
    for i = 1, #batch, 2 do
      freed = freed + entry_cost(batch[i])
      if sum - freed + cost <= limit then
        retry = tonumber(batch[i + 1]) + window_ms - now
        found = true
        break
      end
    end
    start = start + BATCH
  end
  if expired > 0 and not peeking then
    redis.call('HSET', state_key, 's', fmt(sum))
  end
  return reply(false, math.max(0, limit - sum), retry, reset)
end
if peeking then
  local reset = 0
  if count > 0 then
    reset = tonumber(redis.call('ZRANGE', log_key, -1, -1, 'WITHSCORES')[2]) + window_ms - now
  end
  return reply(true, math.max(0, limit - sum), 0, reset)
end

seq = seq + 1
redis.call('ZADD', log_key, fmt(now), string.format('%016d', seq) .. ':' .. fmt(cost))
sum = sum + cost
local newest = tonumber(redis.call('ZRANGE', log_key, -1, -1, 'WITHSCORES')[2])
local expire_at = newest + window_ms
redis.call('HSET', state_key, 'x', fmt(expire_at), 's', fmt(sum), 'q', fmt(seq))
expire_in(log_key, expire_at)
expire_in(state_key, expire_at)
return reply(true, math.max(0, limit - sum), 0, expire_at - now)
