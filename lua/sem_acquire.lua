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
-- An uncontended grant takes 6 redis.calls (HMGET, TIME, ZADD, HSET, PEXPIREAT of both
-- keys; a ZRANGE of the earliest deadline, ZCARD and a ZRANGE of the latest more when
-- others hold); a refusal 4 (HMGET, ZRANGE, TIME, ZCARD), plus an HSET when
-- it sets the `waiting` mark. Expired permits are dropped only when the earliest
-- deadline has passed (see leases.lua).
--
-- Raises "PERMITS <n>" if the semaphore is held with another number of permits,
-- WRONGTYPE (naming the key) if a key holds another type.
local key, set, id = KEYS[1], KEYS[2], ARGV[1]
local permits = tonumber(ARGV[3])
local leases = leases_functions()
-- What decides the call, in one read (a WRONGTYPE here names KEYS[1]).
local function read()
  return redis.call('hmget', key, id, 'permits', 'waiting')
end
local fields = read()
-- The earliest deadline, false if none. `permits` is there whenever the leases are not
-- empty (only deleting the hash removes it): without it, the semaphore is free, and
-- its leases key is checked by the first write, a ZADD.
local earliest, wrong = false, nil
if fields[2] then
  earliest, wrong = leases.earliest(set, 2)
  if earliest == nil then
    return wrong
  end
end
local now = leases.now()
if earliest and earliest <= now then
  leases.drop_expired(key, set, now)
  earliest = leases.earliest(set, 2)
  fields = read()
end
local held = earliest and redis.call('zcard', set) or 0
local stored = fields[2]
if stored and tonumber(stored) ~= permits and held > 0 then
  return redis.error_reply('PERMITS ' .. stored)
end
if fields[1] or held < permits then
  local deadline = now + tonumber(ARGV[2])
  if not fields[2] then
    local failed = leases.first_add(set, 2, deadline, id)
    if failed then
      return failed
    end
  end
  if ARGV[5] and ARGV[5] ~= '' then
    redis.call('hset', key, id, 1, 'permits', permits, 'data:' .. id, ARGV[5])
  else
    redis.call('hset', key, id, 1, 'permits', permits)
  end
  leases.hold_until(key, set, id, deadline, held == 0, not fields[2])
  return { 1, 0 }
end
if ARGV[4] == 'wait' and not fields[3] then
  redis.call('hset', key, 'waiting', 1)
end
return { 0, math.max(earliest - now, 1) }
