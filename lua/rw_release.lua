-- rw_release.lua: drop one read or write hold of a read-write lock (after leases.lua).
--
-- KEYS[1]  lock key, KEYS[2] its leases (see rw_acquire.lua)
-- ARGV[1]  the holder's field (`<owner>` for a read hold, `<owner>:w` for a write hold)
-- ARGV[2]  "spublish" to tell the release channel as a shard channel; else PUBLISH
--
-- When the release lets someone in (the last holder left, or the writer left) and
-- someone was refused meanwhile, the release channel is told, with a message naming
-- no client: every waiting client's head waiter asks at once, and every waiting
-- reader, unless the message is "writer <ms>": a writer's mark keeps readers out for
-- <ms> more, so they sleep on until it runs out or the next message. A writer's mark that
-- keeps new readers out outlives the lock's keys until it runs out.
--
-- Every redis.call is counted (see rw_acquire.lua): a nested hold's release takes 2
-- (HMGET, HINCRBY); a lone holder's 2 (HMGET, DEL; TIME too if a writer's mark is
-- kept), the last of several 3 (HMGET, ZCARD, DEL); one of several holders' 6 (HMGET, ZCARD, ZREM, TIME, ZRANGE of the
-- earliest deadline, HDEL; a writer's 2 more). Expired
-- holders are dropped only when the earliest deadline has passed (see leases.lua).
--
-- Returns the holder's remaining count, or -1 if it held nothing.
local key, set, field = KEYS[1], KEYS[2], ARGV[1]
local fields = redis.call('hmget', key, field, 'waiting', 'writer_waits', 'solo')
local count = tonumber(fields[1])
if not count or count < 1 then
  if count then
    redis.call('hdel', key, field)
  end
  return -1
end
if count > 1 then
  return redis.call('hincrby', key, field, -1)
end
-- The leases' functions are made only by the paths below that need them (see
-- leases.lua): a lone holder's last hold with nobody to tell needs none.
local writing = string.sub(field, -2) == ':w'
local lets_in = writing
local now
-- A lone holder (`solo`, see rw_acquire.lua) is the last; any other holder's field has
-- its deadline in the set: with one member, that is this holder, the last.
local left = 0
if fields[4] and fields[4] ~= field then
  -- (Not written by these scripts: a lone holder is the only one.)
  redis.call('hdel', key, field, 'data:' .. field)
  return 0
elseif not fields[4] then
  left = redis.call('zcard', set) - 1
end
if left > 0 then
  redis.call('zrem', set, field)
  local leases = leases_functions()
  now = leases.now()
  local earliest = tonumber(redis.call('zrange', set, 0, 0, 'WITHSCORES')[2])
  if earliest <= now then
    for _, gone in ipairs(leases.drop_expired(key, set, now)) do
      if string.sub(gone, -2) == ':w' then
        -- The writer's hold expired.
        writing, lets_in = true, true
      end
    end
    left = redis.call('zcard', set)
  end
end
if left > 0 then
  redis.call('hdel', key, field, 'data:' .. field)
  if writing then
    redis.call('hdel', key, 'writer', 'token')
    redis.call('hset', key, 'mode', 'read')
  end
else
  redis.call('del', key, set)
  lets_in = true
  if fields[3] then
    -- A writer's mark that keeps new readers out outlives the lock's keys until it
    -- runs out.
    now = now or leases_functions().now()
    local writer_waits = tonumber(fields[3])
    if writer_waits > now then
      redis.call('hset', key, 'writer_waits', writer_waits)
      redis.call('pexpireat', key, writer_waits)
    end
  end
end
if lets_in and fields[2] then
  -- While a writer's mark keeps new readers out, the message says so: it lets in only
  -- a writer, and waiting readers sleep on (see src/rw.rs) without asking again, so
  -- the `waiting` mark stays for the release that lets them in.
  local message = ''
  if fields[3] then
    now = now or leases_functions().now()
    if tonumber(fields[3]) > now then
      message = 'writer ' .. (tonumber(fields[3]) - now)
    end
  end
  if message ~= '' and left == 0 then
    redis.call('hset', key, 'waiting', 1)
  elseif message == '' and left > 0 then
    redis.call('hdel', key, 'waiting')
  end
  redis.call(ARGV[2] == 'spublish' and 'spublish' or 'publish', key .. ':released', message)
end
return 0
