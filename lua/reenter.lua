-- reenter.lua: raise the hold count of a reentrant hash lock the caller holds.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds the re-entry asks for; absent to leave the lease
--          alone (a watchdog keeps it)
--
-- One write when the caller is right that it holds the lock (the field was at least
-- 1). A re-entry may lengthen the lease, never shorten it: the key keeps the later of
-- its current expiry and now + ARGV[2] (one PTTL, and a PEXPIRE only if it lengthens).
--
-- Returns the hold count after this call, or 0 if the owner no longer held the lock
-- (it expired or was force-unlocked; nothing is changed).
-- Raises WRONGTYPE if KEYS[1] exists but is not a hash.
local key, owner = KEYS[1], ARGV[1]
local count = redis.call('hincrby', key, owner, 1)
if count > 1 then
  if ARGV[2] then
    local lease = tonumber(ARGV[2])
    local pttl = redis.call('pttl', key)
    -- -1: no expiry at all (set by someone else); nothing is longer than that.
    if pttl ~= -1 and pttl < lease then
      redis.call('pexpire', key, lease)
    end
  end
  return count
end
-- HINCRBY created the field: take it back (an emptied hash is deleted with it).
redis.call('hdel', key, owner)
return 0
