-- fence.lua: read or write a value guarded by a fencing token.
--
-- KEYS[1]  fenced resource (hash: `value` = the data, `token` = newest token seen)
-- ARGV[1]  the caller's fencing token: a decimal u64 without sign or leading zeros
-- ARGV[2]  the value to write; absent for a fenced read
--
-- A token older than the newest the key has seen is refused and nothing changes:
-- returns { 0, newest }. Otherwise the presented token becomes the newest, the value
-- is written (when given), and the call returns { 1, value } with the key's value
-- after the call (false when a read finds none). A read records its token too, so
-- that a holder overtaken after it read cannot write back a value computed from a
-- stale read (a read-modify-write stays whole).
-- Tokens are compared as decimal strings, so the check is exact for every u64 (Lua
-- numbers are doubles, exact only below 2^53). Raises WRONGTYPE if KEYS[1] exists but
-- is not a hash, and an error for a malformed token.
local presented = ARGV[1]
if not string.match(presented, '^[1-9]%d*$') or #presented > 20 then
  return redis.error_reply('ERR fencing token must be a positive decimal integer')
end
local newest = redis.call('hget', KEYS[1], 'token') or '0'
-- Is decimal a < decimal b? Longer is larger; equal lengths compare in two parts of
-- at most 10 digits, each exact as a double.
local function older(a, b)
  if #a ~= #b then
    return #a < #b
  end
  local high_a, high_b = tonumber(string.sub(a, 1, -11)) or 0, tonumber(string.sub(b, 1, -11)) or 0
  if high_a ~= high_b then
    return high_a < high_b
  end
  return tonumber(string.sub(a, -10)) < tonumber(string.sub(b, -10))
end
if older(presented, newest) then
  return { 0, newest }
end
if ARGV[2] then
  redis.call('hset', KEYS[1], 'value', ARGV[2], 'token', presented)
  return { 1, ARGV[2] }
end
if presented ~= newest then
  redis.call('hset', KEYS[1], 'token', presented)
end
return { 1, redis.call('hget', KEYS[1], 'value') }
