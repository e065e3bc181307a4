-- include "slot": a hash whose field `x` holds the instant (epoch ms) its state goes stale.
--
-- Mirrors MemoryCounterStore.get(): state whose expire-at has come (x <= now) is absent, and is
-- deleted on the spot as the emulator deletes it. The expire-at is stored rather than derived, because
-- a live policy change (a new window) keeps the counter key and must not change when the old state
-- went stale. Needs the "time" and "mode" includes (a peek deletes nothing).

-- Returns nil when absent or stale, else the HMGET reply for x followed by the given fields.
local function load_slot(key, ...)
  local v = redis.call('HMGET', key, 'x', ...)
  if not v[1] then
    return nil
  end
  if tonumber(v[1]) <= now then
    if not peeking then
      redis.call('DEL', key)
    end
    return nil
  end
  return v
end
