-- redisson/sem_acquire.lua: take one permit of a semaphore in the layout of Redisson's
-- RPermitExpirableSemaphore (see src/compat.rs), so that Java services' permits and
-- ours count against one limit.
--
-- KEYS[1]  the semaphore: a string, the number of permits free (Redisson's
--          trySetPermits and availablePermits)
-- KEYS[2]  its permits' deadlines: sorted set `{<key>}:timeout` (`<key>:timeout` when
--          the key has a brace), permit id -> deadline in ms since the epoch
-- KEYS[3]  its channel "redisson_sc:{<key>}", told the number of permits free when
--          permits come back
-- ARGV[1]  permit id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  the number of permits the caller asks within
-- ARGV[4]  "spublish" to publish on a shard channel; else PUBLISH
--
-- Permits whose deadline has passed come back first (as Redisson's acquire does: a
-- holder that died frees its permit within its lease). A semaphore never set up (no
-- KEYS[1]) is set up with ARGV[3] permits, as trySetPermits would; one whose permits
-- (free and held) are another number is refused. Deadlines are read by this server's
-- clock (Redisson's by its client's: keep the clocks in step).
--
-- Granted:  { 1, 0 }
-- Busy:     { 0, ms until the first permit's deadline (-1 if none expires) }
-- Raises "PERMITS <n>" if the semaphore has another number of permits, WRONGTYPE
-- (naming the key) if a key holds another type.
local redisson = redisson_functions()
local key, deadlines, id = KEYS[1], KEYS[2], ARGV[1]
local permits = tonumber(ARGV[3])
local publish = ARGV[4] == 'spublish' and 'spublish' or 'publish'
local wrong = redisson.wrong_type({ 'string', 'zset' })
if wrong then
  return wrong
end
local free = redis.call('get', key)
if free and not tonumber(free) then
  return redis.error_reply('WRONGTYPE KEYS[1] ' .. key .. ' holds the wrong kind of value')
end
local now = redisson.now()
local expired = redis.call('zrangebyscore', deadlines, 0, now)
for i = 1, #expired, 1000 do
  redis.call('zrem', deadlines, unpack(expired, i, math.min(i + 999, #expired)))
end
if #expired > 0 and free then
  free = redis.call('incrby', key, #expired)
  redis.call(publish, KEYS[3], free)
end
local held = redis.call('zcard', deadlines)
if not free then
  free = math.max(permits - held, 0)
  redis.call('set', key, free)
else
  free = tonumber(free)
  if free + held ~= permits then
    return redis.error_reply('PERMITS ' .. (free + held))
  end
end
if free >= 1 then
  redis.call('decrby', key, 1)
  redis.call('zadd', deadlines, now + tonumber(ARGV[2]), id)
  local ttl = redis.call('pttl', key)
  if ttl > 0 then
    redis.call('pexpire', deadlines, ttl)
  end
  return { 1, 0 }
end
local first = redis.call('zrange', deadlines, 0, 0, 'WITHSCORES')[2]
-- Redisson marks a permit that never expires with a deadline in the year 31,000.
if not first or tonumber(first) >= 922337203685477 then
  return { 0, -1 }
end
return { 0, math.max(tonumber(first) - now, 0) }
