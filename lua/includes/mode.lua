-- include "mode": what a rate script is asked to do. ARGV[2] names the operation and ARGV[3] is its
-- units, always a number:
--   consume  take ARGV[3] units: admitted whole or not at all
--   peek     answered as a consume of 1 would be answered now, and nothing is written (not even the
--            removal of stale state, which no answer can observe); ARGV[3] is ignored
--   check    answered as a consume of ARGV[3] would be answered now, and nothing is written, as a
--            peek (the first step of an all-or-nothing group: lua/batch.lua)
--   refund   ARGV[3] units go back to the current window, bucket or period, within its bounds
-- and the operations of a capacity lease (src/lease), which answer with lease_reply (include "lease",
-- which also reads their own arguments: they come last, after the script's parameters):
--   take     partial take: min(ARGV[3], what the counter admits now) units, possibly 0; its retry_after
--            is that of a consume of the rest when it took less, and of one more unit when it took
--            them all (0 while the counter admits one more): how long the counter admits no more
--   give     window-checked return of ARGV[3] units; its own arguments are its id, its deadline
--            (include "lease") and, last, ARGV[#ARGV], the tag: a refund made only while the window
--            (quota period, sub-window) <tag> that a take answered is still the current one; the
--            units of a window that has ended have lapsed and go nowhere. Buckets: the tag is
--            the instant (this clock) the units must be back by, the take's plus the taker's hold
--            (include "lease"): a refund made only before then, since units back later would join the
--            tokens the bucket refilled meanwhile (src/lease)
--   reclaim  settles a named take or give (include "lease"); ARGV[3] is ignored; its own arguments
--            are its id, its deadline and, last, its reclaimer ('' = none)
-- Port of AlgorithmCall.set in src/counters/emulator/mode.ts: change both together.
local operation = ARGV[2]
local units = tonumber(ARGV[3])
local checking = operation == 'check'
local peeking = operation == 'peek' or checking
local taking = operation == 'take'
local giving = operation == 'give'
local refunding = giving or operation == 'refund'
if not units or not (operation == 'consume' or peeking or refunding or taking or operation == 'reclaim') then
  return redis.error_reply('ERR rl: ARGV[2..3] must be an operation (consume, peek, check, refund, take, give, reclaim) and its units, got ' .. tostring(operation) .. ' ' .. tostring(ARGV[3]))
end
local cost = units
if peeking and not checking then
  cost = 1
end
local refund = 0
if refunding then
  refund = units
end
local give_tag = nil
if giving then
  give_tag = tonumber(ARGV[#ARGV])
  if not give_tag then
    return redis.error_reply('ERR rl: a give needs its window tag as the last ARGV, got ' .. tostring(ARGV[#ARGV]))
  end
end
