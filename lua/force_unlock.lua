-- force_unlock.lua: delete a lock whoever holds it, and wake its waiters.
--
-- KEYS[1]  lock key
-- ARGV[1]  "spublish" to tell the release channel (KEYS[1] .. ":released") as a shard
--          channel (Redis 7.0+); else PUBLISH
--
-- The message names no client (see release.lua): every waiter's client tries at once.
--
-- Returns 1 if a lock was deleted, 0 if there was none.
-- Raises WRONGTYPE if KEYS[1] exists but is not a hash.
if redis.call('hlen', KEYS[1]) == 0 then
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[1] == 'spublish' and 'spublish' or 'publish', KEYS[1] .. ':released', 'released')
return 1
