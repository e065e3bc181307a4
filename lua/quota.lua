-- quota: a budget of `limit` units per period; the period starts with the first consumption.
-- Port of quota (src/counters/emulator/quota.ts): change both together.
--
-- KEYS[1]  counter hash: x = expire-at (period end), s = period start, u = units used (epoch ms)
-- KEYS[2]  a take, give or reclaim with an id: the counter's take ledger (include "lease")
-- KEYS[3]  a region's take, give or reclaim of a global budget with shares: the share ledger (include "shares")
-- ARGV[1]  now, epoch ms as a decimal string; '' = Redis TIME
-- ARGV[2]  operation: consume, peek, refund; take, give, reclaim (include "mode")
-- ARGV[3]  units: what a consume takes, a refund gives back (a peek ignores it)
-- ARGV[4]  limit (the budget)
-- ARGV[5]  period_ms; 0 = calendar periods (include "calendar")
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
local period_ms = tonumber(ARGV[5])

if period_ms == 0 then
  return count_in_calendar_period(key, limit)
end

-- The period starts with the first consumption and lasts period_ms.
local stored = load_slot(key, 's', 'u')
local period_start = now
local used = 0
if stored and now < tonumber(stored[2]) + period_ms then
  period_start = tonumber(stored[2])
  used = tonumber(stored[3])
end
return count_in_window(key, limit, period_start, period_start + period_ms, used)
