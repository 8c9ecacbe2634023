-- redisson/release.lua: drop one hold of a lock in Redisson's layout (see
-- src/compat.rs), telling Redisson's waiters and ours as Redisson's unlock does.
--
-- KEYS[1]  lock key
-- KEYS[2]  its release channel "redisson_lock__channel:{<key>}" (in the key's slot)
-- ARGV[1]  owner id
-- ARGV[2]  "spublish" to publish on a shard channel (Redisson's sharded subscription
--          mode, its default on a Redis 7 cluster); else PUBLISH
-- (ARGV[3], release.lua's hint, is ignored.)
--
-- The last hold deletes the key and publishes Redisson's unlock message "0": always,
-- as Redisson does, since its waiters leave no mark in the hash. The lease is left as
-- it is on an inner release (the watchdog keeps it).
--
-- Returns the owner's remaining hold count (0: the key was deleted and the waiters
-- told), or -1 if the owner holds nothing.
local key, owner = KEYS[1], ARGV[1]
if redis.call('hexists', key, owner) == 0 then
  return -1
end
local count = redis.call('hincrby', key, owner, -1)
if count > 0 then
  return count
end
redis.call('del', key)
redis.call(ARGV[2] == 'spublish' and 'spublish' or 'publish', KEYS[2], '0')
return 0
