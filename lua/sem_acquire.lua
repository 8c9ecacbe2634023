-- sem_acquire.lua: take one permit of a semaphore (after leases.lua).
--
-- KEYS[1]  semaphore key (hash: field = permit id "<client-uuid>:<task>:p<n>", value 1;
--          field `permits` = the number of permits it was first taken with; field
--          `waiting` = "1" once someone was refused a permit and waits)
-- KEYS[2]  its leases (see leases.lua)
-- ARGV[1]  permit id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  the number of permits the caller asks within
-- ARGV[4]  "wait" if the caller waits for a release when refused (sets `waiting`, so
--          that the next release publishes); anything else for a single try
-- ARGV[5]  data to keep with the permit (field `data:<permit id>`, dropped with it),
--          or empty for none
--
-- Granted:  { 1, 0 }
-- Busy:     { 0, ms until the first permit's deadline }
-- Raises "PERMITS <n>" if the semaphore is held with another number of permits,
-- WRONGTYPE (naming the key) if a key holds another type.
local key, set, id = KEYS[1], KEYS[2], ARGV[1]
local permits = tonumber(ARGV[3])
local wrong = leases.wrong_type(KEYS)
if wrong then
  return wrong
end
local now = leases.now()
leases.drop_expired(key, set, now)
local stored = redis.call('hget', key, 'permits')
if stored and tonumber(stored) ~= permits and redis.call('zcard', set) > 0 then
  return redis.error_reply('PERMITS ' .. stored)
end
if redis.call('zscore', set, id) or redis.call('zcard', set) < permits then
  redis.call('hset', key, id, 1, 'permits', permits)
  if ARGV[5] and ARGV[5] ~= '' then
    redis.call('hset', key, 'data:' .. id, ARGV[5])
  end
  leases.hold_until(key, set, id, now + tonumber(ARGV[2]))
  return { 1, 0 }
end
if ARGV[4] == 'wait' then
  redis.call('hset', key, 'waiting', 1)
end
local first = tonumber(redis.call('zrange', set, 0, 0, 'WITHSCORES')[2])
return { 0, math.max(first - now, 1) }
