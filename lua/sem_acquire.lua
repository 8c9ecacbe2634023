-- sem_acquire.lua: take one permit of a semaphore whose permits expire one by one.
--
-- KEYS[1]  semaphore key (hash: field = permit id "<client-uuid>:<task>:p<n>", value 1;
--          field `permits` = the number of permits it was first taken with; field
--          `waiting` = "1" once someone was refused a permit and waits)
-- KEYS[2]  its leases (sorted set, same slot: member = permit id, score = the permit's
--          deadline in ms by this server's clock)
-- ARGV[1]  permit id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  the number of permits the caller asks within
-- ARGV[4]  "wait" if the caller waits for a release when refused (sets `waiting`, so
--          that the next release publishes); anything else for a single try
--
-- Redis 7.0 has no per-field expiry, so each permit's deadline is kept as data and
-- every call first drops the permits whose deadline has passed: a holder that died
-- frees its permit within its own lease, while other holders renew theirs.
--
-- Granted:  { 1, 0 }
-- Busy:     { 0, ms until the first permit's deadline }
-- Raises "PERMITS <n>" if the semaphore is held with another number of permits,
-- WRONGTYPE (naming the key) if a key holds another type.
if redis.replicate_commands then
  redis.replicate_commands()
end
local key, leases, id = KEYS[1], KEYS[2], ARGV[1]
local lease, permits = tonumber(ARGV[2]), tonumber(ARGV[3])
for i, k in ipairs({ key, leases }) do
  local found = redis.call('type', k).ok
  if found ~= 'none' and found ~= (i == 1 and 'hash' or 'zset') then
    return redis.error_reply('WRONGTYPE KEYS[' .. i .. '] ' .. k .. ' holds the wrong kind of value')
  end
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local expired = redis.call('zrangebyscore', leases, '-inf', now)
for _, gone in ipairs(expired) do
  redis.call('hdel', key, gone)
end
if #expired > 0 then
  redis.call('zremrangebyscore', leases, '-inf', now)
end
local stored = redis.call('hget', key, 'permits')
if stored and tonumber(stored) ~= permits and redis.call('zcard', leases) > 0 then
  return redis.error_reply('PERMITS ' .. stored)
end
local mine = redis.call('zscore', leases, id)
if mine or redis.call('zcard', leases) < permits then
  local deadline = now + lease
  redis.call('hset', key, id, 1, 'permits', permits)
  redis.call('zadd', leases, deadline, id)
  -- Both keys live as long as the latest deadline.
  local last = tonumber(redis.call('zrange', leases, -1, -1, 'WITHSCORES')[2])
  redis.call('pexpireat', key, last)
  redis.call('pexpireat', leases, last)
  return { 1, 0 }
end
if ARGV[4] == 'wait' then
  redis.call('hset', key, 'waiting', 1)
end
local first = tonumber(redis.call('zrange', leases, 0, 0, 'WITHSCORES')[2])
return { 0, math.max(first - now, 1) }
