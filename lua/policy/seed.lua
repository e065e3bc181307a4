-- policy seed: writes the policy file's policies into a store that has NEVER held a policy.
-- Used by RedisPolicyStore.seedIfEmpty (src/policy-store/redis-policy-store.ts). Several nodes may start at
-- once: the emptiness check and the writes are one atomic step, so exactly one of them seeds.
--
-- KEYS[1..7]  as in commit.lua: current, heads, changed, versions, audit, auditn, meta
-- ARGV[1]     channel  (pub/sub channel for change messages)
-- ARGV[2..]   groups of five per policy: policy_id, version, policy JSON, version record JSON,
--             audit entry JSON
-- Returns     {revision}: the new revision when it seeded, 0 when the store already held (or had held)
--             policies.
--             Publishes {"policy_id":"","change":"reloaded","version":0,"revision":r} when it seeded.

if redis.call('HLEN', KEYS[2]) > 0 then
  return {0}
end
local revision = redis.call('HINCRBY', KEYS[7], 'revision', 1)
for i = 2, #ARGV, 5 do
  local id = ARGV[i]
  local version = ARGV[i + 1]
  redis.call('HSET', KEYS[1], id, ARGV[i + 2])
  redis.call('HSET', KEYS[2], id, version)
  redis.call('HSET', KEYS[3], id, revision)
  redis.call('HSET', KEYS[4], id .. '|' .. version, ARGV[i + 3])
  redis.call('HSET', KEYS[5], id .. '|1', ARGV[i + 4])
  redis.call('HSET', KEYS[6], id, 1)
end
redis.call('PUBLISH', ARGV[1], cjson.encode({policy_id = '', change = 'reloaded', version = 0, revision = revision}))
return {revision}
