-- fence_set.lua: write a value guarded by a fencing token.
--
-- KEYS[1]  fenced resource (hash: `value` = the data, `token` = newest token seen)
-- ARGV[1]  the value to write
-- ARGV[2]  the writer's fencing token
--
-- Returns { 1, token } when written, or { 0, newest } when the presented
-- token is older than the newest the key has seen (nothing is changed).
-- Raises WRONGTYPE if KEYS[1] exists but is not a hash.
local newest = tonumber(redis.call('hget', KEYS[1], 'token') or '0')
local presented = tonumber(ARGV[2])
if presented < newest then
  return { 0, newest }
end
redis.call('hset', KEYS[1], 'value', ARGV[1], 'token', ARGV[2])
return { 1, presented }
