-- inspect.lua: read a lock of any kind in one step, changing nothing (after leases.lua).
--
-- KEYS[1]   the lock's hash (see acquire.lua, fair_queue.lua, rw_acquire.lua and
--           sem_acquire.lua for its fields)
-- KEYS[2..] the sorted sets of its kind: none for the mutex; the queue and the
--           waiters' liveness for the fair lock (see fair_queue.lua); the holders'
--           leases for the read-write lock and the semaphore (see leases.lua)
--
-- Returns { PTTL of KEYS[1] (-2 if it does not exist),
--           its fields and values { field, value, field, value, ... },
--           this server's clock in milliseconds,
--           { each sorted set of KEYS[2..] as { member, score, ... }, in order } }.
-- Holders and waiters whose deadline has passed are returned as they are (the next
-- script that changes the lock drops them): the reader compares with the clock.
-- Raises WRONGTYPE (naming the key) if a key holds another type.
local leases = leases_functions()
local wrong = leases.wrong_type(KEYS)
if wrong then
  return wrong
end
local sets = {}
for i = 2, #KEYS do
  sets[#sets + 1] = redis.call('zrange', KEYS[i], 0, -1, 'WITHSCORES')
end
return { redis.call('pttl', KEYS[1]), redis.call('hgetall', KEYS[1]), leases.now(), sets }
