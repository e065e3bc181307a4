-- policy snapshot: every current policy with its head and last-change revision, read atomically.
-- Used by RedisPolicyStore to load at start-up and to resynchronise after a missed change message.
--
-- KEYS[1..7]  as in commit.lua: current, heads, changed, versions, audit, auditn, meta
-- Returns     {revision, current, heads, changed}: the store revision, then HGETALL of current, heads
--             and changed (each a flat array field, value, field, value, ...)

return {
  tonumber(redis.call('HGET', KEYS[7], 'revision') or '0'),
  redis.call('HGETALL', KEYS[1]),
  redis.call('HGETALL', KEYS[2]),
  redis.call('HGETALL', KEYS[3]),
}
