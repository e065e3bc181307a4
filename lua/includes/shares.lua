-- include "shares": a global budget's weighted regional shares (docs/distribution.md "Weighted regional
-- shares"), kept beside the global counter so that no region has to be trusted with them. Needs "time",
-- "number" and "mode"; included by "lease", whose lease_reply counts and answers with them.
--
-- A take, give or reclaim with KEYS[3], the counter's share ledger (src/counters/keys.ts sharesKey),
-- names its region: ARGV[#ARGV-5], ARGV[#ARGV-4] and ARGV[#ARGV-3] are the region's name, its
-- guarantee (units of each window) and the common share's size, just before the lease operation's own
-- three arguments (include "lease").
--   take  gets at most what is left of its region's guarantee plus what is left of the common share
--         (and, as always, of the counter); taking all of that, it answers the window's end as its
--         retry_after, and `remaining` is at most what the region may still take
--   give  (and a reclaim's give) goes back to the common share first, then to the region's guarantee
-- A fixed window's or quota's ledger counts one window (quota period): t = its tag, x = its end (epoch
-- ms), c = units taken from the common share, and per region g:<region> (units of its guarantee) and
-- o:<region> (units of the common share). A ledger of another window, or past its end, counts nothing,
-- and is replaced. A sliding window's ledger counts per sub-window (include "shares_sliding").
-- Port of src/counters/shares.ts: change both together.

local share_key = KEYS[3]
local share_region = nil
local share_own = 0
local share_common = 0
-- What the region could take before this take (set by share_cap).
local share_room = nil
if share_key and (taking or giving or operation == 'reclaim') then
  local first = #ARGV - 5
  share_region = ARGV[first]
  share_own = tonumber(ARGV[first + 1])
  share_common = tonumber(ARGV[first + 2])
  if share_region == '' or not share_own or not share_common then
    return redis.error_reply('ERR rl: a share needs its region, guarantee and common share before the lease arguments, got ' .. tostring(ARGV[first]) .. ' ' .. tostring(ARGV[first + 1]) .. ' ' .. tostring(ARGV[first + 2]))
  end
end
-- A sliding window's ledger (sliding_window_counter calls share_slide_at first); the functions below hand over to it.
-- @include "shares_sliding"

-- Defined only for a region's lease operation with a share, as shares_sliding's: every other call of
-- the script is spared making them.
local share_counts, share_cap, share_count, share_report, share_answer
if share_region then
  -- {common taken, the region's own units, its common units} in window `tag` (0s for another window).
  function share_counts(tag)
    local v = redis.call('HMGET', share_key, 't', 'c', 'g:' .. share_region, 'o:' .. share_region, 'x')
    if tonumber(v[1]) ~= tag or not v[5] or tonumber(v[5]) <= now then
      return 0, 0, 0, false
    end
    return tonumber(v[2]) or 0, tonumber(v[3]) or 0, tonumber(v[4]) or 0, true
  end

  -- A take of `cost` in window `tag`: what the region may get of it.
  function share_cap(tag, want)
    if slide then
      return slide_cap(want)
    end
    local c, g = share_counts(tag)
    share_room = math.max(0, share_own - g) + math.max(0, share_common - c)
    return math.min(want, share_room)
  end

  -- Counts `units` taken (a give: `-units`) by the region in window `tag`, which ends at `window_end`.
  function share_count(tag, units, window_end)
    if slide then
      return slide_count(units)
    end
    if units == 0 then
      return
    end
    local c, g, o, current = share_counts(tag)
    if not current then
      redis.call('DEL', share_key)
    end
    if units > 0 then
      local own = math.min(units, math.max(0, share_own - g))
      g = g + own
      o = o + (units - own)
      c = c + (units - own)
    else
      local back = -units
      local common = math.min(back, o)
      o = o - common
      c = c - common
      g = math.max(0, g - (back - common))
    end
    redis.call('HSET', share_key, 't', fmt(tag), 'x', fmt(window_end), 'c', fmt(c), 'g:' .. share_region, fmt(g), 'o:' .. share_region, fmt(o))
    expire_in(share_key, window_end)
  end

  -- Every region's units of window `tag`, "<region>=<units>" by name, comma-separated ('' for none).
  function share_report(tag)
    if slide then
      return slide_report()
    end
    local flat = redis.call('HGETALL', share_key)
    local taken = {}
    local names = {}
    local is_tag, live = false, false
    for i = 1, #flat, 2 do
      if flat[i] == 't' then
        is_tag = tonumber(flat[i + 1]) == tag
      elseif flat[i] == 'x' then
        live = tonumber(flat[i + 1]) > now
      end
      local kind, name = string.match(flat[i], '^([go]):(.+)$')
      if kind then
        if not taken[name] then
          taken[name] = 0
          names[#names + 1] = name
        end
        taken[name] = taken[name] + tonumber(flat[i + 1])
      end
    end
    if not (is_tag and live) then
      return ''
    end
    table.sort(names)
    local parts = {}
    for i = 1, #names do
      parts[i] = names[i] .. '=' .. fmt(taken[names[i]])
    end
    return table.concat(parts, ',')
  end

  -- The share's part of a lease operation's answer (lease_reply's): done, the units are counted, and a
  -- take's `remaining` and retry_after are bounded by what the region may still take. Returns those two
  -- and the report of the window (share_report).
  function share_answer(done, units, tag, window_left, remaining, retry_after)
    if done and taking then
      share_count(tag, units, now + window_left)
      local room = (share_room or 0) - units
      remaining = math.min(remaining, math.max(0, room))
      if room < 1 then
        retry_after = window_left
      end
    elseif done and giving then
      share_count(tag, -units, now + window_left)
    end
    return remaining, retry_after, share_report(tag)
  end
end
