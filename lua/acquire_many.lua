-- acquire_many.lua: take many free mutexes in one call, each only as acquire.lua's
-- first path would: a lock that is free and nobody queues for, taken for an owner
-- that asks for no token, data or hints. Anything else is left untouched, for
-- acquire.lua to answer (and, for a waiter, to mark the lock and queue its client).
-- Acquisitions that many tasks of one client start at once go out together.
--
-- KEYS     per lock, its key and its queue of waiting clients (see acquire.lua; on
--          a cluster, all in one slot)
-- ARGV     per lock, the owner id, then the lease in milliseconds
--
-- Returns, per lock in order, 1 if it was taken (hold count 1, no token) or 0 if
-- nothing was done. A key of another type is not free: 0, and acquire.lua names it.
local taken = {}
for i = 1, #KEYS / 2 do
  local key = KEYS[2 * i - 1]
  if redis.call('exists', key, KEYS[2 * i]) == 0 then
    redis.call('hset', key, ARGV[2 * i - 1], 1)
    redis.call('pexpire', key, ARGV[2 * i])
    taken[i] = 1
  else
    taken[i] = 0
  end
end
return taken
