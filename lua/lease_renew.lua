-- lease_renew.lua: extend one holder's lease, for kinds whose holders expire one by
-- one (the semaphore; see sem_acquire.lua).
--
-- KEYS[1]  the lock's hash (field = holder)
-- KEYS[2]  its leases (sorted set: holder -> deadline in ms by this server's clock)
-- ARGV[1]  holder field
-- ARGV[2]  lease in milliseconds
--
-- A holder whose deadline has passed is not renewed, even if no call has dropped it
-- yet: it is dropped now. Returns 1 if the lease was extended, 0 if the holder holds
-- nothing.
if redis.replicate_commands then
  redis.replicate_commands()
end
local key, leases, id = KEYS[1], KEYS[2], ARGV[1]
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local deadline = redis.call('zscore', leases, id)
if not deadline or tonumber(deadline) <= now then
  if deadline then
    redis.call('zrem', leases, id)
    redis.call('hdel', key, id)
  end
  return 0
end
if redis.call('hexists', key, id) == 0 then
  return 0
end
redis.call('zadd', leases, now + tonumber(ARGV[2]), id)
local last = tonumber(redis.call('zrange', leases, -1, -1, 'WITHSCORES')[2])
redis.call('pexpireat', key, last)
redis.call('pexpireat', leases, last)
return 1
