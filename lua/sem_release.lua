-- sem_release.lua: give back one permit of a semaphore.
--
-- KEYS[1]  semaphore key (see sem_acquire.lua)
-- KEYS[2]  its leases
-- ARGV[1]  permit id
-- ARGV[2]  "spublish" to tell the release channel (KEYS[1] .. ":released") as a shard
--          channel (Redis 7.0+); else PUBLISH
--
-- The channel is told only if someone was refused a permit and waits (the `waiting`
-- field, which this clears: the next refusal sets it again). The message names no
-- client: every waiting client's head may try at once.
--
-- Takes 4 redis.calls (HMGET, ZREM, ZCARD, then DEL or HDEL) and the PUBLISH if any.
--
-- Returns 0 if the permit was held (and is now free), -1 if it was not.
local key, leases, id = KEYS[1], KEYS[2], ARGV[1]
local fields = redis.call('hmget', key, id, 'waiting')
if not fields[1] then
  return -1
end
local waiting = fields[2]
redis.call('zrem', leases, id)
if redis.call('zcard', leases) == 0 then
  redis.call('del', key, leases)
elseif waiting then
  redis.call('hdel', key, id, 'data:' .. id, 'waiting')
else
  redis.call('hdel', key, id, 'data:' .. id)
end
if waiting then
  redis.call(ARGV[2] == 'spublish' and 'spublish' or 'publish', key .. ':released', '')
end
return 0
