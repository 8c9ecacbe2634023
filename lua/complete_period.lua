-- complete_period.lua: record a once-per-period job as done, only while still holding its lock.
--
-- KEYS[1]  lock key
-- KEYS[2]  period marker key (same hash slot)
-- ARGV[1]  owner id
-- ARGV[2]  how long to keep the marker, in milliseconds
--
-- Returns 1 if the marker was written, 0 if the owner no longer holds the lock.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('set', KEYS[2], 'done', 'PX', ARGV[2])
return 1
