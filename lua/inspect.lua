-- inspect.lua: read a lock's state in one step.
--
-- KEYS[1]  lock key
-- KEYS[2]  fencing-token counter key
--
-- Returns { PTTL of the lock key (-2 if there is no lock), last fencing token or 0,
--           { owner, count, owner, count, ... } }.
-- Raises WRONGTYPE if KEYS[1] exists but is not a hash.
local owners = redis.call('hgetall', KEYS[1])
local token = tonumber(redis.call('get', KEYS[2]) or '0')
return { redis.call('pttl', KEYS[1]), token, owners }
