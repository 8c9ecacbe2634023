-- release.lua: drop one hold of a reentrant hash lock.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds (re-applied while holds remain)
-- ARGV[3]  release channel, told when the lock becomes free
-- ARGV[4]  "spublish" to tell it as a shard channel (Redis Cluster 7.0+); else PUBLISH
--
-- Returns the owner's remaining hold count (0: the key was deleted and the
-- channel told), or -1 if the owner holds nothing.
local key, owner = KEYS[1], ARGV[1]
if redis.call('hexists', key, owner) == 0 then
  return -1
end
local count = redis.call('hincrby', key, owner, -1)
if count > 0 then
  redis.call('pexpire', key, ARGV[2])
  return count
end
-- Only one owner can hold a lock, so its last hold frees the whole key (and the
-- `token` field of a fenced hold with it).
redis.call('del', key)
redis.call(ARGV[4] == 'spublish' and 'spublish' or 'publish', ARGV[3], 'released')
return 0
