-- redisson/fair_release.lua: drop one hold of a fair lock in the layout of Redisson's
-- RFairLock (see redisson/fair_acquire.lua), telling the head of the queue alone, as
-- Redisson's unlock does.
--
-- KEYS[1]  lock key
-- KEYS[2]  the queue, KEYS[3] the waiters' deadlines (see redisson/fair_acquire.lua)
-- KEYS[4]  the lock's channel "redisson_lock__channel:{<key>}": a waiter's own is it
--          and ":<owner>" (in the key's slot)
-- ARGV[1]  owner id
-- ARGV[2]  "spublish" to publish on a shard channel; else PUBLISH
--
-- Drops the stale heads first (as redisson/fair_acquire.lua does). The last hold
-- deletes the hash and tells the head of the queue "0"; so does a release finding
-- the lock gone (its hold ran out: the head may be waiting for it). An inner release
-- leaves the lease as it is (the watchdog keeps it).
--
-- Returns the owner's remaining hold count (0: the hash was deleted), or -1 if the
-- owner holds nothing.
local redisson = redisson_functions()
local key, queue = KEYS[1], KEYS[2]
redisson.drop_stale_heads(queue, KEYS[3], redisson.now())
if redis.call('exists', key) == 0 then
  redisson.tell_head(queue, KEYS[4], ARGV[2])
  return -1
end
if redis.call('hexists', key, ARGV[1]) == 0 then
  return -1
end
local count = redis.call('hincrby', key, ARGV[1], -1)
if count > 0 then
  return count
end
redis.call('del', key)
redisson.tell_head(queue, KEYS[4], ARGV[2])
return 0
