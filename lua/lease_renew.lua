-- lease_renew.lua: extend one holder's lease, for the kinds whose holders expire one
-- by one (after leases.lua).
--
-- KEYS[1]  the lock's hash (field = holder)
-- KEYS[2]  its leases (see leases.lua)
-- ARGV[1]  holder field
-- ARGV[2]  lease in milliseconds
--
-- A holder whose deadline has passed is not renewed, even if no call has dropped it
-- yet: it is dropped now. Returns 1 if the lease was extended, 0 if the holder holds
-- nothing.
local key, set, holder = KEYS[1], KEYS[2], ARGV[1]
if redis.call('hget', key, 'solo') == holder then
  -- A read-write lock's lone holder: its deadline is the hash's expiry (see
  -- rw_acquire.lua).
  redis.call('pexpire', key, ARGV[2])
  return 1
end
local leases = leases_functions()
local now = leases.now()
leases.drop_expired(key, set, now)
if redis.call('hexists', key, holder) == 0 then
  return 0
end
leases.hold_until(key, set, holder, now + tonumber(ARGV[2]))
return 1
