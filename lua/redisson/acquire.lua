-- redisson/acquire.lua: take a lock afresh in Redisson's layout (see src/compat.rs),
-- as Redisson's RLock and RFencedLock do, so that Java holders and ours exclude each
-- other.
--
-- KEYS[1]  lock key (hash: field = owner id "<uuid>:<integer>", value = hold count;
--          no other field, so that Redisson sees only holders)
-- KEYS[2]  RFencedLock's token counter "redisson_lock_token:{<key>}", given only to
--          draw a fencing token. Both sides draw from it: Redisson INCRs it; we draw
--          max(counter + 1, server TIME in microseconds), as fencing.lua does, and
--          set the counter to it (never expiring: Redisson's next INCR continues above
--          it). A plain INCR would start over at 1 after a restart that lost the
--          counter; the clock does not.
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
if KEYS[2] and redis.replicate_commands then
  -- Redis < 5 replicates scripts verbatim and refuses writes after TIME unless the
  -- script replicates its effects instead; from 7.0 this is a no-op.
  redis.replicate_commands()
end
local pttl = redis.call('pttl', key)
if pttl ~= -2 and redis.call('hexists', key, owner) == 0 then
  return { 0, pttl }
end
local last = 0
if KEYS[2] then
  -- Read before the first write: a counter of another type fails the call with
  -- nothing written.
  last = redis.pcall('get', KEYS[2])
  if (type(last) == 'table' and last.err) or (last and not tonumber(last)) then
    return redis.error_reply('WRONGTYPE KEYS[2] ' .. KEYS[2] .. ' holds the wrong kind of value')
  end
  last = tonumber(last or '0')
end
redis.call('hset', key, owner, 1)
redis.call('pexpire', key, lease)
if not KEYS[2] then
  return { 1, 0 }
end
local now = redis.call('time')
local token = tonumber(now[1]) * 1000000 + tonumber(now[2])
if token <= last then
  token = last + 1
end
redis.call('set', KEYS[2], string.format('%d', token))
return { 1, token }
