-- renew.lua: extend a lease, only for an owner that still holds the lock.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds
--
-- Returns 1 if the lease was extended, 0 if the owner holds nothing.
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
return 0
