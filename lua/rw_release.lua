-- rw_release.lua: drop one read or write hold of a read-write lock (after leases.lua).
--
-- KEYS[1]  lock key, KEYS[2] its leases (see rw_acquire.lua)
-- ARGV[1]  the holder's field (`<owner>` for a read hold, `<owner>:w` for a write hold)
-- ARGV[2]  "spublish" to tell the release channel as a shard channel; else PUBLISH
--
-- When the release lets someone in (the last holder left, or the writer left) and
-- someone was refused meanwhile, the release channel is told, with a message naming
-- no client: every waiting client's head waiter asks at once. A writer's mark that
-- keeps new readers out outlives the lock's keys until it runs out.
--
-- Returns the holder's remaining count, or -1 if it held nothing.
local key, set, field = KEYS[1], KEYS[2], ARGV[1]
local count = redis.call('hincrby', key, field, -1)
if count < 0 then
  redis.call('hdel', key, field)
  return -1
end
if count > 0 then
  return count
end
redis.call('hdel', key, field, 'data:' .. field)
redis.call('zrem', set, field)
local now = leases.now()
leases.drop_expired(key, set, now)
local lets_in = false
if string.sub(field, -2) == ':w' then
  redis.call('hdel', key, 'writer', 'token')
  redis.call('hset', key, 'mode', 'read')
  lets_in = true
end
local waiting = redis.call('hget', key, 'waiting')
if redis.call('zcard', set) == 0 then
  local writer_waits = tonumber(redis.call('hget', key, 'writer_waits') or 0)
  redis.call('del', key, set)
  if writer_waits > now then
    redis.call('hset', key, 'writer_waits', writer_waits)
    redis.call('pexpireat', key, writer_waits)
  end
  lets_in = true
end
if lets_in and waiting then
  redis.call('hdel', key, 'waiting')
  redis.call(ARGV[2] == 'spublish' and 'spublish' or 'publish', key .. ':released', '')
end
return 0
