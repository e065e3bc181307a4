-- include "mode": what a rate script is asked to do, read from ARGV[2], the signed cost.
--   > 0  consume that many units: admitted whole or not at all
--   = 0  peek: answered as a cost of 1 would be answered now, and nothing is written (not even the
--        removal of stale state, which no answer can observe)
--   < 0  refund: -ARGV[2] units go back to the current window, bucket or period, within its bounds
-- and the two operations of a capacity lease (src/lease), which answer with lease_reply (include "number"):
--   'take:<n>'        partial take: min(n, what the counter admits now) units, possibly 0; its retry_after
--                     is that of a consume of the rest when it took less, and of one more unit when it
--                     took all n (0 while the counter admits one more): how long the counter admits no more
--   'give:<n>:<tag>'  window-checked return: a refund of n units, made only while the window (quota
--                     period, sub-window) <tag> that a take answered is still the current one; the
--                     units of a window that has ended have lapsed and go nowhere. Buckets: a take's tag
--                     is the instant it ran (this clock), a give's tag the instant the units had to be
--                     back by (the taker adds its max_hold): a refund made only before then, since units
--                     back later would join the tokens the bucket refilled meanwhile (src/lease)
-- Port of the `mode` of MemoryCounterStore (src/counters/memory-store.ts): change both together.
local signed_cost = tonumber(ARGV[2])
local taking = false
local giving = false
local give_tag = nil
if not signed_cost then
  local take = string.match(ARGV[2], '^take:(%d+)$')
  local give, tag = string.match(ARGV[2], '^give:(%d+):(.+)$')
  if take then
    taking = true
    signed_cost = tonumber(take)
  elseif give and tonumber(tag) then
    giving = true
    signed_cost = -tonumber(give)
    give_tag = tonumber(tag)
  else
    return redis.error_reply('ERR rl: ARGV[2] (cost) must be a number, take:<n> or give:<n>:<tag>, got ' .. ARGV[2])
  end
end
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
