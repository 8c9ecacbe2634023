-- acquire.lua: take or re-enter a reentrant hash lock.
--
-- KEYS[1]  lock key (hash: field = owner id, value = hold count)
-- KEYS[2]  fencing-token counter key (same hash slot; never expires)
-- ARGV[1]  owner id "<client-uuid>:<task>"
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  "1" to draw a fencing token on a fresh acquisition, else "0"
--
-- Granted:  { hold count after this call, fencing token or 0 }
-- Busy:     { 0, remaining PTTL of the current holder in ms (-1 if it has none) }
-- Raises WRONGTYPE if KEYS[1] exists but is not a hash.
local key, owner = KEYS[1], ARGV[1]
-- PTTL answers "free?" (-2) and, when busy, how long the holder has left.
local pttl = redis.call('pttl', key)
if pttl == -2 or redis.call('hexists', key, owner) == 1 then
  local count = redis.call('hincrby', key, owner, 1)
  redis.call('pexpire', key, ARGV[2])
  local token = 0
  if count == 1 and ARGV[3] == '1' then
    token = redis.call('incr', KEYS[2])
  end
  return { count, token }
end
return { 0, pttl }
