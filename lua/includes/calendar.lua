-- include "calendar": fixed_window and quota counted in calendar periods (algorithm.calendar), whose
-- window ms (ARGV[5]) is 0. The server computes the periods from the time-zone database and passes
-- a pair of them after the script's parameters, ARGV[6..8]: the current period's start, the next
-- one's start, the next one's end (epoch ms). This script's clock (`now`) picks the period between
-- them, so the store's clock decides which period a request is in. A clock outside both periods is
-- an error, never a guess. Needs "time", "number", "mode", "lease", "slot" and "window_count".
-- Port of calendarWindow and pickPeriod (src/counters/emulator/calendar-window.ts,
-- src/util/calendar-period.ts): change them together.

local function count_in_calendar_period(key, limit)
  local first, second, last = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
  if not (first and second and last) then
    return redis.error_reply('ERR rl: a calendar period needs its pair as ARGV[6..8], got ' .. tostring(ARGV[6]) .. ' ' .. tostring(ARGV[7]) .. ' ' .. tostring(ARGV[8]))
  end
  local window_start, window_end
  if now >= first and now < second then
    window_start, window_end = first, second
  elseif now >= second and now < last then
    window_start, window_end = second, last
  else
    return redis.error_reply('ERR rl: the store clock ' .. fmt(now) .. ' is outside the calendar periods passed [' .. fmt(first) .. ', ' .. fmt(last) .. ')')
  end
  local stored = load_slot(key, 's', 'u')
  local used = 0
  if stored and tonumber(stored[2]) == window_start then
    used = tonumber(stored[3])
  end
  return count_in_window(key, limit, window_start, window_end, used)
end
