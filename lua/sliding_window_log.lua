-- sliding_window_log: exact sliding window; every admitted request is an entry (time, cost) and
-- leaves the window `window` ms later.
-- Port of slidingLog (src/counters/emulator/sliding-window-log.ts): change both together.
--
-- KEYS[1]  entry log, sorted set: member "<seq, 16 digits>:<cost>" (a region's with shares:
--          "<seq>:<cost>:<region>:<own>", include "shares_log"), score = time of the entry (epoch
--          ms). Members are unique; equal times keep arrival order through the zero-padded seq.
-- KEYS[2]  log state hash (the `:sum` key): x = expire-at (newest entry + window), s = running sum of
--          the costs in the log, q = the last seq used; with shares, the regions' sums (include "shares_log")
-- ARGV[1]  now, epoch ms as a decimal string; '' = Redis TIME
-- ARGV[2]  operation: consume, peek or refund (include "mode"; this script takes no lease)
-- ARGV[3]  units: what a consume takes, a refund gives back (a peek ignores it)
-- ARGV[4]  limit
-- ARGV[5]  window_ms
-- ARGV[6]  region: a region's operation on a global budget with shares, its region (include "shares_log")
-- ARGV[7]  guarantee: with shares, the region's guarantee
-- ARGV[8]  common: with shares, the common share's size
-- Returns  {allowed 1/0, remaining, retry_after_ms, reset_after_ms[, shares]}; shares, with a region:
--          every region's units in the window after them (include "shares_log")

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
-- @include "shares_log"

local state = redis.call('HMGET', state_key, 'x', 's', 'q')
local sum = 0
local seq = 0
if state[1] and tonumber(state[1]) > now then
  sum = tonumber(state[2])
  seq = tonumber(state[3])
elseif peeking then
  -- Absent or stale: an empty log, which a peek's cost of 1 always fits and a check's fits within the
  -- limit (a larger one waits a whole window; a region's, also within its share). Nothing is deleted by
  -- a peek or a check.
  share_absent = true
  local room = share_room()
  if cost <= limit and cost <= room then
    return log_reply(true, math.max(0, limit), 0, 0, room)
  end
  return log_reply(false, math.max(0, limit), window_ms, 0, room)
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
    share_forget(batch[i])
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
  -- Units go back from the newest entries (the ones this context added last), whole entries first; a
  -- region's, from its own entries only, to the common share first.
  local left = refund
  local passed = 0
  while left > 0 and count - passed > 0 do
    local newest = redis.call('ZREVRANGE', log_key, passed, passed, 'WITHSCORES')
    local region, own = entry_share(newest[1])
    if log_region and region ~= log_region then
      passed = passed + 1
    else
      local taken = entry_cost(newest[1])
      redis.call('ZREM', log_key, newest[1])
      if taken > left then
        local seq_part = string.sub(newest[1], 1, string.find(newest[1], ':', 1, true))
        local member = seq_part .. fmt(taken - left)
        if region then
          local kept_own = own - (left - math.min(left, taken - own))
          share_add(region, kept_own - own, -left)
          member = member .. ':' .. region .. ':' .. fmt(kept_own)
        end
        redis.call('ZADD', log_key, newest[2], member)
        sum = sum - left
        left = 0
      else
        share_forget(newest[1])
        sum = sum - taken
        left = left - taken
        count = count - 1
      end
    end
  end
  if count == 0 then
    redis.call('DEL', log_key, state_key)
    share_cleared()
    return log_reply(true, math.max(0, limit), 0, 0, share_room())
  end
  local expire_at = tonumber(redis.call('ZRANGE', log_key, -1, -1, 'WITHSCORES')[2]) + window_ms
  redis.call('HSET', state_key, 'x', fmt(expire_at), 's', fmt(sum), 'q', fmt(seq))
  expire_in(log_key, expire_at)
  expire_in(state_key, expire_at)
  return log_reply(true, math.max(0, limit - sum), 0, expire_at - now, share_room())
end
-- What the region may take (math.huge without a region).
local room = share_room()
if sum + cost > limit or cost > room then
  local newest_ts = now
  local reset = 0
  if count > 0 then
    newest_ts = tonumber(redis.call('ZRANGE', log_key, -1, -1, 'WITHSCORES')[2])
    reset = newest_ts + window_ms - now
  end
  -- Wait until enough of the oldest entries have left the window for this cost to fit (a region's: in
  -- its share too); read from the oldest only as far as needed.
  local retry = newest_ts + window_ms - now
  local freed, freed_own, freed_common = 0, 0, 0
  local own_use, common_use = 0, 0
  if log_region then
    own_use, common_use = share_use()
  end
  local start = first
  local found = false
  while not found and start < first + count do
    local batch = redis.call('ZRANGE', log_key, start, start + BATCH - 1, 'WITHSCORES')
    for i = 1, #batch, 2 do
      local entry = entry_cost(batch[i])
      local region, own = entry_share(batch[i])
      freed = freed + entry
      if region then
        freed_common = freed_common + (entry - own)
        if region == log_region then
          freed_own = freed_own + own
        end
      end
      if sum - freed + cost <= limit and (not log_region or cost <= share_room_of(own_use - freed_own, common_use - freed_common)) then
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
  return log_reply(false, math.max(0, limit - sum), retry, reset, room)
end
if peeking then
  local reset = 0
  if count > 0 then
    reset = tonumber(redis.call('ZRANGE', log_key, -1, -1, 'WITHSCORES')[2]) + window_ms - now
  end
  return log_reply(true, math.max(0, limit - sum), 0, reset, room)
end

seq = seq + 1
local member = string.format('%016d', seq) .. ':' .. fmt(cost)
if log_region then
  -- From the region's guarantee first, the rest from the common share.
  local own = math.min(cost, math.max(0, log_own - share_use()))
  share_add(log_region, own, cost)
  member = member .. ':' .. log_region .. ':' .. fmt(own)
end
redis.call('ZADD', log_key, fmt(now), member)
sum = sum + cost
local newest = tonumber(redis.call('ZRANGE', log_key, -1, -1, 'WITHSCORES')[2])
local expire_at = newest + window_ms
redis.call('HSET', state_key, 'x', fmt(expire_at), 's', fmt(sum), 'q', fmt(seq))
expire_in(log_key, expire_at)
expire_in(state_key, expire_at)
return log_reply(true, math.max(0, limit - sum), 0, expire_at - now, room - cost)
