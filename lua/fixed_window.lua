-- fixed_window: windows of `window` ms aligned to the epoch; a denied request takes nothing.
-- Port of fixedWindow (src/counters/emulator/fixed-window.ts): change both together.
--
-- KEYS[1]  counter hash: x = expire-at (window end), s = window start, u = units used (epoch ms)
-- KEYS[2]  a take, give or reclaim with an id: the counter's take ledger (include "lease")
-- KEYS[3]  a region's take, give or reclaim of a global budget with shares: the share ledger (include "shares")
-- ARGV[1]  now, epoch ms as a decimal string; '' = Redis TIME
-- ARGV[2]  operation: consume, peek, refund; take, give, reclaim (include "mode")
-- ARGV[3]  units: what a consume takes, a refund gives back (a peek ignores it)
-- ARGV[4]  limit
-- ARGV[5]  window_ms; 0 = calendar periods (include "calendar")
-- ARGV[6]  period_start: calendar periods only, the current period's start (epoch ms)
-- ARGV[7]  next_start: calendar periods only, the next period's start
-- ARGV[8]  next_end: calendar periods only, the next period's end
--          then a lease operation's own arguments (include "lease")
-- Returns  {allowed 1/0, remaining, retry_after_ms, reset_after_ms}; lease operations add {units, window_tag,
--          window_left_ms, store_now, outcome, lapsed[, shares]} (include "lease")

-- @include "time"
-- @include "number"
-- @include "mode"
-- Units belong to the window of their tag (include "lease").
local lease_shape = 'window'
-- @include "lease"
-- @include "slot"
-- @include "window_count"
-- @include "calendar"

local key = KEYS[1]
local limit = tonumber(ARGV[4])
local window_ms = tonumber(ARGV[5])

if window_ms == 0 then
  return count_in_calendar_period(key, limit)
end

local window_start = now - math.fmod(now, window_ms)
local stored = load_slot(key, 's', 'u')
local used = 0
if stored and tonumber(stored[2]) == window_start then
  used = tonumber(stored[3])
end
return count_in_window(key, limit, window_start, window_start + window_ms, used)
