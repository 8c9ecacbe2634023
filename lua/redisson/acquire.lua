-- redisson/acquire.lua: take a lock afresh in Redisson's layout (see src/compat.rs),
-- as Redisson's RLock and RFencedLock do, so that Java holders and ours exclude each
-- other.
--
-- KEYS[1]  lock key (hash: field = owner id "<uuid>:<integer>", value = hold count;
--          no other field, so that Redisson sees only holders)
-- KEYS[2]  RFencedLock's token counter "redisson_lock_token:{<key>}", given only to
--          draw a fencing token: INCR, as Redisson draws them, so both sides' tokens
--          come from one counter
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds
-- (Further arguments, as acquire.lua takes them, are ignored: Redisson's waiters
-- leave no mark, and data is refused before the call.)
--
-- A hold the caller already has is raised by reenter.lua, as Redisson's re-entry
-- does (HINCRBY). A field of ours still here is a hold the caller gave up as lost:
-- start over at 1.
--
-- Granted:  { 1, fencing token or 0 }
-- Busy:     { 0, remaining PTTL of the current holder in ms (-1 if it has none) }
-- Raises WRONGTYPE if KEYS[1] is not a hash, and "WRONGTYPE KEYS[2] <key> ..." if
-- KEYS[2] holds something other than an integer; nothing is written then.
local key, owner, lease = KEYS[1], ARGV[1], ARGV[2]
local pttl = redis.call('pttl', key)
if pttl ~= -2 and redis.call('hexists', key, owner) == 0 then
  return { 0, pttl }
end
if KEYS[2] then
  local last = redis.pcall('get', KEYS[2])
  if (type(last) == 'table' and last.err) or (last and not tonumber(last)) then
    return redis.error_reply('WRONGTYPE KEYS[2] ' .. KEYS[2] .. ' holds the wrong kind of value')
  end
end
redis.call('hset', key, owner, 1)
redis.call('pexpire', key, lease)
if not KEYS[2] then
  return { 1, 0 }
end
return { 1, redis.call('incr', KEYS[2]) }
