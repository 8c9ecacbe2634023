-- redisson/sem_release.lua: give back one permit of a semaphore in the layout of
-- Redisson's RPermitExpirableSemaphore (see redisson/sem_acquire.lua), telling the
-- channel the number of permits free, as Redisson's release does.
--
-- KEYS[1]  the semaphore (permits free)
-- KEYS[2]  its permits' deadlines
-- KEYS[3]  its channel
-- ARGV[1]  permit id
-- ARGV[2]  "spublish" to publish on a shard channel; else PUBLISH
--
-- Returns 0 if the permit was held, -1 if not (never taken, given back already, or
-- past its deadline: a permit that ran out is given back all the same).
local redisson = redisson_functions()
local deadlines, id = KEYS[2], ARGV[1]
local deadline = redis.call('zscore', deadlines, id)
if not deadline then
  return -1
end
redis.call('zrem', deadlines, id)
local free = redis.call('incrby', KEYS[1], 1)
redis.call(ARGV[2] == 'spublish' and 'spublish' or 'publish', KEYS[3], free)
local now = redisson.now()
if tonumber(deadline) <= now then
  return -1
end
return 0
