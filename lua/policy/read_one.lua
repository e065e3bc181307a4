-- policy read_one: the authoritative state of one policy id, read atomically.
-- Used by RedisPolicyStore.fetch and by change-message handling (src/policy-store/redis-policy-store.ts).
--
-- KEYS[1..7]  as in commit.lua: current, heads, changed, versions, audit, auditn, meta
-- ARGV[1]     policy_id
-- Returns     {policy, head, changed, revision}: the policy JSON ('' when absent), its head, the store
--             revision of its last change, and the store revision.

local id = ARGV[1]
return {
  redis.call('HGET', KEYS[1], id) or '',
  tonumber(redis.call('HGET', KEYS[2], id) or '0'),
  tonumber(redis.call('HGET', KEYS[3], id) or '0'),
  tonumber(redis.call('HGET', KEYS[7], 'revision') or '0'),
}
