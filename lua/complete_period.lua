-- complete_period.lua: record a once-per-period job as done, only while still holding its lock.
--
-- KEYS[1]  lock key
-- KEYS[2]  period marker key (same hash slot)
-- ARGV[1]  owner id
-- ARGV[2]  how long to keep the marker, in milliseconds
--
-- Returns 1 if the marker was written, 0 if the owner no longer holds the lock.
-- Both keys are checked before the write: raises WRONGTYPE if KEYS[1] exists but is not
-- a hash, and the error "WRONGTYPE KEYS[2] <key> ..." (naming the key) if KEYS[2]
-- exists but is not a string (SET would silently replace it).
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local marker = redis.call('type', KEYS[2]).ok
if marker ~= 'none' and marker ~= 'string' then
  return redis.error_reply('WRONGTYPE KEYS[2] ' .. KEYS[2] .. ' holds the wrong kind of value')
end
redis.call('set', KEYS[2], 'done', 'PX', ARGV[2])
return 1
