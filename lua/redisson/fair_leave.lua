-- redisson/fair_leave.lua: take a waiter that gives up out of a fair lock's queue in
-- the layout of Redisson's RFairLock (see redisson/fair_acquire.lua), as its
-- acquireFailedAsync does: every deadline behind it moves one wait earlier.
--
-- KEYS[1]  lock key, KEYS[2] the queue, KEYS[3] the waiters' deadlines, KEYS[4] the
--          lock's channel (see redisson/fair_release.lua)
-- ARGV[1]  owner id
-- ARGV[2]  the wait in milliseconds (see redisson/fair_acquire.lua)
-- ARGV[3]  "spublish" to publish on a shard channel; else PUBLISH
--
-- A waiter that is not queued (it was granted the lock, or dropped) changes nothing.
-- One that headed the queue of a free lock tells the new head, which a release would
-- have told instead (Redisson's own does not: its next waiter asks at its timeout).
--
-- Returns 1 if the waiter was queued, else 0.
local redisson = redisson_functions()
local key, queue, deadlines, owner = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
if not redis.call('zscore', deadlines, owner) then
  return 0
end
local waiters = redis.call('lrange', queue, 0, -1)
local at = #waiters + 1
for i, waiter in ipairs(waiters) do
  if waiter == owner then
    at = i
    break
  end
end
for i = at + 1, #waiters do
  redis.call('zincrby', deadlines, -tonumber(ARGV[2]), waiters[i])
end
redis.call('zrem', deadlines, owner)
redis.call('lrem', queue, 0, owner)
if at == 1 and redis.call('exists', key) == 0 then
  redisson.tell_head(queue, KEYS[4], ARGV[3])
end
return 1
