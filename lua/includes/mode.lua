-- include "mode": what a rate script is asked to do, read from ARGV[2], the signed cost.
--   > 0  consume that many units: admitted whole or not at all
--   = 0  peek: answered as a cost of 1 would be answered now, and nothing is written (not even the
--        removal of stale state, which no answer can observe)
--   < 0  refund: -ARGV[2] units go back to the current window, bucket or period, within its bounds
-- Port of the `mode` of MemoryCounterStore (src/counters/memory-store.ts): change both together.
local signed_cost = tonumber(ARGV[2])
local peeking = signed_cost == 0
local refunding = signed_cost < 0
local cost = signed_cost
if peeking then
  cost = 1
end
local refund = 0
if refunding then
  refund = -signed_cost
end
