-- redisson/rw_release.lua: drop one hold of a side of a read-write lock in the layout
-- of Redisson's RReadWriteLock (see redisson/rw_acquire.lua), telling Redisson's
-- waiters and ours as Redisson's unlock does.
--
-- KEYS[1]  lock key
-- KEYS[2]  its release channel "redisson_rwlock:{<key>}" (in the key's slot)
-- ARGV[1]  owner id
-- ARGV[2]  "read" or "write"
-- ARGV[3]  "spublish" to publish on a shard channel; else PUBLISH
--
-- A read hold's last release deletes the hash unless another hold's timeout key lives
-- (the hash then lives as long as the longest of them: Redisson's rule) or a writer
-- holds (the writer's lease stays the hash's, where Redisson cuts it to the longest
-- read hold's); a write
-- hold's last release deletes the hash unless the writer still reads (the mode goes
-- back to "read"). Deleting the hash publishes "0" after a read hold (Redisson's
-- UNLOCK_MESSAGE) and "1" then "0" after a write hold: "1" (READ_UNLOCK_MESSAGE) wakes
-- every Redisson waiter then waiting, but one between its attempt and its wait misses
-- it (Redisson releases only as many permits as threads are queued) and would sleep
-- for the lease; the "0" leaves it a permit. An inner release leaves the lease as it
-- is (the watchdog keeps it).
--
-- Returns the owner's remaining hold count of that side, or -1 if it holds none.
local redisson = redisson_functions()
local key, owner, side = KEYS[1], ARGV[1], ARGV[2]
local publish = ARGV[3] == 'spublish' and 'spublish' or 'publish'
local mode = redis.call('hget', key, 'mode')
if side == 'write' then
  local field = owner .. ':write'
  if mode ~= 'write' or redis.call('hexists', key, field) == 0 then
    return -1
  end
  local count = redis.call('hincrby', key, field, -1)
  if count > 0 then
    return count
  end
  redis.call('hdel', key, field)
  if redis.call('hlen', key) == 1 then
    redis.call('del', key)
    redis.call(publish, KEYS[2], '1')
    redis.call(publish, KEYS[2], '0')
  else
    redis.call('hset', key, 'mode', 'read')
  end
  return 0
end
if not mode or redis.call('hexists', key, owner) == 0 then
  return -1
end
local count = redis.call('hincrby', key, owner, -1)
if count == 0 then
  redis.call('hdel', key, owner)
end
redis.call('del', redisson.beside(key, owner .. ':rwlock_timeout:' .. (count + 1)))
if redis.call('hlen', key) > 1 then
  if mode == 'write' then
    -- The writer still holds: its lease stays the hash's.
    return count
  end
  -- The longest lease left among the read holds (Redisson reads each holder's
  -- timeout keys, from its count down).
  local longest = -3
  for _, field in ipairs(redis.call('hkeys', key)) do
    local held = tonumber(redis.call('hget', key, field))
    if held then
      for n = held, 1, -1 do
        local timeout = redisson.beside(key, field .. ':rwlock_timeout:' .. n)
        longest = math.max(longest, redis.call('pttl', timeout))
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', key, longest)
    return count
  end
end
redis.call('del', key)
redis.call(publish, KEYS[2], '0')
return count
