-- policy commit: one change to one policy, atomically with its version record and audit entry.
-- Used by RedisPolicyStore.commit (src/policy-store/redis-policy-store.ts).
--
-- Every key shares one hash tag, so the script runs on one Redis Cluster slot.
-- KEYS[1]  current   hash: policy_id -> policy JSON (absent = never existed or deleted)
-- KEYS[2]  heads     hash: policy_id -> highest version ever written (survives delete)
-- KEYS[3]  changed   hash: policy_id -> store revision of the policy's last change
-- KEYS[4]  versions  hash: "<policy_id>|<version>" -> version record JSON
-- KEYS[5]  audit     hash: "<policy_id>|<n>" -> audit entry JSON (n = 1, 2, ...)
-- KEYS[6]  auditn    hash: policy_id -> number of audit entries
-- KEYS[7]  meta      hash: revision -> store revision (bumped by every change)
-- ARGV[1]  policy_id
-- ARGV[2]  expected_head   (the head the caller read; 0 = never existed)
-- ARGV[3]  must_exist      ('1' when the caller saw the policy as existing, '0' otherwise)
-- ARGV[4]  new_head        (the new policy's version; the unchanged head for a delete)
-- ARGV[5]  policy          (the new policy JSON, '' to delete)
-- ARGV[6]  version_record  (its version record JSON, '' for a delete)
-- ARGV[7]  audit           (the audit entry JSON)
-- ARGV[8]  channel         (pub/sub channel for change messages)
-- ARGV[9]  change          (change kind for the message: created | updated | deleted)
-- Returns  {committed 1/0, revision, head, exists 1/0}: committed, the new store revision, the new
--          head and whether the policy exists now; or not (revision 0, nothing written), the stored
--          head and whether it exists. Publishes {"policy_id","change","version","revision"} on success.

local id = ARGV[1]
local head = tonumber(redis.call('HGET', KEYS[2], id) or '0')
local exists = redis.call('HEXISTS', KEYS[1], id)
local must_exist = ARGV[3] == '1' and 1 or 0
if head ~= tonumber(ARGV[2]) or exists ~= must_exist then
  return {0, 0, head, exists}
end

local new_head = ARGV[4]
local revision = redis.call('HINCRBY', KEYS[7], 'revision', 1)
if ARGV[5] == '' then
  redis.call('HDEL', KEYS[1], id)
else
  redis.call('HSET', KEYS[1], id, ARGV[5])
  redis.call('HSET', KEYS[4], id .. '|' .. new_head, ARGV[6])
end
redis.call('HSET', KEYS[2], id, new_head)
redis.call('HSET', KEYS[3], id, revision)
local n = redis.call('HINCRBY', KEYS[6], id, 1)
redis.call('HSET', KEYS[5], id .. '|' .. n, ARGV[7])

local version = 0
if ARGV[5] ~= '' then version = tonumber(new_head) end
redis.call('PUBLISH', ARGV[8], cjson.encode({policy_id = id, change = ARGV[9], version = version, revision = revision}))
return {1, revision, tonumber(new_head), ARGV[5] == '' and 0 or 1}
