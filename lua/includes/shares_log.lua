-- include "shares_log": weighted regional shares over a sliding log (sliding_window_log), which takes no
-- lease: a region's consume, peek and refund of a global budget with shares name the region
-- (docs/distribution.md "Weighted regional shares"). Needs "time", "number" and "mode", and the script's
-- state_key and log_key.
--
-- ARGV[6], ARGV[7] and ARGV[8], when given: the region's name, its guarantee and the common share's size.
-- Each entry of such a region is "<seq>:<cost>:<region>:<own>", `own` of its cost from the region's
-- guarantee and the rest from the common share, so the region's use of the window is exact. The log's
-- state hash keeps the sums of the entries in the log: c (from the common share, every region's),
-- g:<region> and o:<region> (its guarantee's, its common units); a region with none has no fields.
--   consume  admitted only when its cost fits what is left of the region's guarantee plus what is left
--            of the common share (and, as always, the limit); it takes from the guarantee first
--   refund   takes back the region's own newest entries only, to the common share first
--   answers  `remaining` at most what the region may take; a refusal's retry_after waits until enough
--            entries left the window for both; the fifth reply: every region's units in the window,
--            "<region>=<units>" by name, comma-separated
-- An entry of no region (an operation without one) counts in the limit only.
-- Port of src/counters/shares-log.ts: change both together.

local log_region = nil
local log_own = 0
local log_common = 0
if #ARGV >= 8 then
  log_region = ARGV[6]
  log_own = tonumber(ARGV[7])
  log_common = tonumber(ARGV[8])
  if log_region == '' or not log_own or not log_common then
    return redis.error_reply('ERR rl: a share needs its region, guarantee and common share as ARGV[6..8], got ' .. tostring(ARGV[6]) .. ' ' .. tostring(ARGV[7]) .. ' ' .. tostring(ARGV[8]))
  end
end

local function entry_cost(member)
  return tonumber(string.match(member, '^[^:]+:([^:]+)'))
end

-- An entry's region and the units of its guarantee; nil and 0 for an entry of no region.
local function entry_share(member)
  local region, own = string.match(member, '^[^:]+:[^:]+:([^:]+):([^:]+)$')
  if region then
    return region, tonumber(own)
  end
  return nil, 0
end

-- A peek of a stale state, which it leaves as it is: its sums count nothing.
local share_absent = false

-- What this run changed of the sums, not yet written: per region {g, o} (names in order of change), and c.
local share_changes = { regions = {}, names = {}, common = 0 }

-- `units` of `region`, `own` of them its guarantee's, join the log (negative: leave it).
local function share_add(region, own, units)
  local change = share_changes.regions[region]
  if not change then
    change = { g = 0, o = 0 }
    share_changes.regions[region] = change
    share_changes.names[#share_changes.names + 1] = region
  end
  change.g = change.g + own
  change.o = change.o + (units - own)
  share_changes.common = share_changes.common + (units - own)
end

-- An entry leaving the log (expired, refunded): its region's sums go down.
local function share_forget(member)
  local region, own = entry_share(member)
  if region then
    share_add(region, -own, -entry_cost(member))
  end
end

-- The region's guaranteed use and the common share's use, as this run stands.
local function share_use()
  if share_absent then
    return 0, 0
  end
  local v = redis.call('HMGET', state_key, 'g:' .. log_region, 'c')
  local change = share_changes.regions[log_region]
  return (tonumber(v[1]) or 0) + (change and change.g or 0), (tonumber(v[2]) or 0) + share_changes.common
end

-- What the region may take of a use of `own` units of its guarantee and `common` of the common share.
local function share_room_of(own, common)
  return math.max(0, log_own - own) + math.max(0, log_common - common)
end

-- What the region may take now (math.huge without a region).
local function share_room()
  if not log_region then
    return math.huge
  end
  return share_room_of(share_use())
end

-- Every region's units in the log, as this run stands ("<region>=<units>,..." by name).
local function share_report()
  if share_absent then
    return ''
  end
  local flat = redis.call('HGETALL', state_key)
  local taken, names = {}, {}
  for i = 1, #flat, 2 do
    local name = string.match(flat[i], '^[go]:(.+)$')
    if name then
      if not taken[name] then
        taken[name] = 0
        names[#names + 1] = name
      end
      taken[name] = taken[name] + tonumber(flat[i + 1])
    end
  end
  for i = 1, #share_changes.names do
    local name = share_changes.names[i]
    local change = share_changes.regions[name]
    if not taken[name] then
      taken[name] = 0
      names[#names + 1] = name
    end
    taken[name] = taken[name] + change.g + change.o
  end
  table.sort(names)
  local parts = {}
  for i = 1, #names do
    if taken[names[i]] > 0 then
      parts[#parts + 1] = names[i] .. '=' .. fmt(taken[names[i]])
    end
  end
  return table.concat(parts, ',')
end

-- The state deleted (an emptied log): nothing of this run's changes is left to write.
local function share_cleared()
  share_changes = { regions = {}, names = {}, common = 0 }
end

-- Writes this run's changes of the sums (a region left with none loses its fields).
local function share_flush()
  if #share_changes.names == 0 and share_changes.common == 0 then
    return
  end
  for i = 1, #share_changes.names do
    local name = share_changes.names[i]
    local change = share_changes.regions[name]
    local v = redis.call('HMGET', state_key, 'g:' .. name, 'o:' .. name)
    local g, o = (tonumber(v[1]) or 0) + change.g, (tonumber(v[2]) or 0) + change.o
    if g == 0 and o == 0 then
      redis.call('HDEL', state_key, 'g:' .. name, 'o:' .. name)
    else
      redis.call('HSET', state_key, 'g:' .. name, fmt(g), 'o:' .. name, fmt(o))
    end
  end
  local c = (tonumber(redis.call('HGET', state_key, 'c')) or 0) + share_changes.common
  redis.call('HSET', state_key, 'c', fmt(c))
  share_changes = { regions = {}, names = {}, common = 0 }
end

-- The script's answer: with a region, `remaining` at most `room` and every region's units after it;
-- what changed of the sums is written unless `peeking`.
local function log_reply(allowed, remaining, retry_after, reset_after, room)
  if not log_region then
    if not peeking then
      share_flush()
    end
    return reply(allowed, remaining, retry_after, reset_after)
  end
  local r = reply(allowed, math.max(0, math.min(remaining, room)), retry_after, reset_after)
  r[5] = share_report()
  if not peeking then
    share_flush()
  end
  return r
end
