-- batch: runs several counter operations in one script call, one after the other, each exactly as
-- its own script (lua/<operation>.lua) would run it alone. The whole call is atomic, so each
-- operation is too, and the results are those of running the operations one by one in this order.
-- Built by src/redis/lua-scripts.ts (readBatchScript): the line `-- @operations` below becomes
-- one Lua function per operation script, `local function op_<name>(KEYS, ARGV) <script> end`, and
-- the table OPERATIONS mapping each name to that function and its key count, and `<name>+ledger` to
-- the same function with one key more, the counter's take ledger (a named take or a reclaim:
-- lua/includes/lease.lua). The algorithms
-- themselves are never written here: lua/<operation>.lua stays their only source. The built script
-- goes to Redis without comments and blank lines (stripLuaComments), so comments here cost nothing.
--
-- KEYS     the keys of every operation in order, as many per operation as its script takes
-- ARGV     per operation: its script name, n = the number of its ARGV, then its n ARGV
--          (now, the operation and its units or a lease id, parameters: see the script's header)
-- Returns  one entry per operation, in order: the script's reply {allowed 1/0, remaining,
--          retry_after_ms, reset_after_ms}, or, when that operation failed (an error reply, a failed
--          Redis command, a Lua error), the error message as a string. A failed operation fails
--          alone, as its own script call would: whatever it wrote before failing stays written (Redis
--          does not roll scripts back either), and the operations after it still run.

-- @operations

-- Read every operation header before running any, so a malformed call changes nothing.
local calls = {}
local next_key = 1
local a = 1
while a <= #ARGV do
  local name = ARGV[a]
  local operation = OPERATIONS[name]
  local argc = tonumber(ARGV[a + 1])
  if not operation or not argc or a + 1 + argc > #ARGV then
    return redis.error_reply('ERR rl batch: bad operation header at ARGV[' .. a .. ']: ' .. tostring(name))
  end
  local keys = {}
  for i = 1, operation.key_count do
    keys[i] = KEYS[next_key + i - 1]
  end
  local argv = {}
  for i = 1, argc do
    argv[i] = ARGV[a + 1 + i]
  end
  calls[#calls + 1] = { operation.run, keys, argv }
  next_key = next_key + operation.key_count
  a = a + 2 + argc
end
if next_key - 1 ~= #KEYS then
  return redis.error_reply('ERR rl batch: ' .. #KEYS .. ' keys given, the operations take ' .. (next_key - 1))
end

local results = {}
for i = 1, #calls do
  local ok, reply = pcall(calls[i][1], calls[i][2], calls[i][3])
  if not ok then
    -- redis.call raises a table {err = message}; Lua runtime errors are strings.
    if type(reply) == 'table' and reply.err then
      reply = reply.err
    end
    reply = tostring(reply)
  elseif type(reply) == 'table' and reply.err then
    -- The operation's own redis.error_reply (a bad `now`, say).
    reply = reply.err
  end
  results[i] = reply
end
return results
