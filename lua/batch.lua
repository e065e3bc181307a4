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
--          (now, the operation and its units or a slot id, parameters: see the script's header)
-- Returns  one entry per operation, in order: the script's reply {allowed 1/0, remaining,
--          retry_after_ms, reset_after_ms}, or, when that operation failed (an error reply, a failed
--          Redis command, a Lua error), the error message as a string. A failed operation fails
--          alone, as its own script call would: whatever it wrote before failing stays written (Redis
--          does not roll scripts back either), and the operations after it still run.

-- The operations' view of Redis: `redis` below, a local the operation functions see instead of the
-- global. Two things it does for the cost of a call (a decision over several layers runs one
-- operation per layer, each twice in a group):
-- * TIME is read once per script call: every operation of the call runs at the same instant (a
--   group's checks and runs included), as the call is one atomic step anyway.
-- * An HMGET asked again of a key nothing has written since (a group's run after its check) is
--   answered from the first reply. Any command but the reads below forgets its key's reply, and a
--   DEL (the one command the scripts send with several keys) every key it names; the scripts'
--   other writes name one key, and their other arguments are fields and values, never keys.
--   The scripts only read the replies they get.
local server = redis
local clock
local hash_reads = {}
local READS = { HGET = true, HGETALL = true, HEXISTS = true, HLEN = true, ZCARD = true, ZCOUNT = true, ZRANGE = true, ZRANGEBYSCORE = true, ZREVRANGE = true, ZSCORE = true }
local redis = setmetatable({
  call = function(command, key, ...)
    if command == 'TIME' then
      if not clock then
        clock = server.call('TIME')
      end
      return clock
    end
    if command == 'HMGET' then
      local fields = table.concat({ ... }, '\0')
      local known = hash_reads[key]
      if known and known[1] == fields then
        return known[2]
      end
      local reply = server.call('HMGET', key, ...)
      hash_reads[key] = { fields, reply }
      return reply
    end
    if not READS[command] then
      hash_reads[key] = nil
      if command == 'DEL' then
        for i = 1, select('#', ...) do
          hash_reads[select(i, ...)] = nil
        end
      end
    end
    return server.call(command, key, ...)
  end,
}, { __index = server })

-- @operations

-- A group (header `group`, k): the k operations after it, each with its header `name, n, p, v, s` and
-- its n ARGV, are all or nothing. Each is first run as a check: its ARGV with ARGV[p] = v (p may be
-- n + 1: one argument more), which answers as the operation would and writes nothing (a rate
-- script's `check` mode, concurrency_acquire's `check` flag). `s` is '1' for a soft operation, whose
-- refusal does not refuse the group, nor does a check that failed (its error string: its layer answers by
-- its failure mode, and the caller gives back the others if that refuses). When no check but soft ones refused, every admitted operation
-- runs as given; otherwise none does. The group's entry in the reply is the list of its operations'
-- replies: the run's for each that ran, the check's for the others. (A counter named twice in a group
-- is checked twice against its state before both: its second run may refuse, and then wrote nothing.)
-- Port of the group of src/counters/memory-store.ts: change both together.

local next_key = 1

-- One operation's header and ARGV from ARGV[a]; `checked`: the header has p, v and s after n. Returns
-- the call, or nil and the error reply, and the position after it.
local function parse_call(a, checked)
  local name = ARGV[a]
  local operation = OPERATIONS[name]
  local argc = tonumber(ARGV[a + 1])
  local skip = 2
  if checked then
    skip = 5
  end
  if not operation or not argc or a + skip - 1 + argc > #ARGV then
    return nil, redis.error_reply('ERR rl batch: bad operation header at ARGV[' .. a .. ']: ' .. tostring(name)), a
  end
  local keys = {}
  for i = 1, operation.key_count do
    keys[i] = KEYS[next_key + i - 1]
  end
  local argv = {}
  for i = 1, argc do
    argv[i] = ARGV[a + skip - 1 + i]
  end
  local call = { operation.run, keys, argv }
  if checked then
    local check_argv = {}
    for i = 1, argc do
      check_argv[i] = argv[i]
    end
    check_argv[tonumber(ARGV[a + 2])] = ARGV[a + 3]
    call[4] = check_argv
    call[5] = ARGV[a + 4] == '1'
  end
  next_key = next_key + operation.key_count
  return call, nil, a + skip + argc
end

-- Read every operation header before running any, so a malformed call changes nothing.
local calls = {}
local a = 1
while a <= #ARGV do
  if ARGV[a] == 'group' then
    local count = tonumber(ARGV[a + 1])
    if not count then
      return redis.error_reply('ERR rl batch: bad group header at ARGV[' .. a .. ']')
    end
    local group = {}
    a = a + 2
    for i = 1, count do
      local call, problem
      call, problem, a = parse_call(a, true)
      if not call then
        return problem
      end
      group[i] = call
    end
    calls[#calls + 1] = { group = group }
  else
    local call, problem
    call, problem, a = parse_call(a, false)
    if not call then
      return problem
    end
    calls[#calls + 1] = call
  end
end
if next_key - 1 ~= #KEYS then
  return redis.error_reply('ERR rl batch: ' .. #KEYS .. ' keys given, the operations take ' .. (next_key - 1))
end

-- One operation's reply, or its error message as a string.
local function run(fn, keys, argv)
  local ok, reply = pcall(fn, keys, argv)
  if not ok then
    -- redis.call raises a table {err = message}; Lua runtime errors are strings.
    if type(reply) == 'table' and reply.err then
      reply = reply.err
    end
    return tostring(reply)
  elseif type(reply) == 'table' and reply.err then
    -- The operation's own redis.error_reply (a bad `now`, say).
    return reply.err
  end
  return reply
end

local function run_group(group)
  local checks = {}
  local passed = {}
  local admitted = true
  for i = 1, #group do
    checks[i] = run(group[i][1], group[i][2], group[i][4])
    passed[i] = type(checks[i]) == 'table' and checks[i][1] == 1
    -- A failed operation (its error as a string) does not refuse the group: its layer answers by its
    -- own failure mode, and the caller gives back what the others took if that refuses the decision.
    if not passed[i] and not group[i][5] and type(checks[i]) ~= 'string' then
      admitted = false
    end
  end
  if not admitted then
    return checks
  end
  for i = 1, #group do
    if passed[i] then
      checks[i] = run(group[i][1], group[i][2], group[i][3])
    end
  end
  return checks
end

local results = {}
for i = 1, #calls do
  if calls[i].group then
    results[i] = run_group(calls[i].group)
  else
    results[i] = run(calls[i][1], calls[i][2], calls[i][3])
  end
end
return results
