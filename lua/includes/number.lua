-- include "number": exact number formatting and the reply of every script.
--
-- Lua's tostring (and redis.call with a number argument) keeps only 14 significant digits; 17 make a
-- double round-trip exactly, so stored float state (bucket levels, sums) reads back bit-identical.
local function fmt(x)
  return string.format('%.17g', x)
end

-- Redis turns a Lua number into an integer reply by truncation. Every result the emulator can give
-- for a validated policy is a whole number and goes back as an integer; anything else (a fraction,
-- -0, an infinity, NaN: only possible for specs validation never produces) goes back as its exact
-- decimal string, which the TypeScript side parses with Number(), so the two stores still agree.
local function reply_number(x)
  if x == math.floor(x) and x >= -9007199254740991 and x <= 9007199254740991 and not (x == 0 and 1 / x < 0) then
    return x
  end
  return fmt(x)
end

-- {allowed (1/0), remaining, retry_after_ms, reset_after_ms}
local function reply(allowed, remaining, retry_after, reset_after)
  return { allowed and 1 or 0, reply_number(remaining), reply_number(retry_after), reply_number(reset_after) }
end
